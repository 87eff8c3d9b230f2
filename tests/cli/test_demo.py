"""``chronoq demo``, and the real console script in a subprocess."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

import chronoq
from chronoq.cli.demo import percentile, plan

from .conftest import Run


def test_demo_delivers_everything_on_time(run: Run, sqlite_url: str) -> None:
    result = run("demo", "--jobs", "40", "--seconds", "2")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "✓ 40/40 jobs delivered, 0 early" in result.stdout
    assert "Recent deliveries" in result.stdout and "chronoq demo" in result.stdout
    with chronoq.connect(sqlite_url) as queue:
        events = queue.events(limit=1000).events
        demo_topics = {event.topic for event in events}
        assert len(demo_topics) == 1 and demo_topics.pop().startswith("demo-")
        assert sum(event.event == "ack" for event in events) == 40
        assert queue.topics() == []  # purged: an empty topic is not listed


def test_demo_json_report(run: Run, sqlite_url: str) -> None:
    result = run("--json", "demo", "--jobs", "40", "--seconds", "1")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert (report["jobs"], report["delivered"], report["early"], report["duplicates"]) == (
        40,
        40,
        0,
        0,
    )
    assert 0 <= report["lag_ms"]["p50"] <= report["lag_ms"]["p99"] <= report["lag_ms"]["max"]
    assert report["elapsed_s"] < 1 + 2
    with chronoq.connect(sqlite_url) as queue:
        assert queue.stats(report["topic"])["total"] == 0


def test_plan_spreads_jobs_with_bursts_of_one_due_time() -> None:
    waves = plan(300, 10.0, random.Random(7))
    jobs = [job for wave in waves for job in wave.jobs]
    assert len({job_id for job_id, _, _ in jobs}) == 300
    for wave in waves:
        assert 0 <= wave.at <= 5
        assert all(wave.at < due <= 10.0 for _, due, _ in wave.jobs)
    by_due: dict[float, list[int]] = {}
    for _, due, priority in jobs:
        by_due.setdefault(due, []).append(priority)
    assert any(len(priorities) == 5 for priorities in by_due.values())
    assert {priority for _, _, priority in jobs} >= {-10, -5, 0, 5, 10}


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([1, 2, 3, 4], 50) == 2
    assert percentile(list(range(1, 101)), 99) == 99


def _script(store: str, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if k not in ("CHRONOQ_STORE", "FORCE_COLOR")}
    done = subprocess.run(
        [sys.executable, "-m", "chronoq.cli.main", "--store", store, "--json", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def test_console_script_round_trip(sqlite_url: str, topic: str) -> None:
    put = _script(sqlite_url, "put", topic, '{"via": "subprocess"}', "--id", "sp")
    assert put["created"] is True
    jobs = _script(sqlite_url, "reserve", topic, "--wait", "5")
    assert [(job["id"], job["payload"]) for job in jobs] == [("sp", {"via": "subprocess"})]
    assert _script(sqlite_url, "ack", topic, "sp", jobs[0]["lease"])["acked"] is True
    assert _script(sqlite_url, "stats", topic)["total"] == 0
