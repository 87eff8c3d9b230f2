"""A CliRunner bound to one fresh SQLite store, and helpers to read its output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from chronoq.cli.main import cli

#: environment that would make rich act as if on a terminal, or pick another store
CLEAN_ENV: dict[str, str | None] = {
    "CHRONOQ_STORE": None,
    "FORCE_COLOR": None,
    "TTY_COMPATIBLE": None,
    "COLUMNS": None,
}

Run = Callable[..., Result]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env=CLEAN_ENV, catch_exceptions=False)


@pytest.fixture
def run(runner: CliRunner, sqlite_url: str) -> Run:
    """``run("put", topic, ...)`` on the test's store; ``input=`` feeds stdin."""

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(cli, ["--store", sqlite_url, *args], input=input)

    return invoke


@pytest.fixture
def run_json(run: Run) -> Callable[..., Any]:
    """Like ``run`` with ``--json``; checks the exit code and parses stdout."""

    def invoke(*args: str, code: int = 0, input: str | None = None) -> Any:
        result = run("--json", *args, input=input)
        assert result.exit_code == code, (result.stdout, result.stderr)
        return json.loads(result.stdout)

    return invoke
