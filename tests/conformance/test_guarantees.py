"""Conformance: the guarantees of docs/contract.md §2, one or a few tests each, on every
backend in ``BACKENDS``.

Producers and consumers run as threads and as separate processes (``python -c``
against ``store_url``); each worker writes what it saw, and the checks run on
those records afterwards. The wake-up checks (§2.6) only assert that a waiting
consumer was woken well before its wait ended, never a speed figure.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq import Job, Queue, State

from .ordering import per_shard

FAR = 3600.0
WORKER_LIFETIME_S = 100.0  # swarm tests time out at 120 s; their workers end before
WAKE_BOUND_S = 1.0  # "woken well before a 10 s wait ended": generous on a noisy machine

# The worker code runs unchanged in threads of the test process (exec'd below)
# and in child processes (passed to ``python -c``).
WORKERS_SRC = textwrap.dedent(
    '''
    import random
    import time

    import chronoq
    from chronoq import Job
    from chronoq.errors import LeaseLost


    def _now():
        return time.time_ns() // 1_000_000


    def _check_time(cfg):
        """A worker ends on its own, even when the test that started it is gone."""
        if time.time() > cfg["give_up_at"]:
            raise RuntimeError(f"{cfg['name']} gave up: the swarm ran too long")


    def _wait_start(cfg, q, emit):
        """Say ready, then wait for the control job "go": every worker starts
        together however long its process took to start."""
        emit({"k": "ready", "by": cfg["name"]})
        while q.get(cfg["control"], "go") is None:
            if q.get(cfg["control"], "stop") is not None:
                return False  # the swarm was called off before it started
            _check_time(cfg)
            time.sleep(0.01)
        return True


    def produce(cfg, emit, crash):
        """Put cfg["ids"] (shuffled), one by one or in small batches."""
        rng = random.Random(cfg["seed"])
        ids = list(cfg["ids"])
        rng.shuffle(ids)
        with chronoq.connect(cfg["url"]) as q:
            if not _wait_start(cfg, q, emit):
                return
            i = 0
            while i < len(ids):
                _check_time(cfg)
                chunk = ids[i : i + rng.randint(1, cfg["batch"])]
                i += len(chunk)
                jobs = [
                    Job(
                        payload={"by": cfg["name"], "id": job_id},
                        id=job_id,
                        delay=rng.choice(cfg["delays"]),
                        priority=rng.randint(-2, 2),
                        max_attempts=1000,
                    )
                    for job_id in chunk
                ]
                if len(jobs) == 1 and rng.random() < 0.5:
                    j = jobs[0]
                    results = [
                        q.put(
                            cfg["topic"], j.payload, id=j.id, delay=j.delay,
                            priority=j.priority, max_attempts=j.max_attempts,
                        )
                    ]
                else:
                    results = q.put_many(cfg["topic"], jobs)
                for r in results:
                    emit({"k": "put", "id": r.id, "created": r.created, "due": r.due_at,
                          "by": cfg["name"]})
                if cfg["pause"]:
                    time.sleep(rng.random() * cfg["pause"])


    def consume(cfg, emit, crash):
        """Reserve and ack until the control job "stop" exists; abandon some
        reservations (a consumer that died), and crash after cfg["crash_after"]."""
        rng = random.Random(cfg["seed"])
        held = 0
        with chronoq.connect(cfg["url"]) as q:
            if not _wait_start(cfg, q, emit):
                return
            while q.get(cfg["control"], "stop") is None:
                _check_time(cfg)
                jobs = q.reserve(
                    cfg["topic"], count=rng.randint(1, cfg["count"]), wait=0.05, ttr=cfg["ttr"]
                )
                seen = _now()
                for j in jobs:
                    emit({"k": "res", "id": j.id, "lease": j.lease, "att": j.attempts,
                          "start": j.deadline - round(j.ttr * 1000), "end": j.deadline,
                          "due": j.due_at, "seen": seen, "by": cfg["name"]})
                for j in jobs:
                    held += 1
                    if cfg["crash_after"] and held >= cfg["crash_after"]:
                        emit({"k": "crash", "by": cfg["name"]})
                        crash()
                        return
                    if rng.random() < cfg["abandon"]:
                        continue
                    time.sleep(rng.random() * cfg["work"])
                    try:
                        q.ack(j)
                    except LeaseLost:
                        emit({"k": "lost", "id": j.id, "lease": j.lease, "by": cfg["name"]})
                    else:
                        emit({"k": "ack", "id": j.id, "lease": j.lease, "by": cfg["name"]})
    '''
)

RUNNER = textwrap.dedent(
    """
    import json, os, sys
    cfg = json.loads(sys.argv[1])
    def emit(record):
        sys.stdout.write(json.dumps(record) + "\\n")
        sys.stdout.flush()
    def crash():
        os._exit(3)
    namespace = {"__name__": "chronoq_conformance_worker"}
    exec(cfg["src"], namespace)
    namespace[cfg["fn"]](cfg, emit, crash)
    """
)

_WORKERS: dict[str, Any] = {"__name__": "chronoq_conformance_worker"}
exec(WORKERS_SRC, _WORKERS)


class _Crash(BaseException):
    """Ends a consumer thread where a process would have died."""


def _crash_thread() -> None:
    raise _Crash


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- running a swarm of producers and consumers ----------------------------------------


@dataclass
class Worker:
    fn: str  # "produce" or "consume"
    name: str
    process: bool
    cfg: dict[str, Any] = field(default_factory=dict)


def producer(name: str, ids: list[str], *, process: bool, **cfg: Any) -> Worker:
    base = {"batch": 1, "delays": [0], "pause": 0.0, "ids": ids}
    return Worker("produce", name, process, base | cfg)


def consumer(name: str, *, process: bool, **cfg: Any) -> Worker:
    base = {"ttr": 0.5, "abandon": 0.0, "work": 0.0, "count": 3, "crash_after": 0}
    return Worker("consume", name, process, base | cfg)


@dataclass
class Swarm:
    records: list[dict[str, Any]]
    stats: dict[str, Any]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["k"] == kind]


def run_swarm(
    store_url: str,
    topic: str,
    tmp_path: Path,
    workers: list[Worker],
    *,
    drain_timeout: float = 60.0,
) -> Swarm:
    """Start every worker at once, wait for the producers, then until the topic
    is empty (or ``drain_timeout``), then stop the consumers."""
    control = topic + "-control"
    records: list[dict[str, Any]] = []
    threads: list[threading.Thread] = []
    procs: list[tuple[Worker, subprocess.Popen[str], Path]] = []
    errors: list[BaseException] = []
    for seed, w in enumerate(workers):
        cfg = {**w.cfg, "url": store_url, "topic": topic, "control": control}
        cfg |= {"seed": seed, "name": w.name, "give_up_at": time.time() + WORKER_LIFETIME_S}
        if w.process:
            out = tmp_path / f"{w.name}.jsonl"
            with out.open("w") as sink:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        RUNNER,
                        json.dumps(cfg | {"src": WORKERS_SRC, "fn": w.fn}),
                    ],
                    stdout=sink,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            procs.append((w, proc, out))
        else:
            thread = threading.Thread(
                target=_thread_main, args=(_WORKERS[w.fn], cfg, records, errors), daemon=True
            )
            thread.start()
            threads.append(thread)
    with chronoq.connect(store_url) as q:
        try:
            _wait_ready(len(workers), records, procs, errors)
            q.put(control, None, id="go")
            _wait_producers(workers, threads, procs)
            end = time.monotonic() + drain_timeout
            while q.stats(topic)["total"] and time.monotonic() < end:
                time.sleep(0.05)
            stats = q.stats(topic)
        finally:
            q.put(control, None, id="stop")
            for thread in threads:
                thread.join(30)
            failed = []
            for w, proc, out in procs:  # every process is waited for before any assert
                try:
                    _, stderr = proc.communicate(timeout=WORKER_LIFETIME_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    _, stderr = proc.communicate()
                expected = {0, 3} if w.fn == "consume" and w.cfg["crash_after"] else {0}
                if proc.returncode not in expected:
                    failed.append(f"{w.name} failed:\n{stderr}")
                records.extend(json.loads(line) for line in out.read_text().splitlines())
            assert not failed, "\n".join(failed)
    assert not any(t.is_alive() for t in threads), "a worker thread did not stop"
    if errors:
        raise errors[0]
    return Swarm(records, stats)


def _thread_main(
    fn: Callable[..., Any],
    cfg: dict[str, Any],
    records: list[dict[str, Any]],
    errors: list[BaseException],
) -> None:
    try:
        fn(cfg, records.append, _crash_thread)
    except _Crash:
        pass
    except BaseException as exc:
        errors.append(exc)


def _wait_ready(
    count: int,
    records: list[dict[str, Any]],
    procs: list[tuple[Worker, subprocess.Popen[str], Path]],
    errors: list[BaseException],
    timeout: float = 60.0,
) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if errors:
            raise errors[0]  # a worker thread failed
        ready = sum(r["k"] == "ready" for r in records)
        for _, proc, out in procs:
            assert proc.poll() is None, f"a worker process exited early: {out.read_text()}"
            ready += '"k": "ready"' in out.read_text()
        if ready == count:
            return
        time.sleep(0.02)
    raise AssertionError("the workers did not start")


def _wait_producers(
    workers: list[Worker],
    threads: list[threading.Thread],
    procs: list[tuple[Worker, subprocess.Popen[str], Path]],
) -> None:
    thread_workers = [w for w in workers if not w.process]
    for w, thread in zip(thread_workers, threads, strict=True):
        if w.fn == "produce":
            thread.join(60)
    for w, proc, _ in procs:
        if w.fn == "produce":
            proc.wait(60)


def check_deliveries(swarm: Swarm, put_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """At-least-once and fenced leases, from the records of a swarm run.

    Returns the reservations of each job, in lease order."""
    leases: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in swarm.of("res"):
        leases[r["id"]].append(r)
    acks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in swarm.of("ack"):
        acks[r["id"]].append(r)
    assert set(leases) <= put_ids, "delivered a job that was never put"
    never = sorted(put_ids - set(leases))
    assert not never, f"{len(never)} jobs never delivered, e.g. {never[:5]}"
    for job_id, held in leases.items():
        held.sort(key=lambda r: (r["start"], r["att"]))
        assert [r["att"] for r in held] == list(range(1, len(held) + 1)), (job_id, held)
        assert len({r["lease"] for r in held}) == len(held), (job_id, held)
        for before, after in pairwise(held):
            assert after["start"] >= before["end"], f"two live leases of {job_id}: {held}"
        assert len(acks[job_id]) == 1, f"{job_id} acked {len(acks[job_id])} times"
        assert acks[job_id][0]["lease"] == held[-1]["lease"], f"{job_id} delivered after ack"
    counts = {k: swarm.stats[k] for k in ("delayed", "ready", "reserved", "dead", "total")}
    assert counts == dict.fromkeys(counts, 0), counts
    return leases


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i:04d}" for i in range(n)]


class Background:
    """Runs ``fn`` in a thread; records the wall-clock ms and monotonic time it returned."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done_ms = 0
        self.done_at = 0.0
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc
        finally:
            self.done_ms = now_ms()
            self.done_at = time.monotonic()

    def join(self, timeout: float = 30) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "background call did not return"
        if self.error is not None:
            raise self.error
        return self.result


# -- 1. never before due ---------------------------------------------------------------


def test_g1_never_delivered_before_due_at(queue: Queue, topic: str) -> None:
    rng = random.Random(1)
    due: dict[str, int] = {}
    for i in range(150):
        r = queue.put(topic, i, delay=rng.randint(0, 300) / 1000, priority=rng.randint(-1, 1))
        due[r.id] = r.due_at
    got: dict[str, int] = {}
    end = time.monotonic() + 20
    while len(got) < len(due) and time.monotonic() < end:
        for job in queue.reserve(topic, count=rng.randint(1, 4), wait=1.0):
            seen = time.time() * 1000
            assert job.id not in got
            assert seen >= job.due_at == due[job.id], (job, seen)
            assert job.deadline - round(job.ttr * 1000) >= job.due_at
            got[job.id] = job.due_at
            queue.ack(job)
    assert set(got) == set(due)


@pytest.mark.timeout(120)
def test_g1_never_early_with_concurrent_consumers(
    store_url: str, topic: str, tmp_path: Path
) -> None:
    ids = _ids("g1", 240)
    delays = [d / 1000 for d in range(0, 301, 10)]
    workers = [
        producer("p-thread", ids[:120], process=False, delays=delays, batch=4, pause=0.01),
        producer("p-proc", ids[120:], process=True, delays=delays, batch=4, pause=0.01),
        consumer("c-thread-1", process=False),
        consumer("c-thread-2", process=False),
        consumer("c-proc", process=True),
    ]
    swarm = run_swarm(store_url, topic, tmp_path, workers)
    due = {r["id"]: r["due"] for r in swarm.of("put")}
    for r in swarm.of("res"):
        assert r["due"] == due[r["id"]]
        assert r["start"] >= r["due"], f"leased {r['due'] - r['start']} ms early: {r}"
        assert r["seen"] >= r["due"], r
    check_deliveries(swarm, set(ids))


# -- 2. at least once ------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_g2_every_job_delivered_until_acked_despite_crashing_consumers(
    store_url: str, topic: str, tmp_path: Path
) -> None:
    ids = _ids("g2", 200)
    workers = [
        producer("p", ids, process=False, delays=[0, 0.05, 0.1], batch=5),
        consumer("c-abandons", process=False, ttr=0.2, abandon=0.2),
        consumer("c-thread-dies", process=False, ttr=0.2, crash_after=10),
        consumer("c-process-dies", process=True, ttr=0.2, crash_after=15, count=5),
        consumer("c-steady", process=True, ttr=0.2, abandon=0.05),
    ]
    swarm = run_swarm(store_url, topic, tmp_path, workers)
    leases = check_deliveries(swarm, set(ids))
    crashed = {r["by"] for r in swarm.of("crash")}
    assert crashed == {"c-thread-dies", "c-process-dies"}, "the crash scenario did not run"
    # what the dead consumers held came back to someone else
    assert any(
        held[0]["by"] in crashed and held[-1]["by"] not in crashed for held in leases.values()
    ), "no job held by a crashed consumer was redelivered"


def test_g2_unacked_job_comes_back_until_dead(queue: Queue, topic: str) -> None:
    queue.put(topic, "x", id="j", ttr=0.05, max_attempts=3)
    seen = []
    end = time.monotonic() + 20
    while time.monotonic() < end:
        jobs = queue.reserve(topic, wait=0.5)
        if not jobs and queue.get(topic, "j").state is State.DEAD:  # type: ignore[union-attr]
            break
        seen += [j.attempts for j in jobs]
    assert seen == [1, 2, 3]
    assert queue.stats(topic)["dead"] == 1


# -- 3. at most one live lease ---------------------------------------------------------


@pytest.mark.timeout(120)
def test_g3_at_most_one_live_lease_per_job(store_url: str, topic: str, tmp_path: Path) -> None:
    ids = _ids("g3", 150)
    with chronoq.connect(store_url) as q:
        q.put_many(
            topic, [Job(payload=i, id=job_id, max_attempts=1000) for i, job_id in enumerate(ids)]
        )
    slow = {"ttr": 0.1, "work": 0.15, "abandon": 0.1, "count": 3}
    workers = [
        *(consumer(f"c-thread-{i}", process=False, **slow) for i in range(3)),
        *(consumer(f"c-proc-{i}", process=True, **slow) for i in range(3)),
    ]
    swarm = run_swarm(store_url, topic, tmp_path, workers)
    leases = check_deliveries(swarm, set(ids))
    assert swarm.of("lost"), "no ack came after its lease expired: the fencing was not exercised"
    assert any(len(held) > 1 for held in leases.values())
    by_process = {r["by"] for r in swarm.of("res")}
    assert any(name.startswith("c-proc") for name in by_process)
    assert any(name.startswith("c-thread") for name in by_process)


# -- 4. order --------------------------------------------------------------------------


def test_g4_priority_then_due_at_then_put_order(queue: Queue, topic: str) -> None:
    rng = random.Random(4)
    expected: list[tuple[int, int, int, str]] = []
    for n in range(80):
        priority = rng.choice([-1000, -5, 0, 0, 0, 1, 3, 1000])
        delay = rng.choice([0, 0, 0, 0.02, 0.05, 0.1, 0.2])
        if n % 3:
            r = queue.put(topic, n, id=f"j{n:03d}", priority=priority, delay=delay)
        else:
            job = Job(payload=n, id=f"j{n:03d}", priority=priority, delay=delay)
            [r] = queue.put_many(topic, [job])
        expected.append((-priority, r.due_at, n, r.id))
    batch = [Job(payload=n, id=f"b{n:03d}", priority=n % 2) for n in range(20)]
    for n, r in enumerate(queue.put_many(topic, batch), start=len(expected)):
        expected.append((-(n % 2), r.due_at, n, r.id))
    time.sleep(max(due for _, due, _, _ in expected) / 1000 - time.time() + 0.05)
    assert queue.stats(topic)["ready"] == 100
    got: list[str] = []
    while jobs := queue.reserve(topic, count=rng.randint(1, 7)):
        got += [j.id for j in jobs]
    assert sorted(got) == sorted(r[-1] for r in expected)
    assert per_shard(queue, got) == per_shard(queue, [job_id for *_, job_id in sorted(expected)])


def test_g4_a_retried_job_queues_behind_jobs_due_before_it(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="a")
    first = queue.reserve(topic)[0]
    queue.put(topic, None, id="b")
    time.sleep(0.005)
    queue.nack(first, delay=0)
    queue.put(topic, None, id="hi", priority=1)
    got = [j.id for j in queue.reserve(topic, count=3)]
    assert sorted(got) == ["a", "b", "hi"]
    assert per_shard(queue, got) == per_shard(queue, ["hi", "b", "a"])


# -- 5. idempotent puts ----------------------------------------------------------------


@pytest.mark.timeout(120)
def test_g5_concurrent_puts_of_the_same_ids_create_one_job_each(
    store_url: str, topic: str, tmp_path: Path
) -> None:
    ids = _ids("g5", 150)
    workers = [
        *(
            producer(f"t{i}", ids, process=False, batch=4, delays=[0, FAR], pause=0.01)
            for i in range(3)
        ),
        *(
            producer(f"p{i}", ids, process=True, batch=4, delays=[0, FAR], pause=0.01)
            for i in range(2)
        ),
    ]
    swarm = run_swarm(store_url, topic, tmp_path, workers, drain_timeout=0)
    puts = swarm.of("put")
    assert len(puts) == 5 * len(ids)
    creators: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in puts:
        if r["created"]:
            creators[r["id"]].append(r)
    for job_id in ids:
        assert len(creators[job_id]) == 1, (job_id, creators[job_id])
    winners = {r["by"][0] for r in puts if r["created"]}
    assert winners == {"t", "p"}, "threads and processes did not race for the same ids"
    for r in puts:
        assert r["due"] == creators[r["id"]][0]["due"], r
    with chronoq.connect(store_url) as q:
        assert q.stats(topic)["total"] == len(ids)
        for job_id in ids:
            info = q.get(topic, job_id)
            assert info is not None
            assert info.payload == {"by": creators[job_id][0]["by"], "id": job_id}
        events = q.events(topic=topic, limit=100_000).events
    assert sorted(e.id for e in events if e.event == "put") == ids


# -- 6. waking consumers ---------------------------------------------------------------


@pytest.mark.parametrize("shared", [False, True], ids=["two-queues", "one-queue"])
def test_g6_put_from_another_thread_wakes_a_waiting_consumer(
    store_url: str, topic: str, shared: bool
) -> None:
    with chronoq.connect(store_url) as consumer_q, chronoq.connect(store_url) as other:
        producer_q = consumer_q if shared else other
        waiter = Background(lambda: consumer_q.reserve(topic, wait=10))
        time.sleep(0.3)
        assert waiter.thread.is_alive()
        put_at = time.monotonic()
        producer_q.put(topic, "x", id="x")
        assert [j.id for j in waiter.join()] == ["x"]
        assert waiter.done_at - put_at < WAKE_BOUND_S


def test_g6_job_becoming_due_wakes_a_waiting_consumer(queue: Queue, topic: str) -> None:
    r = queue.put(topic, "x", id="x", delay=0.5)
    jobs = queue.reserve(topic, wait=10)
    returned = now_ms()
    assert [j.id for j in jobs] == ["x"]
    assert r.due_at <= returned < r.due_at + WAKE_BOUND_S * 1000


def test_g6_delayed_put_while_waiting_wakes_at_its_due_time(store_url: str, topic: str) -> None:
    with chronoq.connect(store_url) as consumer_q, chronoq.connect(store_url) as producer_q:
        waiter = Background(lambda: consumer_q.reserve(topic, wait=10))
        time.sleep(0.2)
        r = producer_q.put(topic, "x", id="x", delay=0.4)
        assert [j.id for j in waiter.join()] == ["x"]
        assert r.due_at <= waiter.done_ms < r.due_at + WAKE_BOUND_S * 1000


def test_g6_earlier_put_wakes_a_consumer_waiting_for_a_later_job(
    store_url: str, topic: str
) -> None:
    with chronoq.connect(store_url) as consumer_q, chronoq.connect(store_url) as producer_q:
        producer_q.put(topic, "late", id="late", delay=8)
        waiter = Background(lambda: consumer_q.reserve(topic, wait=10))
        time.sleep(0.2)
        r = producer_q.put(topic, "early", id="early", delay=0.3)
        assert [j.id for j in waiter.join()] == ["early"]
        assert r.due_at <= waiter.done_ms < r.due_at + WAKE_BOUND_S * 1000


def test_g6_lease_expiry_wakes_a_waiting_consumer(store_url: str, topic: str) -> None:
    with chronoq.connect(store_url) as consumer_q, chronoq.connect(store_url) as holder:
        holder.put(topic, "x", id="x")
        held = holder.reserve(topic, ttr=0.4)[0]
        waiter = Background(lambda: consumer_q.reserve(topic, wait=10))
        got = waiter.join()
        assert [(j.id, j.attempts) for j in got] == [("x", 2)]
        assert held.deadline <= waiter.done_ms < held.deadline + WAKE_BOUND_S * 1000


def _ready_by_nack(q: Queue, topic: str) -> Callable[[], Any]:
    q.put(topic, "x", id="x")
    held = q.reserve(topic, ttr=FAR)[0]
    return lambda: q.nack(held, delay=0)


def _ready_by_requeue(q: Queue, topic: str) -> Callable[[], Any]:
    q.put(topic, "x", id="x")
    q.bury(q.reserve(topic)[0])
    return lambda: q.requeue(topic)


def _ready_by_reschedule(q: Queue, topic: str) -> Callable[[], Any]:
    q.put(topic, "x", id="x", delay=FAR)
    return lambda: q.reschedule(topic, "x", delay=0)


def _ready_by_resume(q: Queue, topic: str) -> Callable[[], Any]:
    q.pause(topic)
    q.put(topic, "x", id="x")
    return lambda: q.resume(topic)


@pytest.mark.parametrize(
    "make_ready",
    [_ready_by_nack, _ready_by_requeue, _ready_by_reschedule, _ready_by_resume],
    ids=["nack", "requeue", "reschedule", "resume"],
)
def test_g6_job_made_ready_wakes_a_waiting_consumer(
    store_url: str, topic: str, make_ready: Callable[[Queue, str], Callable[[], Any]]
) -> None:
    with chronoq.connect(store_url) as consumer_q, chronoq.connect(store_url) as other:
        trigger = make_ready(other, topic)
        waiter = Background(lambda: consumer_q.reserve(topic, wait=10))
        time.sleep(0.3)
        assert waiter.thread.is_alive(), "reserve returned before the job was ready"
        triggered = time.monotonic()
        trigger()
        assert [j.id for j in waiter.join()] == ["x"]
        assert waiter.done_at - triggered < WAKE_BOUND_S


PEER = textwrap.dedent(
    """
    import json, sys, time
    import chronoq
    url, topic = sys.argv[1], sys.argv[2]
    with chronoq.connect(url) as q:
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            command, _, job_id = line.strip().partition(" ")
            if command == "put":
                q.put(topic, "from another process", id=job_id)
                print(json.dumps({"put_done": time.time()}), flush=True)
            else:
                print(json.dumps({"waiting": True}), flush=True)
                jobs = q.reserve(topic, wait=10)
                done = time.time()
                print(json.dumps({"ids": [j.id for j in jobs], "returned": done}), flush=True)
    """
)


class Peer:
    """A queue in another process, driven line by line over its stdin."""

    def __init__(self, store_url: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PEER, store_url, topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.read() == {"ready": True}

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the peer process died: {self.proc.stderr.read() if self.proc.stderr else ''}"
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        _, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err


@pytest.mark.timeout(60)
def test_g6_put_from_another_process_wakes_a_waiting_consumer(
    store_url: str, queue: Queue, topic: str
) -> None:
    peer = Peer(store_url, topic)
    try:
        for n in range(3):
            waiter = Background(lambda: queue.reserve(topic, wait=10))
            time.sleep(0.3)
            assert waiter.thread.is_alive()
            peer.send(f"put x{n}")
            put_done = peer.read()["put_done"]
            assert [j.id for j in waiter.join()] == [f"x{n}"]
            assert waiter.done_ms / 1000 - put_done < WAKE_BOUND_S
    finally:
        peer.close()


@pytest.mark.timeout(60)
def test_g6_consumer_in_another_process_is_woken_by_a_put(
    store_url: str, queue: Queue, topic: str
) -> None:
    peer = Peer(store_url, topic)
    try:
        for n in range(3):
            peer.send("reserve")
            assert peer.read() == {"waiting": True}
            time.sleep(0.3)
            queue.put(topic, n, id=f"x{n}")
            put_done = time.time()
            got = peer.read()
            assert got["ids"] == [f"x{n}"]
            assert got["returned"] - put_done < WAKE_BOUND_S
    finally:
        peer.close()


# -- 7. many producers and consumers, no lock service ----------------------------------


@pytest.mark.timeout(150)
def test_g7_producers_and_consumers_in_threads_and_processes(
    store_url: str, topic: str, tmp_path: Path
) -> None:
    ids = _ids("g7", 400)
    delays = [0, 0, 0.02, 0.1, 0.3]
    workers = [
        producer("p-thread-1", ids[0:100], process=False, delays=delays, batch=5),
        producer("p-thread-2", ids[100:200], process=False, delays=delays, batch=1),
        producer("p-proc-1", ids[200:300], process=True, delays=delays, batch=5),
        producer("p-proc-2", ids[300:400], process=True, delays=delays, batch=2),
        consumer("c-thread-1", process=False, ttr=0.5, abandon=0.05, work=0.005),
        consumer("c-thread-2", process=False, ttr=0.5, count=6),
        consumer("c-proc-1", process=True, ttr=0.5, abandon=0.05, work=0.005),
        consumer("c-proc-2", process=True, ttr=0.5, count=6),
    ]
    swarm = run_swarm(store_url, topic, tmp_path, workers)
    puts = swarm.of("put")
    assert sorted(r["id"] for r in puts) == ids
    assert all(r["created"] for r in puts)
    check_deliveries(swarm, set(ids))
    for r in swarm.of("res"):
        assert r["start"] >= r["due"]
    workers_that_acked = {r["by"].rsplit("-", 1)[0] for r in swarm.of("ack")}
    assert workers_that_acked == {"c-thread", "c-proc"}, workers_that_acked
