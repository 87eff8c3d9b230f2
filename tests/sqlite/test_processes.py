"""Several processes on one SQLite file (docs/contract.md §2.3, §2.7, §6): exclusive
leases, cross-process wake-ups, redelivery after a consumer is killed, and
the in-process wake registry shared by queues on the same file."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
import time
from collections import Counter, defaultdict
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq import Job, Reservation
from chronoq.backends.sqlite import signals

from ..children import all_events

# Generous: a wake-up that happened at all comes within milliseconds; one that
# did not happen comes at the end of the wait (10 s).
WOKEN_WITHIN_S = 2.0


def assert_no_overlapping_leases(leases: list[tuple[str, int, int]]) -> None:
    """``leases``: (job id, start ms, end ms); one job never has two at once."""
    by_job: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for job_id, start, end in leases:
        by_job[job_id].append((start, end))
    for job_id, spans in by_job.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"job {job_id} leased twice at once: {spans}"


# -- (a) several consumers draining one topic -----------------------------------------

DRAIN = r"""
import json, os, sys, time
import chronoq

args = json.loads(sys.argv[1])
topic, done_file = args["topic"], args["done_file"]
q = chronoq.connect(args["url"])
print("ready", flush=True)
sys.stdin.readline()
leases, errors = [], []
give_up = time.monotonic() + 40
while time.monotonic() < give_up:
    try:
        jobs = q.reserve(topic, count=10, wait=0.2)
        if not jobs:
            if os.path.exists(done_file) and q.stats(topic)["total"] == 0:
                break
            continue
        for job in jobs:
            start = job.deadline - round(job.ttr * 1000)
            q.ack(job)
            end = time.time_ns() // 1_000_000
            leases.append([job.id, job.lease, start, job.deadline, end, job.attempts, job.payload])
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
else:
    errors.append("gave up after 40 s")
with open(args["out"], "w") as out:
    json.dump({"leases": leases, "errors": errors}, out)
q.close()
"""


@pytest.mark.parametrize("consumers", [2, 4])
def test_consumers_drain_every_job_exactly_once(
    spawn: Any, sqlite_url: str, tmp_path: Path, consumers: int
) -> None:
    total, upfront = 3_000, 1_500
    done_file = tmp_path / "producer-done"
    q = chronoq.connect(sqlite_url)
    q.put_many("work", [Job(payload=n, id=f"job-{n}") for n in range(upfront)])
    children = [
        spawn(
            DRAIN,
            url=sqlite_url,
            topic="work",
            done_file=str(done_file),
            out=str(tmp_path / f"out-{i}.json"),
        )
        for i in range(consumers)
    ]
    for child in children:
        assert child.expect() == "ready"
    for child in children:
        child.send("go")
    # the rest is put while the consumers run, in small batches
    for start in range(upfront, total, 50):
        q.put_many("work", [Job(payload=n, id=f"job-{n}") for n in range(start, start + 50)])
    done_file.touch()

    for child in children:
        assert child.finish() == 0, child.stderr()
        assert child.stderr() == ""
    results = [json.loads((tmp_path / f"out-{i}.json").read_text()) for i in range(consumers)]
    errors = [e for r in results for e in r["errors"]]
    assert errors == []  # no "database is locked", no LeaseLost

    leases = [lease for r in results for lease in r["leases"]]
    acked = Counter(lease[0] for lease in leases)
    assert set(acked) == {f"job-{n}" for n in range(total)}
    assert max(acked.values()) == 1, [k for k, v in acked.items() if v > 1][:10]
    assert all(lease[5] == 1 for lease in leases)  # nothing expired and came back
    assert all(lease[6] == int(lease[0].removeprefix("job-")) for lease in leases)
    assert len({lease[1] for lease in leases}) == len(leases)  # lease tokens unique
    assert_no_overlapping_leases([(i, s, min(d, e)) for i, _, s, d, e, _, _ in leases])
    # they really ran side by side, and none starved: SQLite's own busy handler
    # let one process keep the lock (one run saw [3000, 0]); chronoq's short
    # jittered retries share it (runs here see 45-65% each of two)
    shares = [len(r["leases"]) for r in results]
    assert min(shares) >= total // (4 * consumers), shares

    assert q.stats("work")["total"] == 0
    kinds = Counter((e.event, e.id) for e in all_events(q, "work"))
    for n in range(total):
        for kind in ("put", "reserve", "ack"):
            assert kinds[kind, f"job-{n}"] == 1, (kind, n)
    q.close()


# -- (b) a commit by another process wakes a waiting consumer ---------------------------

WAITER = r"""
import json, sys, time
import chronoq

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
q.reserve(args["topic"])  # warm up: schema checked, connection open
print("waiting", flush=True)
started = time.time()
jobs = q.reserve(args["topic"], wait=10)
returned = time.time()
print(json.dumps({
    "started": started,
    "returned": returned,
    "jobs": [[j.id, j.payload, j.due_at, j.deadline - round(j.ttr * 1000)] for j in jobs],
}), flush=True)
q.close()
"""


def test_put_by_another_process_wakes_a_waiting_consumer(spawn: Any, sqlite_url: str) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.put("other", 1)  # the topic must not matter to the file-level check
        child = spawn(WAITER, url=sqlite_url, topic="wake")
        assert child.expect() == "waiting"
        time.sleep(0.5)  # let it settle into its wait
        q.put("wake", {"hello": "there"}, id="w1")
        put_at = time.time()
        report = json.loads(child.expect(timeout=15))
        assert child.finish() == 0, child.stderr()
    assert [j[:2] for j in report["jobs"]] == [["w1", {"hello": "there"}]]
    assert report["returned"] - put_at < WOKEN_WITHIN_S
    assert report["returned"] - report["started"] < 9


def test_earlier_delayed_put_by_another_process_wakes_a_waiting_consumer(
    spawn: Any, sqlite_url: str
) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.put("wake", 0, id="far", delay=600)  # the waiter knows of nothing sooner
        child = spawn(WAITER, url=sqlite_url, topic="wake")
        assert child.expect() == "waiting"
        time.sleep(0.3)
        due_at = q.put("wake", 1, id="soon", delay=1.0).due_at
        report = json.loads(child.expect(timeout=15))
        assert child.finish() == 0, child.stderr()
    [[job_id, _, job_due, reserved_at]] = report["jobs"]
    assert job_id == "soon" and job_due == due_at
    assert reserved_at >= due_at  # never before its due time
    assert report["returned"] - due_at / 1000 < WOKEN_WITHIN_S


def test_requeue_by_another_process_wakes_a_waiting_consumer(spawn: Any, sqlite_url: str) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.put("wake", 1, id="d", max_attempts=1)
        [job] = q.reserve("wake")
        q.bury(job)
        child = spawn(WAITER, url=sqlite_url, topic="wake")
        assert child.expect() == "waiting"
        time.sleep(0.3)
        assert q.requeue("wake") == 1
        requeued_at = time.time()
        report = json.loads(child.expect(timeout=15))
        assert child.finish() == 0, child.stderr()
    assert [j[0] for j in report["jobs"]] == ["d"]
    assert report["returned"] - requeued_at < WOKEN_WITHIN_S


# -- (c) a consumer killed while holding leases ------------------------------------------

HOLDER = r"""
import json, sys, time
import chronoq

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
jobs = q.reserve(args["topic"], count=args["count"])
print(json.dumps([[j.id, j.lease, j.deadline] for j in jobs]), flush=True)
time.sleep(60)
"""


def drain(q: chronoq.Queue, topic: str, expected: int, limit_s: float = 20) -> list[Reservation]:
    """Reserve and ack until ``expected`` jobs were acked here; returns them."""
    got: list[Reservation] = []
    give_up = time.monotonic() + limit_s
    while len(got) < expected and time.monotonic() < give_up:
        for job in q.reserve(topic, count=10, wait=3):
            q.ack(job)
            got.append(job)
    return got


def test_killed_consumer_leases_are_redelivered_after_ttr(spawn: Any, sqlite_url: str) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.put_many("work", [Job(payload=n, id=f"job-{n}", ttr=1.0) for n in range(40)])
        child = spawn(HOLDER, url=sqlite_url, topic="work", count=15)
        held = {job_id: deadline for job_id, _, deadline in json.loads(child.expect())}
        assert len(held) == 15
        child.proc.kill()
        child.proc.wait()

        got = drain(q, "work", 40)
        assert sorted(j.id for j in got) == sorted(f"job-{n}" for n in range(40))
        for job in got:
            reserved_at = job.deadline - round(job.ttr * 1000)
            if job.id in held:
                assert job.attempts == 2
                assert reserved_at >= held[job.id], "redelivered before the lease ran out"
            else:
                assert job.attempts == 1
        assert q.stats("work")["total"] == 0
        expired = {e.id for e in all_events(q, "work") if e.event == "expire"}
        assert expired == set(held)


KILLED_MIDWAY = r"""
import json, sys
import chronoq

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
print("running", flush=True)
while True:
    for job in q.reserve(args["topic"], count=10):
        q.ack(job)
"""


def test_consumer_killed_midway_loses_nothing(spawn: Any, sqlite_url: str, tmp_path: Path) -> None:
    total = 3_000
    with chronoq.connect(sqlite_url) as q:
        q.put_many("work", [Job(payload=n, id=f"job-{n}", ttr=1.0) for n in range(total)])
        child = spawn(KILLED_MIDWAY, url=sqlite_url, topic="work")
        assert child.expect() == "running"
        give_up = time.monotonic() + 20
        while q.stats("work")["total"] > total * 0.8 and time.monotonic() < give_up:
            time.sleep(0.01)
        child.proc.kill()  # SIGKILL, most likely inside a transaction
        child.proc.wait()
        left = q.stats("work")["total"]
        assert 0 < left < total

        drain(q, "work", left)
        assert q.stats("work")["total"] == 0
        acks = Counter(e.id for e in all_events(q, "work") if e.event == "ack")
        assert set(acks) == {f"job-{n}" for n in range(total)}
        assert set(acks.values()) == {1}
    with closing(sqlite3.connect(tmp_path / "chronoq.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- (d) queues of one process share one wake registry per file ---------------------------


def wait_in_thread(q: chronoq.Queue, topic: str, wait: float = 10) -> tuple[threading.Thread, Any]:
    box: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        started.set()
        box["jobs"] = q.reserve(topic, wait=wait)
        box["returned"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait()
    time.sleep(0.3)  # let it settle into its wait
    return thread, box


def test_put_through_another_queue_on_same_file_wakes_waiter(sqlite_url: str) -> None:
    with chronoq.connect(sqlite_url) as waiter, chronoq.connect(sqlite_url) as producer:
        waiter.reserve("t")
        thread, box = wait_in_thread(waiter, "t")
        producer.put("t", {"n": 1}, id="x")
        put_at = time.monotonic()
        thread.join(15)
        assert not thread.is_alive()
        assert [j.id for j in box["jobs"]] == ["x"]
        assert box["returned"] - put_at < WOKEN_WITHIN_S


@pytest.fixture
def no_cross_process_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stretch the data_version check far beyond the waits below, so that only
    the in-process registry can wake a waiter in time."""
    monkeypatch.setattr(signals, "CROSS_PROCESS_CHECK_S", 60.0)


@pytest.mark.usefixtures("no_cross_process_check")
@pytest.mark.parametrize("spelling", ["same", "relative", "dot-segments", "symlink", "bare"])
def test_registry_is_shared_by_every_spelling_of_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    target = tmp_path / "chronoq.db"
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.db").symlink_to(target)
    monkeypatch.chdir(tmp_path / "sub")
    other = {
        "same": f"sqlite:///{target}",
        "relative": "sqlite:///../chronoq.db",
        "dot-segments": f"sqlite:///{tmp_path}/sub/../chronoq.db",
        "symlink": f"sqlite:///{tmp_path / 'link.db'}",
        "bare": "../chronoq.db",
    }[spelling]
    with chronoq.connect(f"sqlite:///{target}") as waiter, chronoq.connect(other) as producer:
        waiter.reserve("t")
        thread, box = wait_in_thread(waiter, "t", wait=5)
        producer.put("t", 1, id="x")
        put_at = time.monotonic()
        thread.join(10)
        assert not thread.is_alive()
        assert [j.id for j in box["jobs"]] == ["x"]
        assert box["returned"] - put_at < WOKEN_WITHIN_S


@pytest.mark.usefixtures("no_cross_process_check")
def test_registry_wakes_on_every_kind_of_release(sqlite_url: str) -> None:
    """nack, reschedule, requeue and resume through another queue all wake."""
    with chronoq.connect(sqlite_url) as waiter, chronoq.connect(sqlite_url) as other:
        other.put("t", 1, id="n")
        [job] = other.reserve("t")
        other.put("t", 2, id="r", delay=600)
        other.put("t", 3, id="q", max_attempts=1)
        [dead] = other.reserve("t")
        other.bury(dead)
        actions = {
            "n": lambda: other.nack(job, delay=0),
            "r": lambda: other.reschedule("t", "r", delay=0),
            "q": lambda: other.requeue("t"),
        }
        for job_id, action in actions.items():
            thread, box = wait_in_thread(waiter, "t", wait=5)
            action()
            acted_at = time.monotonic()
            thread.join(10)
            assert [j.id for j in box["jobs"]] == [job_id]
            assert box["returned"] - acted_at < WOKEN_WITHIN_S, job_id
        other.pause("t")
        other.put("t", 4, id="p")
        thread, box = wait_in_thread(waiter, "t", wait=5)
        other.resume("t")
        resumed_at = time.monotonic()
        thread.join(10)
        assert [j.id for j in box["jobs"]] == ["p"]
        assert box["returned"] - resumed_at < WOKEN_WITHIN_S


def test_memory_stores_do_not_share_a_registry() -> None:
    with chronoq.connect("sqlite://:memory:") as one, chronoq.connect("sqlite://:memory:") as two:
        two.put("t", 1)
        assert one.reserve("t", wait=0.2) == []
        assert len(two.reserve("t", wait=0.2)) == 1
