"""The Python examples of docs/clients.md run, as written, against a live
server (its URL in place of the one they name) on each backend. They are
fenced ```python server: tests/test_docs.py runs the plain ```python blocks
of docs/ without a server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..server.live import LiveServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
BLOCK = re.compile(r"```python server\n(.*?)```", re.S)
EXAMPLES = BLOCK.findall(DOC.read_text())
URL = "http://127.0.0.1:7070"


def test_the_page_has_examples_for_each_client() -> None:
    assert len(EXAMPLES) >= 3
    assert any("chronoq.http.Client(" in code for code in EXAMPLES)
    assert any("chronoq.http.AsyncClient(" in code for code in EXAMPLES)
    assert "```python\n" not in DOC.read_text()  # those would run without a server


@pytest.mark.parametrize("n", range(len(EXAMPLES)))
def test_example_runs(
    n: int, server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = EXAMPLES[n]
    assert URL in code
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace(URL, server.url), f"<docs/clients.md #{n + 1}>", "exec"), {})
