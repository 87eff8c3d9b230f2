"""Every Python example in README.md and docs/ runs, as written, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)

EXAMPLES = [
    pytest.param(code, id=f"{path.name}-{n}")
    for path in DOCS
    for n, code in enumerate(BLOCK.findall(path.read_text()), start=1)
]


def test_docs_have_examples() -> None:
    assert EXAMPLES, "README.md and docs/ should show runnable Python examples"


# the first Spark example starts the JVM and a local[2] session: on a busy
# 2-core machine that alone took over the suite's default 60 s once
@pytest.mark.timeout(240)
@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHRONOQ_STORE", raising=False)
    exec(compile(code, "<docs example>", "exec"), {"__name__": "__docs__"})
