"""The worker as real processes (``chronoq worker`` or ``python -c``), on each
backend where the store matters: kill -9 mid-job, lease renewal past the ttr,
SIGTERM with and without enough grace, a second signal, retries with growing
delays, Retry and Bury, async handlers, the ``--processes`` supervisor, a
Redis outage, recurring schedules shared by two workers, and CLI errors.
Handlers (tests/worker/procs.py) record what they did into a file; the event
log tells what the store did."""

from __future__ import annotations

import itertools
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq import State

from ..children import all_events
from ..redis_server import RedisServer, redis_server_binary
from .procs import (
    HANDLERS_MODULE,
    Records,
    WorkerProcess,
    cli_argv,
    event_counts,
    handlers_source,
    pid_gone,
    pid_gone_or_zombie,
    wait_until,
)

TARGET = f"{HANDLERS_MODULE}:handlers"
needs_redis = pytest.mark.skipif(
    redis_server_binary() is None and os.environ.get("CI") != "true",
    reason="redis-server is not installed",
)


@dataclass
class Setup:
    dir: Path
    url: str
    topic: str
    q: chronoq.Queue
    records: Records
    start: Callable[..., WorkerProcess]

    def worker(self, *args: str, url: str | None = None) -> WorkerProcess:
        """A CLI worker on this test's store (JSON logs), started and ready."""
        w = self.start(cli_argv(TARGET, url or self.url, "--log-format", "json", *args))
        w.wait_log("worker started")
        return w

    def workers(self, count: int, *args: str) -> list[WorkerProcess]:
        """``count`` CLI workers, started at once, then all ready."""
        started = [
            self.start(cli_argv(TARGET, self.url, "--log-format", "json", *args))
            for _ in range(count)
        ]
        for w in started:
            w.wait_log("worker started")
        return started

    def state(self, job_id: str) -> State | None:
        info = self.q.get(self.topic, job_id)
        return None if info is None else info.state


@pytest.fixture
def setup(tmp_path: Path, store_url: str) -> Iterator[Setup]:
    yield from _setup(tmp_path, store_url)


@pytest.fixture
def sqlite_setup(tmp_path: Path, sqlite_url: str) -> Iterator[Setup]:
    yield from _setup(tmp_path, sqlite_url)


def _setup(tmp_path: Path, url: str) -> Iterator[Setup]:
    topic = f"t-{uuid.uuid4().hex[:12]}"
    record = tmp_path / "records.jsonl"
    (tmp_path / f"{HANDLERS_MODULE}.py").write_text(handlers_source(record, topic))
    processes: list[WorkerProcess] = []

    def start(argv: list[str]) -> WorkerProcess:
        process = WorkerProcess(argv, tmp_path, tmp_path / f"worker-{len(processes)}.log")
        processes.append(process)
        return process

    q = chronoq.connect(url)
    try:
        yield Setup(tmp_path, url, topic, q, Records(record), start)
    finally:
        for process in processes:
            process.cleanup()
        q.close()


def job_lines(w: WorkerProcess) -> list[dict[str, Any]]:
    """The per-job JSON log lines of a worker."""
    return [line for line in w.json_lines() if "outcome" in line]


# -- a worker dies, or outlives its lease --------------------------------------------------


def test_kill_9_mid_job_the_other_worker_finishes_it_once(setup: Setup) -> None:
    a, b = setup.workers(2, "--ttr", "1")
    setup.q.put(setup.topic, {"first_sleep": 60}, id="job")
    [first] = wait_until(lambda: setup.records.of("start", "job"), what="the first attempt")
    victim, survivor = (a, b) if first["pid"] == a.pid else (b, a)
    victim.send(signal.SIGKILL)
    victim.wait()
    wait_until(lambda: setup.state("job") is None, what="the job acked")
    starts, ends = setup.records.of("start", "job"), setup.records.of("end", "job")
    assert [(r["pid"], r["attempt"]) for r in starts] == [(victim.pid, 1), (survivor.pid, 2)]
    assert [(r["pid"], r["attempt"]) for r in ends] == [(survivor.pid, 2)]
    counts = event_counts(setup.q, setup.topic, "job")
    assert counts["reserve"] == 2 and counts["ack"] == 1, counts
    acked = [line for line in job_lines(survivor) if line["outcome"] == "ack"]
    assert [(line["id"], line["attempt"]) for line in acked] == [("job", 2)]
    assert survivor.alive()


def test_a_handler_longer_than_its_ttr_keeps_its_lease(setup: Setup) -> None:
    a, b = setup.workers(2, "--ttr", "1")
    setup.q.put(setup.topic, {"sleep": 3.5}, id="long")
    wait_until(lambda: setup.state("long") is None, what="the long job acked")
    assert [r["attempt"] for r in setup.records.of("start", "long")] == [1]
    assert len(setup.records.of("end", "long")) == 1
    counts = event_counts(setup.q, setup.topic, "long")
    assert counts["reserve"] == 1 and counts["ack"] == 1 and counts["expire"] == 0, counts
    assert counts["touch"] >= 2, counts  # renewed every ttr/3 while it ran
    assert a.alive() and b.alive()


# -- stopping ------------------------------------------------------------------------------


def test_sigterm_lets_running_jobs_finish_and_loses_nothing(setup: Setup) -> None:
    w = setup.worker("--concurrency", "4", "--grace", "20")
    ids = [f"j{n}" for n in range(6)]
    setup.q.put_many(setup.topic, [chronoq.Job({"sleep": 2}, id=i) for i in ids])
    wait_until(lambda: len(setup.records.of("start")) >= 4, what="4 running jobs")
    w.send(signal.SIGTERM)
    assert w.wait() == 0, w.log()
    assert "waiting up to 20 s for" in w.log()  # they were running at the signal
    started = {r["id"] for r in setup.records.of("start")}
    assert {r["id"] for r in setup.records.of("end")} == started
    assert len(setup.records.of("start")) == len(started)  # each ran once
    stats = setup.q.stats(setup.topic)
    assert stats["reserved"] == 0 and stats["dead"] == 0, (stats, w.log())
    assert stats["ready"] == len(ids) - len(started), stats  # the rest wait, none lost
    for job_id in ids:
        acks = event_counts(setup.q, setup.topic, job_id)["ack"]
        assert acks == (1 if job_id in started else 0), job_id
        assert setup.state(job_id) == (None if job_id in started else State.READY)


def test_sigterm_releases_a_job_longer_than_the_grace(setup: Setup) -> None:
    w = setup.worker("--grace", "1")
    setup.q.put(setup.topic, {"first_sleep": 60}, id="slow", ttr=60)
    wait_until(lambda: setup.records.of("start", "slow"), what="the job running")
    w.send(signal.SIGTERM)
    assert w.wait() == 0, w.log()
    info = setup.q.get(setup.topic, "slow")
    assert info is not None and info.state is State.READY, info  # at once, not after ttr
    assert info.attempts == 1 and "stopped before its handler ended" in (info.last_error or "")
    assert "1 released" in w.log()
    setup.worker()  # a new worker runs it long before the 60 s lease would have ended
    wait_until(lambda: setup.state("slow") is None, timeout=30, what="the job acked")
    assert [r["attempt"] for r in setup.records.of("end", "slow")] == [2]


def test_a_second_sigterm_skips_the_grace(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    w = setup.worker("--grace", "600")
    setup.q.put(setup.topic, {"first_sleep": 60}, id="slow", ttr=60)
    wait_until(lambda: setup.records.of("start", "slow"), what="the job running")
    w.send(signal.SIGTERM)
    w.wait_log("waiting up to 600 s for 1 running jobs")
    assert w.alive()
    w.send(signal.SIGTERM)
    assert w.wait(timeout=20) == 0, w.log()  # well before the 600 s grace
    assert setup.state("slow") is State.READY
    assert "stopping now" in w.log()


# -- outcomes --------------------------------------------------------------------------------

WORKER_WITH_BACKOFF = f"""
import sys
import chronoq
sys.path.insert(0, ".")
from {HANDLERS_MODULE} import handlers
q = chronoq.connect(sys.argv[1])
chronoq.Worker(q, handlers, backoff=chronoq.Backoff(base=0.2, factor=3.0)).run()
q.close()
"""


def test_failures_retry_with_growing_delays_then_die_retry_and_bury(setup: Setup) -> None:
    w = setup.start([sys.executable, "-c", WORKER_WITH_BACKOFF, setup.url])
    q, topic = setup.q, setup.topic
    q.put(topic, {"fail": True}, id="fails", max_attempts=4)
    q.put(topic, {"retry_once": 0.3}, id="retried")
    q.put(topic, {"bury": "bad payload"}, id="buried")
    wait_until(
        lambda: (
            setup.state("fails") is State.DEAD
            and setup.state("buried") is State.DEAD
            and setup.state("retried") is None
        ),
        timeout=30,
        what="the three jobs settled",
    )
    w.send(signal.SIGTERM)
    assert w.wait() == 0, w.log()

    events = [e for e in all_events(q, topic) if e.id == "fails"]
    nacks = [e for e in events if e.event.value == "nack"]
    delays = [e.due_at - e.ts_ms for e in nacks]
    assert len(delays) == 3 and delays[0] < delays[1] < delays[2], delays
    assert 100 <= delays[0] <= 200 and 300 <= delays[1] <= 600 and 900 <= delays[2] <= 1800
    reserves = [e for e in events if e.event.value == "reserve"]
    assert all(r.ts_ms >= n.due_at for n, r in zip(nacks, reserves[1:], strict=True))
    assert events[-1].event.value == "dead" and events[-1].attempt == 4
    info = q.get(topic, "fails")
    assert info is not None and info.attempts == 4
    assert info.last_error == "ValueError: failed attempt 4"

    retried = [e for e in all_events(q, topic) if e.id == "retried"]
    [nack] = [e for e in retried if e.event.value == "nack"]
    assert nack.due_at - nack.ts_ms == 300
    assert [e.event.value for e in retried][-2:] == ["reserve", "ack"]
    assert [r["attempt"] for r in setup.records.of("end", "retried")] == [2]

    buried = q.get(topic, "buried")
    assert buried is not None and buried.last_error == "bad payload" and buried.attempts == 1
    assert event_counts(q, topic, "buried")["bury"] == 1
    assert not setup.records.of("end", "fails") and not setup.records.of("end", "buried")


def test_async_handlers_in_a_worker_process(setup: Setup) -> None:
    w = setup.worker("--concurrency", "5")
    topic = setup.topic + ".async"
    ids = [f"a{n}" for n in range(5)]
    setup.q.put_many(topic, [chronoq.Job({"sleep": 1.5}, id=i) for i in ids])
    setup.q.put(topic, {"fail": True}, id="bad", max_attempts=1)
    wait_until(lambda: setup.records.ended(ids), what="the async jobs done")
    wait_until(lambda: len(job_lines(w)) == len(ids) + 1, what="a log line per job")
    info = setup.q.get(topic, "bad")
    assert info is not None and info.state is State.DEAD
    assert info.last_error == "ValueError: failed attempt 1"
    starts = sorted(r["t"] for r in setup.records.of("start") if r["id"] in ids)
    first_end = min(r["t"] for r in setup.records.of("end"))
    assert sum(t < first_end for t in starts) >= 2  # they ran at once, on one loop
    assert all(r["pid"] == w.pid for r in setup.records.all())
    lines = {line["id"]: line for line in job_lines(w)}
    assert {lines[i]["outcome"] for i in ids} == {"ack"}
    assert lines["bad"]["outcome"] == "dead"  # its last attempt failed
    assert lines["bad"]["error"] == "ValueError: failed attempt 1"
    assert all(line["topic"] == topic and line["duration_ms"] >= 0 for line in lines.values())
    w.send(signal.SIGTERM)
    assert w.wait() == 0, w.log()
    assert event_counts(setup.q, topic)["ack"] == len(ids)


# -- the supervisor --------------------------------------------------------------------------


def test_processes_2_sigterm_stops_both_children_cleanly(setup: Setup) -> None:
    sup = setup.start(
        cli_argv(TARGET, setup.url, "--processes", "2", "--concurrency", "2", "--grace", "20")
    )
    sup.wait_log("worker started", count=2)
    children = sup.children()
    assert len(children) == 2 and sup.pid not in children
    ids = [f"p{n}" for n in range(12)]
    setup.q.put_many(setup.topic, [chronoq.Job({"sleep": 1}, id=i) for i in ids])
    wait_until(
        lambda: len({r["pid"] for r in setup.records.of("start")}) == 2,
        what="both children running jobs",
    )
    sup.send(signal.SIGTERM)
    assert sup.wait() == 0, sup.log()
    assert all(pid_gone(pid) for pid in children)
    assert sup.log().count("worker stopped:") == 2
    assert setup.q.stats(setup.topic)["reserved"] == 0
    started = Counter(r["id"] for r in setup.records.of("start"))
    assert set(started.values()) == {1}
    assert {r["id"] for r in setup.records.of("end")} == set(started)
    setup.worker()  # the jobs never started are still there, ready
    wait_until(lambda: setup.q.stats(setup.topic)["total"] == 0, what="every job acked")
    assert Counter(r["id"] for r in setup.records.of("end")) == Counter(ids)
    acks = Counter(e.id for e in all_events(setup.q, setup.topic) if e.event.value == "ack")
    assert acks == Counter(ids)


def test_the_supervisor_restarts_a_worker_that_died(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    sup = setup.start(cli_argv(TARGET, setup.url, "--processes", "2"))
    sup.wait_log("worker started", count=2)
    first, second = sup.children()
    os.kill(first, signal.SIGKILL)
    sup.wait_log("was killed by SIGKILL")
    sup.wait_log("worker started", count=3)
    [*_, third] = sup.children()
    assert third not in (first, second)
    ids = [f"r{n}" for n in range(4)]
    setup.q.put_many(setup.topic, [chronoq.Job(None, id=i) for i in ids])
    wait_until(lambda: setup.records.ended(ids), what="jobs done after the restart")
    sup.send(signal.SIGTERM)
    assert sup.wait() == 0, sup.log()
    assert pid_gone(second) and pid_gone(third)
    # text logs: one line per job, with the time in UTC and the worker's pid
    line = re.compile(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO chronoq\[(\d+)\] job "
        rf"topic={setup.topic} id=(r\d) attempt=1 outcome=ack duration_ms=\d+\.\d\d$"
    )
    found = [m.groups() for m in map(line.match, sup.log().splitlines()) if m]
    assert sorted(job_id for _, job_id in found) == ids
    assert {int(pid) for pid, _ in found} <= {second, third}


def test_the_supervisor_forwards_a_second_signal(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    sup = setup.start(cli_argv(TARGET, setup.url, "--processes", "2", "--grace", "600"))
    sup.wait_log("worker started", count=2)
    setup.q.put(setup.topic, {"first_sleep": 60}, id="slow", ttr=60)
    wait_until(lambda: setup.records.of("start", "slow"), what="the job running")
    sup.send(signal.SIGTERM)
    sup.wait_log("waiting up to 600 s for 1 running jobs")
    sup.send(signal.SIGTERM)
    assert sup.wait(timeout=20) == 0, sup.log()  # well before the 600 s grace
    assert all(pid_gone(pid) for pid in sup.children())
    assert setup.state("slow") is State.READY  # released, not left reserved
    [runner] = {r["pid"] for r in setup.records.of("start")}
    assert f"chronoq[{runner}] SIGTERM received: stopping now" in sup.log()


def test_workers_stop_by_themselves_when_the_supervisor_is_killed(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    sup = setup.start(cli_argv(TARGET, setup.url, "--processes", "2", "--grace", "20"))
    sup.wait_log("worker started", count=2)
    children = sup.children()
    setup.q.put(setup.topic, {"sleep": 1}, id="running")
    wait_until(lambda: setup.records.of("start", "running"), what="the job running")
    sup.send(signal.SIGKILL)
    sup.wait()
    wait_until(lambda: all(map(pid_gone_or_zombie, children)), what="the workers gone")
    assert sup.log().count("is gone: stopping") == 2
    assert sup.log().count("worker stopped:") == 2  # cleanly: the running job finished
    assert setup.state("running") is None


# -- the store goes away ---------------------------------------------------------------------


@needs_redis
def test_a_worker_survives_a_redis_restart(sqlite_setup: Setup, tmp_path: Path) -> None:
    setup = sqlite_setup  # only for its handlers module and records: the store is Redis
    server = RedisServer(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always")
    try:
        url = f"{server.url}?prefix=outage"
        q = chronoq.connect(url)
        w = setup.worker("--ttr", "2", url=url)
        before = [f"b{n}" for n in range(20)]
        q.put_many(setup.topic, [chronoq.Job({"sleep": 0.1}, id=i) for i in before])
        wait_until(lambda: setup.records.of("end"), what="some jobs done")
        server.stop(kill=True)
        w.wait_log("store unavailable")
        time.sleep(1.0)
        server.start()
        after = [f"a{n}" for n in range(20)]
        q.put_many(setup.topic, [chronoq.Job({"sleep": 0.1}, id=i) for i in after])
        wait_until(lambda: setup.records.ended(before + after), timeout=40, what="all done")
        assert w.alive()
        assert {r["pid"] for r in setup.records.all()} == {w.pid}
        wait_until(lambda: q.stats(setup.topic)["total"] == 0, what="every job acked")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.log()
        q.close()
    finally:
        server.stop(kill=True)


@needs_redis
def test_a_worker_waits_for_a_redis_that_is_not_up_yet(sqlite_setup: Setup, tmp_path: Path) -> None:
    setup = sqlite_setup  # only for its handlers module and records
    server = RedisServer(tmp_path / "redis")
    server.stop()  # its port is free again: nothing listens there yet
    try:
        url = f"{server.url}?prefix=late"
        w = setup.start(cli_argv(TARGET, url, "--log-format", "json"))
        w.wait_log("store unavailable")
        warnings = [line["message"] for line in w.json_lines() if line["level"] == "warning"]
        assert any("store unavailable while reserving" in m for m in warnings), warnings
        assert w.alive()
        server.start()
        with chronoq.connect(url) as q:
            q.put(setup.topic, None, id="late")
            wait_until(lambda: setup.records.ended(["late"]), what="the job done")
        w.send(signal.SIGTERM)
        assert w.wait() == 0, w.log()
    finally:
        server.stop(kill=True)


# -- recurring schedules ---------------------------------------------------------------------


def test_two_workers_put_each_recurring_occurrence_once(setup: Setup) -> None:
    a, b = setup.workers(2)
    t0 = time.time()
    setup.q.recurring(setup.topic, name="tick", every=0.5, payload={"from": "schedule"})
    time.sleep(3.0)
    t1 = time.time()
    for w in (a, b):
        w.send(signal.SIGTERM)
    assert a.wait() == 0 and b.wait() == 0
    puts = [e for e in all_events(setup.q, setup.topic) if e.event.value == "put"]
    ids = [e.id for e in puts]
    assert len(ids) == len(set(ids)), Counter(ids)  # each occurrence put once
    at = sorted(int(i.removeprefix("tick@")) for i in ids)
    # every 500 ms from the epoch: the occurrences between the definition and the stop,
    # give or take one at each edge (the first seen late collapses into the next one;
    # one may fall due between t1 and the signal)
    expected = list(range(math.ceil(t0 * 2) * 500, math.floor(t1 * 2) * 500 + 1, 500))
    assert set(at) <= {*expected, expected[-1] + 500}, (t0, t1, at)
    # none missed between the edges (both edges can go when t0 falls on a boundary)
    assert set(expected[1:-1]) <= set(at), (expected, at)
    assert all(later - earlier == 500 for earlier, later in itertools.pairwise(at)), at
    ran = Counter(r["id"] for r in setup.records.of("end"))
    assert set(ran.values()) <= {1}, ran  # and run at most once each


# -- CLI errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "args", "fragment"),
    [
        ("no_such_module:handlers", [], "cannot import module 'no_such_module'"),
        (f"{HANDLERS_MODULE}:nope", [], f"module '{HANDLERS_MODULE}' has no attribute 'nope'"),
        (f"{HANDLERS_MODULE}:TOPIC", [], "is a str, not a mapping of topic to handler"),
        (HANDLERS_MODULE, [], "expected MODULE:ATTR"),
        ("broken:handlers", [], "importing module 'broken' failed: ZeroDivisionError"),
        ("broken:handlers", ["--processes", "2"], "importing module 'broken' failed"),
        ("bad_topics:handlers", ["--processes", "2"], "invalid topic 'bad topic!'"),
    ],
)
def test_a_bad_target_exits_2_with_one_line(
    sqlite_setup: Setup, target: str, args: list[str], fragment: str
) -> None:
    setup = sqlite_setup
    (setup.dir / "broken.py").write_text("x = 1 / 0\n")
    (setup.dir / "bad_topics.py").write_text("handlers = {'bad topic!': print}\n")
    env = {k: v for k, v in os.environ.items() if k != "CHRONOQ_STORE"}
    done = subprocess.run(
        cli_argv(target, setup.url, *args),
        cwd=setup.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert fragment in done.stderr


def test_a_store_that_cannot_be_opened_exits_3(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    url = f"sqlite:///{setup.dir}/no/such/dir/jobs.db"
    for processes in ("1", "2"):
        done = subprocess.run(
            cli_argv(TARGET, url, "--processes", processes),
            cwd=setup.dir,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 3, done
        assert done.stderr.startswith("Error: store unavailable: ") and done.stderr.count("\n") == 1
        assert "unable to open database file" in done.stderr
