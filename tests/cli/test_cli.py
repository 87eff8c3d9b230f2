"""Every command of ``chronoq`` against a real SQLite file: JSON and table output."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import chronoq
from chronoq.cli.main import cli
from chronoq.cli.output import iso_ms

from .conftest import Run

Json = Callable[..., Any]
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def reserve_one(run_json: Json, topic: str, *args: str) -> dict[str, Any]:
    jobs = run_json("reserve", topic, *args)
    assert len(jobs) == 1
    return jobs[0]  # type: ignore[no-any-return]


def test_iso_ms_is_utc_with_milliseconds() -> None:
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_ms(1_893_499_200_123) == "2030-01-01T12:00:00.123Z"
    assert iso_ms(None) == "-"


def test_put_then_get(run_json: Json, topic: str) -> None:
    before = now_ms()
    put = run_json(
        "put", topic, '{"order": 42}', "--delay", "60", "--id", "o-42", "--priority", "7"
    )
    assert put["created"] is True and put["id"] == "o-42"
    assert before + 60_000 <= put["due_at"] <= now_ms() + 60_000
    job = run_json("get", topic, "o-42")
    assert job["state"] == "delayed" and job["payload"] == {"order": 42}
    assert (job["priority"], job["due_at"], job["attempts"]) == (7, put["due_at"], 0)


def test_put_with_a_group(run_json: Json, topic: str) -> None:
    put = run_json("put", topic, "1", "--id", "g-1", "--group", "tenant-42")
    assert run_json("get", topic, put["id"])["group"] == "tenant-42"
    assert run_json("get", topic, run_json("put", topic)["id"])["group"] is None
    jobs = run_json("reserve", topic, "--count", "2")
    assert sorted(job["group"] or "" for job in jobs) == ["", "tenant-42"]


def test_put_generates_an_id_and_defaults_to_null_payload(run_json: Json, topic: str) -> None:
    put = run_json("put", topic)
    assert len(put["id"]) == 26
    assert run_json("get", topic, put["id"])["payload"] is None


def test_put_is_idempotent_by_id_unless_replace(run_json: Json, topic: str) -> None:
    run_json("put", topic, "1", "--id", "x", "--delay", "30")
    again = run_json("put", topic, "2", "--id", "x")
    assert again["created"] is False
    assert run_json("get", topic, "x")["payload"] == 1
    assert run_json("put", topic, "3", "--id", "x", "--replace")["created"] is True
    assert run_json("get", topic, "x")["payload"] == 3


@pytest.mark.parametrize(
    ("run_at", "due_at"),
    [
        ("2030-01-01T12:00:00Z", 1_893_499_200_000),
        ("2030-01-01T12:00:00", 1_893_499_200_000),  # no zone means UTC
        ("2030-01-01T13:00:00.250+01:00", 1_893_499_200_250),
        ("1893499200.5", 1_893_499_200_500),
    ],
)
def test_put_run_at(run_json: Json, topic: str, run_at: str, due_at: int) -> None:
    assert run_json("put", topic, "--run-at", run_at)["due_at"] == due_at


def test_put_payload_from_file_and_stdin(run_json: Json, topic: str, tmp_path: Path) -> None:
    path = tmp_path / "payload.json"
    path.write_text('{"from": "file"}')
    job = run_json("put", topic, "--payload-file", str(path))
    assert run_json("get", topic, job["id"])["payload"] == {"from": "file"}
    job = run_json("put", topic, "--payload-file", "-", input='["stdin", 1]')
    assert run_json("get", topic, job["id"])["payload"] == ["stdin", 1]


def test_put_human_output(run: Run, topic: str) -> None:
    result = run("put", topic, '"hi"', "--id", "h1", "--delay", "5")
    assert result.exit_code == 0
    assert "h1 put on" in result.stdout and ISO_MS.search(result.stdout)
    result = run("put", topic, '"hi"', "--id", "h1")
    assert "exists, left as it was" in result.stdout


def test_reserve_ack_round_trip(run_json: Json, topic: str) -> None:
    run_json("put", topic, '{"n": 1}', "--id", "a", "--max-attempts", "3")
    job = reserve_one(run_json, topic, "--ttr", "5")
    assert (job["id"], job["payload"], job["attempts"], job["max_attempts"]) == (
        "a",
        {"n": 1},
        1,
        3,
    )
    assert job["deadline"] - now_ms() <= 5_000 and job["lease"]
    acked = run_json("ack", topic, "a", job["lease"])
    assert acked == {"topic": topic, "id": "a", "acked": True}
    assert run_json("get", topic, "a", code=1) is None


def test_reserve_orders_by_priority_and_counts(run_json: Json, topic: str) -> None:
    for priority in ("1", "9", "5"):
        run_json("put", topic, "--id", f"p{priority}", "--priority", priority)
    jobs = run_json("reserve", topic, "--count", "10")
    assert [job["id"] for job in jobs] == ["p9", "p5", "p1"]


def test_reserve_waits_for_a_delayed_job(run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "later", "--delay", "0.2")
    started = time.monotonic()
    job = reserve_one(run_json, topic, "--wait", "5")
    assert job["id"] == "later" and job["due_at"] <= now_ms()
    assert time.monotonic() - started < 4


def test_reserve_nothing_exits_1(run: Run, run_json: Json, topic: str) -> None:
    assert run_json("reserve", topic, code=1) == []
    result = run("reserve", topic, "--wait", "0.05")
    assert result.exit_code == 1
    assert result.stdout == "" and f"no job of topic {topic} was due" in result.stderr


def test_reserve_table_shows_id_lease_and_times(run: Run, topic: str) -> None:
    run("put", topic, '{"k": "v"}', "--id", "tbl")
    result = run("reserve", topic)
    assert result.exit_code == 0
    lease = re.search(r"\b[0-9a-f]{20}\b", result.stdout)
    assert lease and "tbl" in result.stdout and '{"k":"v"}' in result.stdout
    assert len(ISO_MS.findall(result.stdout)) == 2  # due_at and deadline
    assert run("ack", topic, "tbl", lease.group()).exit_code == 0


def test_nack_then_dead_then_requeue(run: Run, run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "n", "--max-attempts", "2")
    job = reserve_one(run_json, topic)
    nacked = run_json("nack", topic, "n", job["lease"], "--delay", "0", "--error", "bank down")
    assert nacked["state"] == "ready"
    assert run_json("get", topic, "n")["last_error"] == "bank down"
    job = reserve_one(run_json, topic)
    assert job["attempts"] == 2
    assert run_json("nack", topic, "n", job["lease"], "--error", "again")["state"] == "dead"
    dead = run_json("dead", topic, "--limit", "5")
    assert [(d["id"], d["state"], d["last_error"]) for d in dead] == [("n", "dead", "again")]
    table = run("dead", topic)
    assert "again" in table.stdout and "2/2" in table.stdout
    assert run_json("requeue", topic, "n") == {"topic": topic, "requeued": 1}
    assert run_json("get", topic, "n")["state"] == "ready"
    assert run_json("requeue", topic, "n", code=1)["requeued"] == 0  # not dead any more
    assert run_json("requeue", topic)["requeued"] == 0  # all: nothing to do is fine


def test_touch_extends_and_bury_kills(run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "t", "--ttr", "1")
    job = reserve_one(run_json, topic)
    touched = run_json("touch", topic, "t", job["lease"], "--ttr", "120")
    assert touched["deadline"] > now_ms() + 100_000
    assert run_json("bury", topic, "t", job["lease"], "--error", "bad payload")["state"] == "dead"
    assert run_json("get", topic, "t")["last_error"] == "bad payload"


@pytest.mark.parametrize("command", ["ack", "nack", "touch", "bury"])
def test_lost_lease_exits_1(run: Run, run_json: Json, topic: str, command: str) -> None:
    run_json("put", topic, "--id", "l")
    job = reserve_one(run_json, topic)
    result = run(command, topic, "l", "0123456789abcdef")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: lease lost for job 'l'")
    assert run_json("get", topic, "l")["state"] == "reserved"
    assert run_json("ack", topic, "l", job["lease"])["acked"] is True


def test_delete(run: Run, run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "d", "--delay", "60")
    assert run_json("delete", topic, "d") == {"topic": topic, "id": "d", "deleted": True}
    assert run_json("delete", topic, "d", code=1)["deleted"] is False
    result = run("delete", topic, "d")
    assert result.exit_code == 1 and f"no job d on topic {topic}" in result.stderr


def test_get_human_and_missing(run: Run, topic: str) -> None:
    run("put", topic, '{"a": [1, 2]}', "--id", "g", "--delay", "60")
    result = run("get", topic, "g")
    assert result.exit_code == 0
    assert "delayed" in result.stdout and '{"a":[1,2]}' in result.stdout
    assert ISO_MS.search(result.stdout) and re.search(r"\(in \d+\.\d{3} s\)", result.stdout)
    missing = run("get", topic, "nope")
    assert missing.exit_code == 1 and missing.stdout == ""
    assert missing.stderr == f"no job nope on topic {topic}\n"


def test_reschedule(run: Run, run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "r", "--delay", "600")
    moved = run_json("reschedule", topic, "r", "--delay", "1")
    assert moved["rescheduled"] is True and moved["due_at"] <= now_ms() + 1_000
    at = run_json("reschedule", topic, "r", "--run-at", "2030-01-01T00:00:00Z")
    assert at["due_at"] == run_json("get", topic, "r")["due_at"] == 1_893_456_000_000
    assert run_json("reschedule", topic, "missing", "--delay", "1", code=1)["rescheduled"] is False
    result = run("reschedule", topic, "missing", "--delay", "1")
    assert result.exit_code == 1 and "absent, reserved or dead" in result.stderr


def test_reschedule_of_a_reserved_job_exits_1(run_json: Json, topic: str) -> None:
    run_json("put", topic, "--id", "busy")
    reserve_one(run_json, topic)
    run_json("reschedule", topic, "busy", "--delay", "5", code=1)


def test_stats_topics_pause_resume(run: Run, run_json: Json, topic: str) -> None:
    run_json("put", topic, "--delay", "60")
    run_json("put", topic)
    stats = run_json("stats", topic)
    assert (stats["topic"], stats["delayed"], stats["ready"], stats["paused"]) == (
        topic,
        1,
        1,
        False,
    )
    assert stats["next_due_at"] > now_ms()
    assert run_json("pause", topic) == {"topic": topic, "paused": True}
    assert run_json("stats", topic)["paused"] is True
    assert run_json("reserve", topic, code=1) == []  # a paused topic hands out nothing
    listed = {row["topic"]: row for row in run_json("topics")}
    assert listed[topic]["paused"] is True and listed[topic]["total"] == 2
    assert run_json("resume", topic) == {"topic": topic, "paused": False}
    assert len(run_json("reserve", topic)) == 1
    human = run("stats", topic)
    assert "delayed" in human.stdout and ISO_MS.search(human.stdout)
    assert topic in run("topics").stdout


def _put_hours(sqlite_url: str, topic: str, *hours: float) -> None:
    with chronoq.connect(sqlite_url) as queue:
        for h in hours:
            queue.put(topic, None, delay=h * 3600)


def test_forecast_json(run_json: Json, sqlite_url: str, topic: str) -> None:
    _put_hours(sqlite_url, topic, 0.4, 1.4, 1.6, 30)
    before = now_ms()
    day = run_json("forecast", topic)  # the next day by the hour
    assert set(day) == {"topic", "start", "step", "counts", "later"}
    assert (day["topic"], day["step"], day["later"]) == (topic, 3600.0, 1)
    assert day["counts"] == [1, 2] + [0] * 22 and before <= day["start"] <= now_ms()
    halves = run_json("forecast", topic, "--until", "2h", "--step", "30m")
    assert halves["counts"] == [1, 0, 1, 1] and halves["later"] == 1
    seconds = run_json("forecast", topic, "--until", "7200", "--step", "5400")
    assert seconds["counts"] == [2, 1] and seconds["step"] == 5400.0
    weeks = run_json("forecast", topic, "--until", "2100-01-01", "--step", "1w")
    assert weeks["counts"][0] == 4 and sum(weeks["counts"]) == 4 and weeks["later"] == 0
    assert len(weeks["counts"]) > 52 * 70


def test_forecast_table(run: Run, sqlite_url: str, topic: str) -> None:
    _put_hours(sqlite_url, topic, 0.4, 1.4, 1.6, 30)
    result = run("forecast", topic, "--until", "3h", "--store", sqlite_url)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert f"delayed jobs of {topic} due per 1h" in text and "step start" in text
    rows = [line for line in text.splitlines() if ISO_MS.search(line) and "│" in line]
    assert len(rows) == 3
    counts = [int(row.split("│")[2]) for row in rows]
    bars = [row.split("│")[3].strip() for row in rows]
    assert counts == [1, 2, 0]
    assert bars == ["█" * 20, "█" * 40, ""]  # the busiest step is 40 wide
    assert re.search(r"later: 1 due from \d{4}-\d\d-\d\dT", text)


def test_purge(run: Run, run_json: Json, topic: str) -> None:
    for _ in range(3):
        run_json("put", topic, "--delay", "60")
    declined = run("purge", topic, input="n\n")
    assert declined.exit_code == 1 and "Aborted." in declined.stderr
    assert run_json("stats", topic)["total"] == 3
    assert run("purge", topic, input="y\n").exit_code == 0
    run_json("put", topic)
    assert run_json("purge", topic, "--yes") == {"topic": topic, "purged": 1}
    assert run_json("stats", topic)["total"] == 0


def test_store_and_json_after_the_command(runner: CliRunner, sqlite_url: str, topic: str) -> None:
    result = runner.invoke(cli, ["put", topic, "--id", "late", "--store", sqlite_url, "--json"])
    assert result.exit_code == 0 and '"created": true' in result.stdout
    with chronoq.connect(sqlite_url) as queue:
        assert queue.get(topic, "late") is not None


def test_store_from_environment(runner: CliRunner, sqlite_url: str, topic: str) -> None:
    result = runner.invoke(cli, ["put", topic, "--id", "env"], env={"CHRONOQ_STORE": sqlite_url})
    assert result.exit_code == 0, result.stderr
    with chronoq.connect(sqlite_url) as queue:
        info = queue.get(topic, "env")
    assert info is not None and info.state is chronoq.State.READY


def test_bytes_payload_is_base64_in_json(run_json: Json, sqlite_url: str, topic: str) -> None:
    with chronoq.connect(sqlite_url) as queue:
        queue.put(topic, b"\x00\xffraw", id="b")
    job = run_json("get", topic, "b")
    assert job["payload_base64"] == "AP9yYXc=" and "payload" not in job


def test_every_command_and_option_has_help(runner: CliRunner) -> None:
    assert set(cli.commands) >= {
        "put", "reserve", "ack", "nack", "get", "delete", "reschedule", "stats", "topics",
        "dead", "requeue", "purge", "pause", "resume", "demo", "forecast", "limits",
    }  # fmt: skip
    for name, command in cli.commands.items():
        assert command.help, name
        for param in command.params:
            if param.param_type_name == "option":
                assert getattr(param, "help", None), (name, param.name)
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Usage: cli " in result.stdout


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and chronoq.__version__ in result.stdout
