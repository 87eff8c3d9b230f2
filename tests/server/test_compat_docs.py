"""Every curl example of docs/compat.md, run in order with curl against a
real server: each answers JSON that says it worked (code 0, success true),
and the answer the page shows after it, but for a due time."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chronoq.server import ServerSettings

from .live import LiveServer

DOC = Path(__file__).parents[2] / "docs" / "compat.md"
BASE = "http://127.0.0.1:7070"
EXAMPLE = re.compile(r"```sh\n(.*?)```\n(?:```json\n(.*?)```)?", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    found = EXAMPLE.findall(DOC.read_text(encoding="utf-8"))
    for command, _ in found:
        assert command.count("curl ") == 1 and BASE in command, f"one curl on {BASE}: {command}"
    return found


def _timeless(answer: Any) -> Any:
    data = answer.get("data")
    if isinstance(data, dict) and "delay" in data:  # the due time of the day it runs
        return {**answer, "data": {**data, "delay": "due"}}
    return answer


def test_every_example_works(serve: Callable[..., LiveServer]) -> None:
    live = serve(ServerSettings().with_limits(pop_wait=5))
    found = examples()
    assert len(found) >= 10
    for command, shown in found:
        run = subprocess.run(
            ["sh", "-c", command.replace(BASE, live.url)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert run.returncode == 0, (command, run.stderr)
        answer = json.loads(run.stdout)
        assert answer.get("code") == 0 or answer.get("success") is True, (command, answer)
        if shown:
            assert _timeless(answer) == _timeless(json.loads(shown)), command
