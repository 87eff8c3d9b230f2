"""``chronoq limits``, ``pause``/``resume --group`` and ``stats --groups``
against a real SQLite file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import chronoq

from .conftest import Run
from .test_errors import assert_one_line_error

Json = Callable[..., Any]
NO_LIMITS: dict[str, Any] = {"topic_rule": {}, "default": {}, "groups": {}}


def table_row(text: str, name: str) -> list[str]:
    """The cells of the table row whose first cell is ``name``."""
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if cells[0] == name:
            return cells[1:]
    raise AssertionError(f"no row {name!r} in\n{text}")


def test_limits_of_a_new_topic_are_empty(run: Run, run_json: Json, topic: str) -> None:
    assert run_json("limits", topic) == {"topic": topic, **NO_LIMITS}
    result = run("limits", topic)
    assert result.exit_code == 0, result.stderr
    assert f"limits of {topic}" in result.stdout
    assert table_row(result.stdout, "topic") == ["-", "-", "-", "-"]
    assert table_row(result.stdout, "group default") == ["-", "-", "-", "-"]


def test_set_then_show(run: Run, run_json: Json, sqlite_url: str, topic: str) -> None:
    doc = run_json(
        "limits", topic, "--rate", "200", "--per", "1", "--burst", "20", "--concurrency", "50"
    )
    assert doc["topic_rule"] == {"rate": 200.0, "per": 1.0, "burst": 20, "concurrency": 50}
    doc = run_json("limits", topic, "--group-rate", "5", "--group-concurrency", "2")
    assert doc["default"] == {"rate": 5.0, "concurrency": 2}
    assert doc["topic_rule"]["rate"] == 200.0  # a field not given keeps its value
    doc = run_json("limits", topic, "--group", "acme", "--rate", "10", "--per", "1m")
    assert doc["groups"] == {"acme": {"rate": 10.0, "per": 60.0}}
    with chronoq.connect(sqlite_url) as queue:
        assert queue.limits(topic).as_dict() == doc
    result = run("limits", topic)
    assert result.exit_code == 0, result.stderr
    assert table_row(result.stdout, "topic") == ["200", "1", "20", "50"]
    # (n): implied (per 1 s, the bucket a period's worth) or the group default's
    assert table_row(result.stdout, "group default") == ["5", "(1)", "(5)", "2"]
    # the implied burst is a per's worth of the rate: 10 tokens, not 10 x 60
    assert table_row(result.stdout, "group acme") == ["10", "60", "(10)", "(2)"]


def test_set_prints_the_table(run: Run, topic: str) -> None:
    result = run("limits", topic, "--concurrency", "3")
    assert result.exit_code == 0, result.stderr
    assert table_row(result.stdout, "topic") == ["-", "-", "-", "3"]


def test_clear(run: Run, run_json: Json, topic: str) -> None:
    run_json("limits", topic, "--rate", "9", "--group-burst", "4")
    run_json("limits", topic, "--group", "a", "--concurrency", "7")
    run_json("limits", topic, "--group", "b", "--rate", "1")
    doc = run_json("limits", topic, "--clear", "--group", "a")
    assert doc["groups"] == {"b": {"rate": 1.0}} and doc["topic_rule"] == {"rate": 9.0}
    result = run("limits", topic, "--clear")
    assert result.exit_code == 0, result.stderr
    assert f"cleared the topic's limits and group defaults of {topic}" in result.stdout
    assert table_row(result.stdout, "topic") == ["-", "-", "-", "-"]
    assert run_json("limits", topic)["groups"] == {"b": {"rate": 1.0}}
    run_json("limits", topic, "--clear", "--group", "b")
    assert run_json("limits", topic) == {"topic": topic, **NO_LIMITS}


def test_pause_and_resume_one_group(run: Run, run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "a1", "--group", "acme")
    run_json("put", topic, "--id", "b1", "--group", "beta")
    assert run_json("pause", topic, "--group", "acme") == {
        "topic": topic,
        "group": "acme",
        "paused": True,
    }
    assert run_json("stats", topic)["paused"] is False  # the topic flows on
    assert [job["id"] for job in run_json("reserve", topic, "--count", "5")] == ["b1"]
    assert run_json("reserve", topic, code=1) == []
    result = run("resume", topic, "--group", "acme")
    assert result.exit_code == 0 and f"resumed group acme of {topic}" in result.stdout
    assert [job["id"] for job in run_json("reserve", topic)] == ["a1"]


def test_stats_by_group(run: Run, run_json: Json, topic: str) -> None:
    for n in range(3):
        run_json("put", topic, "--group", "big", "--id", f"big-{n}")
    run_json("put", topic, "--group", "small", "--delay", "60")
    run_json("put", topic)
    run_json("pause", topic, "--group", "small")
    stats = run_json("stats", topic, "--groups")
    assert stats["total"] == 5
    assert stats["groups"] == [  # due jobs and live leases; paused groups however few
        {"group": "big", "ready": 3, "reserved": 0, "paused": False},
        {"group": None, "ready": 1, "reserved": 0, "paused": False},
        {"group": "small", "ready": 0, "reserved": 0, "paused": True},
    ]
    assert "groups" not in run_json("stats", topic)
    result = run("stats", topic, "--groups")
    assert result.exit_code == 0, result.stderr
    assert "by group" in result.stdout
    assert table_row(result.stdout, "big") == ["3", "0", "no"]
    assert table_row(result.stdout, "(default)") == ["1", "0", "no"]
    assert table_row(result.stdout, "small") == ["0", "0", "yes"]
    assert "by group" not in run("stats", topic).stdout


def test_stats_by_group_of_an_empty_topic(run: Run, topic: str) -> None:
    result = run("stats", topic, "--groups")
    assert result.exit_code == 0 and "no group has due jobs or is paused" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--rate", "-1"], ["rate must be a number above 0", "got -1"]),
        (["--rate", "nan"], ["rate must be a number above 0"]),
        (["--rate", "fast"], ["'fast' is not a valid float"]),
        (["--concurrency", "0"], ["concurrency must be an integer from 1"]),
        (["--burst", "2.5"], ["'--burst'", "'2.5' is not a valid integer"]),
        (["--per", "soon"], ["'soon' is not a duration"]),
        (["--per", "0"], ["per must be seconds from 0.001"]),
        (["--group-rate", "-3"], ["group_rate must be a number above 0"]),
        (
            ["--group", "acme", "--group-rate", "5"],
            ["--group-rate set(s) every group's default", "drop --group", "give --rate"],
        ),
        (["--clear", "--rate", "5"], ["--clear takes no limits to set (got --rate)"]),
        (["--group", "acme"], ["--group needs limits to set", "or --clear"]),
        (["--group", "no spaces", "--rate", "1"], ["invalid group 'no spaces'"]),
    ],
)
def test_limits_bad_input_exits_2(
    run: Run, topic: str, args: list[str], fragments: list[str]
) -> None:
    assert_one_line_error(run("limits", topic, *args), 2, *fragments)


def test_bad_topic_and_group_exit_2(run: Run, topic: str) -> None:
    assert_one_line_error(run("limits", "bad topic!"), 2, "invalid topic 'bad topic!'")
    assert_one_line_error(run("pause", topic, "--group", "x y"), 2, "invalid group 'x y'")
    assert_one_line_error(run("resume", topic, "--group", ""), 2, "invalid group ''")
