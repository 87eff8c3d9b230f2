"""Exit codes 2 (bad input) and 3 (store unavailable): one line on stderr, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chronoq.cli.main import cli

from .conftest import Run


def assert_one_line_error(result: Result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["put", "{TOPIC}", "{oops"], ["PAYLOAD_JSON", "not valid JSON", "quote strings"]),
        (["put", "{TOPIC}", "hello"], ["not valid JSON"]),
        (["put", "{TOPIC}", "--delay", "-1"], ["delay must be between 0 and"]),
        (["put", "bad topic!"], ["invalid topic 'bad topic!'", "starting with a letter"]),
        (["put", "{TOPIC}", "--delay", "1", "--run-at", "2030-01-01"], ["--delay or --run-at"]),
        (["put", "{TOPIC}", "--run-at", "tomorrow"], ["'tomorrow' is not a time", "ISO 8601"]),
        (["put", "{TOPIC}", "--priority", "5000"], ["priority must be an integer from -1000"]),
        (["put", "{TOPIC}", "--delay", "soon"], ["'soon' is not a valid float"]),
        (["put", "{TOPIC}", "1", "--payload-file", "-"], ["not both"]),
        (["put", "{TOPIC}", "--id", "has space"], ["invalid job id"]),
        (["put"], ["Missing argument 'TOPIC'", "see 'cli put --help'"]),
        (["put", "{TOPIC}", "--bogus"], ["No such option '--bogus'"]),
        (["reserve", "{TOPIC}", "--count", "0"], ["count must be an integer from 1"]),
        (["reserve", "{TOPIC}", "--wait", "-2"], ["wait must be between 0"]),
        (["reschedule", "{TOPIC}", "x"], ["--delay SECONDS or --run-at TIME"]),
        (["reschedule", "{TOPIC}", "x", "--delay", "1", "--run-at", "1"], ["not both"]),
        (["dead", "{TOPIC}", "--limit", "0"], ["limit must be an integer from 1"]),
        (["forecast", "{TOPIC}", "--until", "5x"], ["'5x' is neither a duration", "ISO 8601"]),
        (["forecast", "{TOPIC}", "--step", "often"], ["'often' is not a duration", "90m"]),
        (["forecast", "{TOPIC}", "--step", "0.5"], ["step must be at least 1 s"]),
        (["forecast", "{TOPIC}", "--until", "2000-01-01"], ["until must be later than now"]),
        (["forecast", "{TOPIC}", "--step", "1"], ["at most 10000 steps", "larger step"]),
        (["demo", "--jobs", "0"], ["--jobs"]),
        (["frobnicate"], ["No such command 'frobnicate'"]),
    ],
)
def test_bad_input_exits_2(run: Run, topic: str, args: list[str], fragments: list[str]) -> None:
    result = run(*(arg.replace("{TOPIC}", topic) for arg in args), input="")
    assert_one_line_error(result, 2, *fragments)


def test_bad_store_url_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--store", f"sqlite:///{tmp_path}/x.db?colour=red", "topics"])
    assert_one_line_error(result, 2, "unknown store URL option(s): colour")
    result = runner.invoke(cli, ["--store", "postgres://db/x", "topics"])
    assert_one_line_error(result, 2, "unsupported store URL scheme 'postgres'")


def test_a_file_that_is_not_a_database_exits_3(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100)
    result = runner.invoke(cli, ["--store", f"sqlite:///{path}", "put", "t", "1"])
    assert_one_line_error(result, 3, "store unavailable", "not a database", "another path")
    assert path.read_text().startswith("these are my notes")


def test_an_unopenable_path_exits_3(runner: CliRunner, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = runner.invoke(cli, ["--store", f"sqlite:///{blocker}/jobs.db", "stats", "t"])
    assert_one_line_error(result, 3, "store unavailable", "directory exists and is writable")


def test_a_bad_store_in_the_environment_exits_3(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"\x00junk" * 1000)
    result = runner.invoke(cli, ["topics"], env={"CHRONOQ_STORE": str(path)})
    assert_one_line_error(result, 3, "store unavailable")
