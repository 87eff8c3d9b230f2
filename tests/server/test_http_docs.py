"""docs/http.md runs: its curl examples, in order, against a real server,
each answer compared with the one the page shows; its config file loads."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from chronoq.server import load_settings
from chronoq.server.settings import Limits

from .live import start_server

PAGE = Path(__file__).resolve().parents[2] / "docs" / "http.md"
BASE = "http://127.0.0.1:7070"
# ``sh`` blocks that talk to the server, each with the ``json`` answer shown after it, if any
STEP = re.compile(r"```sh\n(.*?)```\n(?:```json\n(.*?)```)?", re.S)
VARYING = {"due_at", "deadline", "created_at", "start", "lease", "store"}  # times, tokens, paths


def _steps() -> list[tuple[str, str | None]]:
    return [(cmd, shown) for cmd, shown in STEP.findall(PAGE.read_text()) if BASE in cmd]


def _same(shown: Any, got: Any, where: str = "$") -> None:
    if isinstance(shown, dict):
        assert isinstance(got, dict) and set(got) == set(shown), f"{where}: {got!r}"
        for key, value in shown.items():
            if key not in VARYING:
                _same(value, got[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(got, list) and len(got) == len(shown), f"{where}: {got!r}"
        for n, (a, b) in enumerate(zip(shown, got, strict=True)):
            _same(a, b, f"{where}[{n}]")
    else:
        assert got == shown, f"{where}: shown {shown!r}, got {got!r}"


def test_every_endpoint_has_an_example() -> None:
    text = PAGE.read_text()
    from chronoq.server import create_app

    app = create_app("sqlite:///:memory:")
    for route in app.router.routes:
        if route.in_schema and route.tag not in ("youzan", "ouqiang"):  # those: compat.md
            path = re.sub(r"\\\{\w+\\\}", "[^/?]+", re.escape(route.path))  # {topic}, {id}...
            found = re.search(re.escape(BASE) + path + r"[\s'\"?]", text)
            assert found, f"no example of {route.method} {route.path}"


def test_the_examples_run(tmp_path: Path) -> None:
    server = start_server(f"sqlite:///{tmp_path / 'docs.db'}")
    try:
        steps = _steps()
        assert len(steps) >= 20
        script = ["set -euo pipefail"]
        for n, (cmd, _) in enumerate(steps):
            script += [f"echo '@@@{n}'", cmd.replace(BASE, server.url), "echo"]
        run = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr
        outputs = re.split(r"^@@@\d+\n", run.stdout, flags=re.M)[1:]
        assert len(outputs) == len(steps)
        for (cmd, shown), out in zip(steps, outputs, strict=True):
            if shown:
                _same(json.loads(shown), json.loads(out), cmd.split("\n")[0])
    finally:
        server.stop()


def test_the_config_example_loads(tmp_path: Path) -> None:
    text = re.findall(r"```toml\n(.*?)```", PAGE.read_text(), re.S)
    assert len(text) == 1
    doc = tomllib.loads(text[0])
    config = tmp_path / "chronoq.toml"
    config.write_text(text[0], encoding="utf-8")
    settings = load_settings(config)
    assert settings.auth.enabled
    # it lists every limit with its default, and so does the table of limits
    names = {f.name for f in fields(Limits)}
    assert set(doc["limits"]) == names and settings.limits == Limits()
    table = PAGE.read_text().split("## Limits and timeouts", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", table, re.M)) == names


@pytest.mark.parametrize("name", ["compat.md", "dashboard.md", "clients.md"])
def test_linked_pages_exist(name: str) -> None:
    assert (PAGE.parent / name).exists()


def test_the_readme_curl_example_runs(tmp_path: Path) -> None:
    readme = PAGE.parents[1] / "README.md"
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", readme.read_text(), re.S) if BASE in b]
    assert len(blocks) == 1
    server = start_server(f"sqlite:///{tmp_path / 'readme.db'}")
    try:
        lines = [line for line in blocks[0].splitlines() if line.startswith("curl")]
        put, reserve = (line.replace(BASE, server.url) for line in lines)
        assert json.loads(subprocess.run(put, shell=True, capture_output=True, text=True,
                                         check=True).stdout)["created"] is True  # fmt: skip
        jobs = json.loads(subprocess.run(reserve, shell=True, capture_output=True, text=True,
                                         check=True).stdout)["jobs"]  # fmt: skip
        assert [job["payload"] for job in jobs] == [{"hi": 1}]
    finally:
        server.stop()
