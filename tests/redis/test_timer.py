"""One waiting consumer per shard times the next due job (lua/reserve.lua,
watcher.py): a due time wakes one consumer, not every waiting one; the timer
is handed on when its holder stops waiting, and lapses when its holder dies."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import chronoq

from ..children import Child
from ..redis_server import RedisServer
from .conftest import ServerFactory, blocked_clients, wait_until

TIMER_LEASE_S = 0.05  # lua/lib/9_timer.lua


class Waiters:
    """Consumer threads, each one ``reserve(wait=...)``; records what each returned."""

    def __init__(self, q: chronoq.Queue, topic: str) -> None:
        self.q, self.topic = q, topic
        self.returned: list[tuple[int, list[chronoq.Reservation]]] = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, wait: float) -> None:
        def consume() -> None:
            jobs = self.q.reserve(self.topic, wait=wait)
            with self._lock:
                self.returned.append((time.time_ns() // 1_000_000, jobs))

        thread = threading.Thread(target=consume)
        thread.start()
        self.threads.append(thread)

    def got(self) -> list[tuple[int, str]]:
        with self._lock:
            return [(at, job.id) for at, jobs in self.returned for job in jobs]

    def join(self, timeout: float) -> None:
        for thread in self.threads:
            thread.join(timeout)
        assert not any(t.is_alive() for t in self.threads)


def reserve_calls(raw: Any, functions: dict[str, str], since_ms: int, until_ms: int) -> int:
    """How many reserve calls the server ran in [since, until] (SLOWLOG, threshold 0)."""
    calls = 0
    for entry in raw.slowlog_get(100_000):
        words = entry["command"].split()
        at_ms = entry["start_time"] * 1000  # SLOWLOG has whole seconds only
        if words[:2] == [b"FCALL", functions["reserve"].encode()] and (
            since_ms - 1000 <= at_ms <= until_ms
        ):
            calls += 1
    return calls


@pytest.mark.timeout(30)
def test_one_waiter_times_a_due_job(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    server = make_server("--slowlog-log-slower-than", "0", "--slowlog-max-len", "100000")
    q = open_queue(server.url)
    raw = raw_client(server)
    consumers = 8
    due = q.put("herd", "x", id="x", delay=2.0).due_at
    waiters = Waiters(q, "herd")
    for _ in range(consumers):  # each one sees the due time of "x" when it starts
        waiters.start(wait=6)
    wait_until(lambda: blocked_clients(raw) == consumers, what="every consumer to block")
    wait_until(lambda: waiters.got(), what="the job to be delivered")
    time.sleep(0.3)
    [(at, job_id)] = waiters.got()
    assert job_id == "x" and due <= at < due + 1000
    # at the due time the timer's holder reserved, then handed the timer on to
    # one other waiter, and the backup looked once at the lapse (and, on a
    # loaded machine, the holder itself when it woke after that lapse): a few
    # calls, not one per consumer
    functions = q.backend._scripts.functions  # type: ignore[attr-defined]
    calls = reserve_calls(raw, functions, due - 50, due + 300)
    assert calls <= 4, f"{calls} reserve calls by {consumers} waiting consumers"
    assert blocked_clients(raw) == consumers - 1
    waiters.join(10)


@pytest.mark.timeout(30)
def test_timer_is_handed_on_when_its_holder_stops_waiting(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    due = q.put("hand", "x", id="x", delay=1.2).due_at
    waiters = Waiters(q, "hand")
    waiters.start(wait=0.4)  # first to wait: holds the timer, then gives up
    wait_until(lambda: raw.get("chronoq:{hand:0}:timer"), what="a waiter to take the timer")
    waiters.start(wait=8)
    wait_until(lambda: waiters.got(), timeout=6, what="the job to be delivered")
    [(at, job_id)] = waiters.got()
    assert job_id == "x"
    assert due <= at < due + 500, f"delivered {at - due} ms after its due time"
    waiters.join(10)


HOLDER = r"""
import json, sys
import chronoq

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
print("waiting", flush=True)
q.reserve("dies", wait=30)
"""


@pytest.mark.timeout(40)
def test_timer_lapses_when_its_holder_is_killed(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    spawn: Callable[..., Child],
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    holder = spawn(HOLDER, url=server.url)
    assert holder.expect() == "waiting"
    # put once the child runs (its start can take seconds on a loaded machine):
    # the put wakes it to time the job, or it sees the job when it starts waiting
    due = q.put("dies", "x", id="x", delay=3.0).due_at
    wait_until(lambda: raw.get("chronoq:{dies:0}:timer"), what="the child to take the timer")
    waiters = Waiters(q, "dies")
    waiters.start(wait=10)
    wait_until(lambda: blocked_clients(raw) == 2, what="both consumers to block")
    holder.proc.kill()
    assert time.time_ns() // 1_000_000 < due, "the holder was killed after the due time"
    holder.proc.wait(5)
    wait_until(lambda: waiters.got(), timeout=10, what="the job to be delivered")
    [(at, job_id)] = waiters.got()
    assert job_id == "x" and due <= at
    # no one timed the due job: it waited for the dead holder's timer to lapse
    assert at < due + TIMER_LEASE_S * 1000 + 1000, f"{at - due} ms late"
    waiters.join(12)


@pytest.mark.timeout(40)
def test_a_frozen_timer_holder_is_taken_over_by_its_backup(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    spawn: Callable[..., Child],
) -> None:
    """The holder of the shard's timer is frozen (SIGSTOP) over the due time:
    the backup waiter times the lapse, TIMER_LEASE after the due time, and the
    job is delivered then, not when the holder wakes up."""
    q = open_queue(server.url)
    raw = raw_client(server)
    holder = spawn(HOLDER.replace('"dies"', '"frozen"'), url=server.url)
    assert holder.expect() == "waiting"
    due = q.put("frozen", "x", id="x", delay=3.0).due_at  # as above: once the child runs
    wait_until(lambda: raw.get("chronoq:{frozen:0}:timer"), what="the child to take the timer")
    waiters = Waiters(q, "frozen")
    for _ in range(3):
        waiters.start(wait=5)
    wait_until(lambda: blocked_clients(raw) == 4, what="every consumer to block")
    holder.proc.send_signal(signal.SIGSTOP)
    assert time.time_ns() // 1_000_000 < due, "the holder was frozen after the due time"
    try:
        wait_until(lambda: waiters.got(), timeout=10, what="the job to be delivered")
    finally:
        holder.proc.send_signal(signal.SIGCONT)
    [(at, job_id)] = waiters.got()
    assert job_id == "x" and due <= at
    # a backstop, not a benchmark: about TIMER_LEASE late, far from BACKUP_SLACK
    assert at < due + 1000, f"{at - due} ms late"
    waiters.join(12)


LEASER = r"""
import json, sys
import chronoq

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
print("waiting", flush=True)
[job] = q.reserve("leased", wait=30, ttr=1)
print("leased", flush=True)
q.reserve("leased", wait=30)  # times its own lease: the shard's only timed change
"""


@pytest.mark.timeout(40)
def test_a_waiter_asleep_before_a_lease_takes_over_when_its_holder_dies(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    spawn: Callable[..., Child],
) -> None:
    """A waiter that went to sleep on an empty shard knows no due time. When
    another consumer leases a job and then times that lease, the waiter is
    woken once to learn when that timer lapses: if the holder dies, the job
    comes back about TIMER_LEASE after its lease ended, not when the waiter's
    own wait ends."""
    q = open_queue(server.url)
    raw = raw_client(server)
    leaser = spawn(LEASER, url=server.url)
    assert leaser.expect() == "waiting"
    wait_until(lambda: blocked_clients(raw) == 1, what="the child to block")
    waiters = Waiters(q, "leased")
    waiters.start(wait=15)  # blocks after the child: the put's token goes to the child
    wait_until(lambda: blocked_clients(raw) == 2, what="both consumers to block")
    q.put("leased", "x", id="x")
    assert leaser.expect() == "leased"
    wait_until(lambda: raw.get("chronoq:{leased:0}:timer"), what="the child to time its lease")
    leaser.proc.kill()
    leaser.proc.wait(5)
    killed = time.time_ns() // 1_000_000
    wait_until(lambda: waiters.got(), timeout=12, what="the job to be delivered")
    [(at, job_id)] = waiters.got()
    assert job_id == "x"
    # the lease (1 s) ends within a second of the kill, then the timer lapses
    assert at < killed + 1000 + TIMER_LEASE_S * 1000 + 1500, f"{at - killed} ms after the kill"
    waiters.join(20)
