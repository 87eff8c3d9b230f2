"""Conformance: every row of the transition table (docs/contract.md §1) through the public
``Queue`` API, lease fencing, and the event log (§7).

Only the public API and ``store_url`` are used, so these tests run unchanged on
every backend in ``BACKENDS``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import chronoq
from chronoq import Event, EventKind, Job, JobInfo, Queue, Reservation, State
from chronoq.errors import InvalidInput, InvalidJob, LeaseLost

from ..localtime import local_timezone
from .ordering import per_shard

ULID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")  # Crockford base32: no I, L, O, U
FAR = 3600.0  # a delay that never comes due during a test
LEASE_OPS = ("ack", "nack", "touch", "bury")


# -- helpers -------------------------------------------------------------------------


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def state_of(q: Queue, topic: str, job_id: str) -> State | None:
    info = q.get(topic, job_id)
    return None if info is None else info.state


def counts(q: Queue, topic: str) -> dict[str, int]:
    stats = q.stats(topic)
    return {key: stats[key] for key in ("delayed", "ready", "reserved", "dead")}


def zero(**overrides: int) -> dict[str, int]:
    return {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0, **overrides}


def reserve_one(q: Queue, topic: str, **kwargs: Any) -> Reservation:
    jobs = q.reserve(topic, **kwargs)
    assert len(jobs) == 1, jobs
    return jobs[0]


def sleep_past(deadline_ms: int, margin_ms: int = 30) -> None:
    """Sleep until the wall clock is safely past ``deadline_ms``."""
    while (left := deadline_ms + margin_ms - now_ms()) > 0:
        time.sleep(left / 1000)


def make_job(q: Queue, topic: str, state: str, job_id: str, **kwargs: Any) -> Reservation | None:
    """A job in ``state``; returns its reservation when it is reserved. The topic
    must hold no other ready job."""
    if state == "delayed":
        q.put(topic, {"s": state}, id=job_id, delay=FAR, **kwargs)
        return None
    q.put(topic, {"s": state}, id=job_id, **kwargs)
    if state == "ready":
        return None
    res = reserve_one(q, topic)
    assert res.id == job_id
    if state == "dead":
        q.bury(res, error="made dead")
        return None
    return res


def lease_call(q: Queue, op: str, *args: Any) -> Any:
    if op == "nack":
        return q.nack(*args, delay=0)
    if op == "touch":
        return q.touch(*args, ttr=60)
    if op == "bury":
        return q.bury(*args, error="buried")
    return q.ack(*args)


def strict_equal(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (1 == 1.0 == True in Python)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


class EventTail:
    """Reads the events of one topic appended since the last call."""

    def __init__(self, q: Queue, topic: str) -> None:
        self.q, self.topic = q, topic
        self.cursor = q.events(topic=topic, limit=100_000).cursor

    def new(self) -> list[Event]:
        page = self.q.events(topic=self.topic, cursor=self.cursor, limit=100_000)
        self.cursor = page.cursor
        return page.events

    def kinds(self) -> list[tuple[str, str]]:
        return [(e.event.value, e.id) for e in self.new()]


class Background:
    """Runs ``fn`` in a thread; records when it returned and what."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done_at = 0.0
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc
        finally:
            self.done_at = time.monotonic()

    def join(self, timeout: float = 30) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "background call did not return"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def non_utc_local_time() -> Iterator[None]:
    """Local time 5:30 ahead of UTC, so a naive datetime read as local time is caught."""
    with local_timezone("XST-5:30"):
        yield


# -- put -------------------------------------------------------------------------------


def test_put_without_delay_is_ready_now(queue: Queue, topic: str) -> None:
    t0 = now_ms()
    r = queue.put(topic, {"a": 1}, id="now")
    t1 = now_ms()
    assert (r.id, r.created) == ("now", True)
    assert t0 <= r.due_at <= t1
    info = queue.get(topic, "now")
    assert info is not None
    assert info.state is State.READY
    assert info.due_at == r.due_at
    assert info.attempts == 0
    assert t0 <= info.created_at <= t1
    assert counts(queue, topic) == zero(ready=1)
    res = reserve_one(queue, topic)
    assert (res.id, res.payload, res.due_at) == ("now", {"a": 1}, r.due_at)


def test_put_with_delay_is_delayed_until_due(queue: Queue, topic: str) -> None:
    t0 = now_ms()
    r = queue.put(topic, "x", delay=0.4)
    t1 = now_ms()
    assert t0 + 400 <= r.due_at <= t1 + 400
    assert state_of(queue, topic, r.id) is State.DELAYED
    assert counts(queue, topic) == zero(delayed=1)
    assert queue.stats(topic)["next_due_at"] == r.due_at
    assert queue.reserve(topic) == []
    res = reserve_one(queue, topic, wait=5)
    assert now_ms() >= r.due_at
    assert res.id == r.id
    assert res.deadline - round(res.ttr * 1000) >= r.due_at


@pytest.mark.usefixtures("non_utc_local_time")
def test_put_run_at_naive_datetime_means_utc(queue: Queue, topic: str) -> None:
    due = (now_ms() // 1000 + 600) * 1000 + 123  # ten minutes ahead, with a ms part
    naive = datetime(1970, 1, 1) + timedelta(milliseconds=due)
    r = queue.put(topic, None, run_at=naive)
    assert r.due_at == due
    assert state_of(queue, topic, r.id) is State.DELAYED


def test_put_run_at_aware_datetime(queue: Queue, topic: str) -> None:
    due = (now_ms() // 1000 + 600) * 1000 + 7
    zone = timezone(timedelta(hours=-7))
    aware = datetime.fromtimestamp(due / 1000, UTC).astimezone(zone)
    assert aware.utcoffset() == timedelta(hours=-7)
    r = queue.put(topic, None, run_at=aware)
    assert r.due_at == due
    assert queue.get(topic, r.id).due_at == due  # type: ignore[union-attr]


@pytest.mark.parametrize("as_int", [False, True])
def test_put_run_at_epoch_seconds(queue: Queue, topic: str, as_int: bool) -> None:
    seconds = now_ms() // 1000 + 900
    run_at: float = seconds if as_int else seconds + 0.25
    r = queue.put(topic, None, run_at=run_at)
    assert r.due_at == seconds * 1000 + (0 if as_int else 250)
    assert state_of(queue, topic, r.id) is State.DELAYED


@pytest.mark.parametrize(
    "run_at",
    [
        pytest.param(lambda: time.time() - 3600, id="epoch"),
        pytest.param(lambda: datetime.now(UTC) - timedelta(days=2), id="aware"),
        pytest.param(lambda: datetime(2001, 9, 9, 1, 46, 40), id="naive"),
        pytest.param(lambda: 0, id="zero"),
    ],
)
def test_put_run_at_in_the_past_is_due_now(
    queue: Queue, topic: str, run_at: Callable[[], Any]
) -> None:
    t0 = now_ms()
    r = queue.put(topic, "late", run_at=run_at())
    t1 = now_ms()
    assert t0 <= r.due_at <= t1
    assert state_of(queue, topic, r.id) is State.READY
    assert reserve_one(queue, topic).id == r.id


@pytest.mark.parametrize("year", [2100, 3000, 9999])
def test_put_run_at_far_ahead_keeps_its_due_time(queue: Queue, topic: str, year: int) -> None:
    """Any run_at that validation accepts (before the year 10000) is stored exactly:
    a due time beyond a store's integer width must not wrap into the past."""
    far = datetime(year, 12, 31, 23, 59, 59, 999000)
    due = round(far.replace(tzinfo=UTC).timestamp() * 1000)
    events = queue.events(topic, limit=100_000).cursor
    r = queue.put(topic, {"year": year}, run_at=far)
    assert r.due_at == due
    info = queue.get(topic, r.id)
    assert info is not None and (info.state, info.due_at) == (State.DELAYED, due)
    queue.put(topic, "now", id="now")
    assert [j.id for j in queue.reserve(topic, 5)] == ["now"], "a far job is not due"
    [put] = [e for e in queue.events(topic, cursor=events, limit=100).events if e.id == r.id]
    assert (put.event, put.due_at) == (EventKind.PUT, due)
    assert queue.reschedule(topic, r.id, run_at=far - timedelta(days=1)) is True
    assert queue.get(topic, r.id).due_at == due - 86_400_000  # type: ignore[union-attr]


def test_generated_ids_are_sortable_ulids(queue: Queue, topic: str) -> None:
    ids = [queue.put(topic, i).id for i in range(40)]
    ids += [r.id for r in queue.put_many(topic, [Job(payload=i) for i in range(40)])]
    for job_id in ids:
        assert ULID_RE.fullmatch(job_id), job_id
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids), "generated ids must sort in put order"
    assert queue.stats(topic)["total"] == 80


def test_put_keeps_a_given_id_and_fields(queue: Queue, topic: str) -> None:
    job_id = "order-42:" + "x" * 200
    r = queue.put(topic, {"o": 42}, id=job_id, priority=-7, ttr=12.5, max_attempts=9, unique_for=60)
    assert (r.id, r.created) == (job_id, True)
    info = queue.get(topic, job_id)
    assert info is not None
    assert (info.topic, info.id, info.payload) == (topic, job_id, {"o": 42})
    assert (info.priority, info.ttr, info.max_attempts, info.unique_for) == (-7, 12.5, 9, 60)
    assert info.deadline is None
    assert info.last_error is None


@pytest.mark.parametrize("state", ["delayed", "ready", "reserved", "dead"])
def test_put_existing_id_is_not_created(queue: Queue, topic: str, state: str) -> None:
    res = make_job(queue, topic, state, "dup")
    before = queue.get(topic, "dup")
    assert before is not None
    tail = EventTail(queue, topic)
    r = queue.put(topic, {"other": True}, id="dup", delay=5, priority=9)
    assert (r.id, r.created, r.due_at) == ("dup", False, before.due_at)
    assert queue.get(topic, "dup") == before
    assert queue.stats(topic)["total"] == 1
    assert tail.new() == []
    if res is not None:
        queue.ack(res)  # the lease was left alone


@pytest.mark.parametrize("state", ["delayed", "ready", "dead"])
def test_put_replace_replaces_unless_reserved(queue: Queue, topic: str, state: str) -> None:
    make_job(queue, topic, state, "rep", priority=1)
    t0 = now_ms()
    r = queue.put(topic, {"new": 1}, id="rep", delay=FAR, priority=5, replace=True)
    t1 = now_ms()
    assert r.created is True
    assert t0 + FAR * 1000 <= r.due_at <= t1 + FAR * 1000
    info = queue.get(topic, "rep")
    assert info is not None
    assert (info.state, info.payload, info.priority, info.attempts, info.last_error) == (
        State.DELAYED,
        {"new": 1},
        5,
        0,
        None,
    )
    assert info.due_at == r.due_at
    assert counts(queue, topic) == zero(delayed=1)


def test_put_replace_leaves_a_reserved_job_alone(queue: Queue, topic: str) -> None:
    res = make_job(queue, topic, "reserved", "rep")
    assert res is not None
    before = queue.get(topic, "rep")
    r = queue.put(topic, {"new": 1}, id="rep", delay=5, replace=True)
    assert (r.created, r.due_at) == (False, res.due_at)
    assert queue.get(topic, "rep") == before
    queue.ack(res)
    assert queue.get(topic, "rep") is None


@pytest.mark.parametrize("end", ["ack", "delete"])
def test_unique_for_remembers_then_forgets(queue: Queue, topic: str, end: str) -> None:
    first = queue.put(topic, "v1", id="daily", unique_for=1.0)
    res = reserve_one(queue, topic)
    if end == "ack":
        queue.ack(res)
    else:
        assert queue.delete(topic, "daily") is True
    gone_at = time.monotonic()
    assert queue.get(topic, "daily") is None
    again = queue.put(topic, "v2", id="daily", unique_for=1.0)
    assert time.monotonic() - gone_at < 1.0, "machine too slow for this check"
    assert (again.created, again.due_at) == (False, first.due_at)
    assert queue.get(topic, "daily") is None, "a remembered id must not create a job"
    assert queue.stats(topic)["total"] == 0
    time.sleep(max(0.0, gone_at + 1.1 - time.monotonic()))
    later = queue.put(topic, "v3", id="daily")
    assert later.created is True
    assert queue.get(topic, "daily").payload == "v3"  # type: ignore[union-attr]


def test_without_unique_for_an_acked_id_can_be_put_again(queue: Queue, topic: str) -> None:
    queue.put(topic, "v1", id="once")
    queue.ack(reserve_one(queue, topic))
    r = queue.put(topic, "v2", id="once")
    assert r.created is True
    assert queue.get(topic, "once").payload == "v2"  # type: ignore[union-attr]


def test_replace_overrides_a_remembered_id(queue: Queue, topic: str) -> None:
    queue.put(topic, "v1", id="daily", unique_for=600)
    queue.ack(reserve_one(queue, topic))
    assert queue.put(topic, "v2", id="daily").created is False
    r = queue.put(topic, "v3", id="daily", replace=True)
    assert r.created is True
    assert queue.get(topic, "daily").payload == "v3"  # type: ignore[union-attr]


def test_put_many_results_in_order_with_dedupe(queue: Queue, topic: str) -> None:
    old = queue.put(topic, "old", id="b", delay=FAR)
    t0 = now_ms()
    results = queue.put_many(
        topic,
        [
            Job(payload=1, id="a", delay=0.5),
            Job(payload=2, id="b"),
            Job(payload=3, id="c"),
            Job(payload=4, id="a", delay=FAR),
            Job(payload=5),
        ],
    )
    t1 = now_ms()
    assert [r.id for r in results[:4]] == ["a", "b", "c", "a"]
    assert ULID_RE.fullmatch(results[4].id)
    assert [r.created for r in results] == [True, False, True, False, True]
    assert t0 + 500 <= results[0].due_at <= t1 + 500
    assert results[1].due_at == old.due_at
    assert results[3].due_at == results[0].due_at, "a duplicate in a batch reports the first"
    assert queue.get(topic, "a").payload == 1  # type: ignore[union-attr]
    assert queue.get(topic, "b").payload == "old"  # type: ignore[union-attr]
    assert counts(queue, topic) == zero(delayed=2, ready=2)
    assert queue.put_many(topic, []) == []


def test_put_many_rejects_the_whole_batch_on_one_invalid_job(queue: Queue, topic: str) -> None:
    queue.put(topic, 0, id="keep")
    tail = EventTail(queue, topic)
    with pytest.raises(InvalidJob) as raised:
        queue.put_many(topic, [Job(payload=1, id="x"), Job(payload=2, delay=-1)])
    assert raised.value.index == 1
    assert queue.get(topic, "x") is None
    assert queue.stats(topic)["total"] == 1
    assert tail.new() == []


# -- reserve ---------------------------------------------------------------------------


def test_reserve_leases_with_attempts_and_deadline(queue: Queue, topic: str) -> None:
    put = queue.put(topic, {"p": 1}, id="r", ttr=7, priority=3, max_attempts=4)
    t0 = now_ms()
    res = reserve_one(queue, topic)
    t1 = now_ms()
    assert (res.topic, res.id, res.payload, res.attempts) == (topic, "r", {"p": 1}, 1)
    assert (res.priority, res.max_attempts, res.ttr, res.due_at) == (3, 4, 7.0, put.due_at)
    assert t0 + 7000 <= res.deadline <= t1 + 7000
    assert res.lease
    info = queue.get(topic, "r")
    assert info is not None
    assert (info.state, info.attempts, info.deadline) == (State.RESERVED, 1, res.deadline)
    assert counts(queue, topic) == zero(reserved=1)
    assert queue.reserve(topic) == [], "a reserved job is not handed out twice"


def test_reserve_gives_a_new_lease_each_time(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="r")
    leases = []
    for attempt in (1, 2, 3):
        res = reserve_one(queue, topic)
        assert res.attempts == attempt
        leases.append(res.lease)
        assert queue.nack(res, delay=0) is State.READY
    assert len(set(leases)) == 3


def test_reserve_ttr_override(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="r", ttr=30)
    t0 = now_ms()
    res = reserve_one(queue, topic, ttr=2.5)
    t1 = now_ms()
    assert res.ttr == 2.5
    assert t0 + 2500 <= res.deadline <= t1 + 2500
    assert queue.get(topic, "r").deadline == res.deadline  # type: ignore[union-attr]


def test_reserve_count_and_empty_topic(queue: Queue, topic: str) -> None:
    assert queue.reserve(topic) == []
    started = time.monotonic()
    assert queue.reserve(topic, wait=0.3) == []
    assert time.monotonic() - started >= 0.29, "reserve must wait on an empty topic"
    queue.put_many(topic, [Job(payload=i) for i in range(5)])
    first = queue.reserve(topic, count=3)
    second = queue.reserve(topic, count=3)
    assert len(first) == 3
    assert len(second) == 2
    assert len({r.id for r in first + second}) == 5
    assert queue.reserve(topic, count=3) == []


def test_reserve_does_not_hand_out_delayed_jobs(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="later", delay=FAR)
    assert queue.reserve(topic, count=10, wait=0.2) == []
    assert state_of(queue, topic, "later") is State.DELAYED


# -- ack -------------------------------------------------------------------------------


def test_ack_removes_the_job(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="a")
    queue.put(topic, None, id="b", delay=FAR)
    res = reserve_one(queue, topic)
    assert queue.ack(res) is None
    assert queue.get(topic, "a") is None
    assert counts(queue, topic) == zero(delayed=1)
    with pytest.raises(LeaseLost):
        queue.ack(res)


def test_ack_many_returns_only_lost_ids(queue: Queue, topic: str) -> None:
    queue.put_many(topic, [Job(payload=i, id=f"j{i}") for i in range(4)])
    jobs = queue.reserve(topic, count=4)
    assert len(jobs) == 4
    queue.ack(jobs[1])
    assert queue.delete(topic, jobs[2].id)
    lost = queue.ack_many(jobs)
    assert sorted(lost) == sorted([jobs[1].id, jobs[2].id])
    assert queue.stats(topic)["total"] == 0
    assert queue.ack_many([]) == []


def test_ack_many_across_topics_with_one_id(queue: Queue, topic: str) -> None:
    other = topic + "-b"
    queue.put(topic, 1, id="same")
    queue.put(other, 2, id="same")
    [mine] = queue.reserve(topic)
    [theirs] = queue.reserve(other)
    assert queue.ack_many([mine, theirs, mine]) == ["same"]  # the lease given twice
    assert queue.get(topic, "same") is None and queue.get(other, "same") is None


# -- nack ------------------------------------------------------------------------------


def test_nack_with_delay_delays_then_due_again(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="n")
    res = reserve_one(queue, topic)
    t0 = now_ms()
    assert queue.nack(res, delay=0.5) is State.DELAYED
    t1 = now_ms()
    info = queue.get(topic, "n")
    assert info is not None
    assert (info.state, info.attempts, info.deadline) == (State.DELAYED, 1, None)
    assert t0 + 500 <= info.due_at <= t1 + 500
    assert counts(queue, topic) == zero(delayed=1)
    assert queue.reserve(topic) == []
    again = reserve_one(queue, topic, wait=5)
    assert now_ms() >= info.due_at
    assert (again.id, again.attempts, again.due_at) == ("n", 2, info.due_at)
    assert again.lease != res.lease


def test_nack_with_zero_delay_is_ready(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="n")
    assert queue.nack(reserve_one(queue, topic), delay=0) is State.READY
    assert state_of(queue, topic, "n") is State.READY
    assert reserve_one(queue, topic).attempts == 2


def test_nack_default_backoff(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="n")
    res = reserve_one(queue, topic)
    t0 = now_ms()
    assert queue.nack(res) is State.DELAYED
    t1 = now_ms()
    info = queue.get(topic, "n")
    assert info is not None
    assert info.state is State.DELAYED
    # first retry: nominal 1 s, never sooner than half of it
    assert t0 + 500 <= info.due_at <= t1 + 1000


def test_nack_stores_the_error(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="n")
    queue.nack(reserve_one(queue, topic), delay=0, error="timeout talking to bank")
    assert queue.get(topic, "n").last_error == "timeout talking to bank"  # type: ignore[union-attr]
    queue.nack(reserve_one(queue, topic), delay=0, error=ValueError("bad value"))
    assert queue.get(topic, "n").last_error == "bad value"  # type: ignore[union-attr]


def test_nack_goes_dead_when_attempts_are_used_up(queue: Queue, topic: str) -> None:
    queue.put(topic, {"k": 1}, id="n", max_attempts=2)
    assert queue.nack(reserve_one(queue, topic), delay=0, error="e1") is State.READY
    res = reserve_one(queue, topic)
    assert res.attempts == 2
    assert queue.nack(res, delay=0, error="e2") is State.DEAD
    info = queue.get(topic, "n")
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (State.DEAD, 2, "e2")
    assert counts(queue, topic) == zero(dead=1)
    assert [d.id for d in queue.dead(topic)] == ["n"]
    assert queue.reserve(topic, wait=0.2) == []


# -- lease expiry ----------------------------------------------------------------------


def test_lease_expiry_makes_the_job_ready_again(queue: Queue, topic: str) -> None:
    queue.put(topic, "p", id="e", ttr=0.05)
    first = reserve_one(queue, topic)
    sleep_past(first.deadline)
    second = reserve_one(queue, topic)
    assert (second.id, second.attempts, second.payload) == ("e", 2, "p")
    assert second.lease != first.lease
    assert second.deadline - round(second.ttr * 1000) >= first.deadline


def test_lease_expiry_is_visible_to_get_and_stats(queue: Queue, topic: str) -> None:
    """After the deadline the job is ready again (docs/contract.md §1), also for an observer
    that does not reserve."""
    queue.put(topic, "p", id="e", ttr=0.05)
    first = reserve_one(queue, topic)
    sleep_past(first.deadline)
    info = queue.get(topic, "e")
    assert info is not None
    assert (info.state, info.attempts) == (State.READY, 1)
    assert counts(queue, topic) == zero(ready=1)


def test_lease_expiry_at_max_attempts_is_dead(queue: Queue, topic: str) -> None:
    queue.put(topic, "p", id="e", ttr=0.05, max_attempts=2)
    queue.nack(reserve_one(queue, topic), delay=0)
    last = reserve_one(queue, topic)
    assert last.attempts == 2
    sleep_past(last.deadline)
    assert queue.reserve(topic, wait=0.1) == []
    info = queue.get(topic, "e")
    assert info is not None
    assert (info.state, info.attempts) == (State.DEAD, 2)
    assert info.last_error is not None
    assert "lease" in info.last_error.lower()
    assert counts(queue, topic) == zero(dead=1)
    assert [d.id for d in queue.dead(topic)] == ["e"]


def _expired(q: Queue, topic: str, max_attempts: int) -> Reservation:
    """A job whose only lease has expired, with no reserve since to reclaim it."""
    q.put(topic, "p", id="e", ttr=0.05, max_attempts=max_attempts)
    held = reserve_one(q, topic)
    sleep_past(held.deadline)
    return held


def test_expired_lease_is_reschedulable_like_any_ready_job(queue: Queue, topic: str) -> None:
    """Lease expiry is a transition (reserved -> ready); once past the deadline
    the job must act as ready for every operation, not only for reads."""
    _expired(queue, topic, max_attempts=5)
    assert state_of(queue, topic, "e") is State.READY
    assert queue.reschedule(topic, "e", delay=FAR) is True
    info = queue.get(topic, "e")
    assert info is not None
    assert (info.state, info.attempts) == (State.DELAYED, 1)


def test_expired_lease_can_be_replaced(queue: Queue, topic: str) -> None:
    _expired(queue, topic, max_attempts=5)
    assert state_of(queue, topic, "e") is State.READY
    r = queue.put(topic, "new", id="e", replace=True)
    assert r.created is True, "replace refused a job that is no longer reserved"
    info = queue.get(topic, "e")
    assert info is not None
    assert (info.state, info.attempts, info.payload) == (State.READY, 0, "new")


def test_expired_last_attempt_is_listed_and_requeued_as_dead(queue: Queue, topic: str) -> None:
    _expired(queue, topic, max_attempts=1)
    info = queue.get(topic, "e")
    assert info is not None
    assert info.state is State.DEAD
    assert "lease" in (info.last_error or ""), "a dead job should say why it died"
    assert counts(queue, topic) == zero(dead=1)
    assert [d.id for d in queue.dead(topic)] == ["e"], "stats says dead, dead() lists nothing"
    assert queue.requeue(topic, ids=["e"]) == 1
    info = queue.get(topic, "e")
    assert info is not None
    assert (info.state, info.attempts) == (State.READY, 0)


# -- touch -----------------------------------------------------------------------------


def test_touch_pushes_the_deadline(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="t", ttr=0.5)
    res = reserve_one(queue, topic)
    t0 = now_ms()
    deadline = queue.touch(res, ttr=5)
    t1 = now_ms()
    assert t0 + 5000 <= deadline <= t1 + 5000
    assert queue.get(topic, "t").deadline == deadline  # type: ignore[union-attr]
    sleep_past(res.deadline, margin_ms=150)
    assert queue.reserve(topic, wait=0.1) == [], "redelivered past the old deadline"
    info = queue.get(topic, "t")
    assert info is not None
    assert (info.state, info.attempts) == (State.RESERVED, 1)
    queue.ack(res)
    assert queue.get(topic, "t") is None


def test_touch_default_uses_the_job_ttr(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="t", ttr=40)
    res = reserve_one(queue, topic, ttr=1)
    t0 = now_ms()
    deadline = queue.touch(res)
    t1 = now_ms()
    assert t0 + 40_000 <= deadline <= t1 + 40_000


# -- bury ------------------------------------------------------------------------------


def test_bury_moves_to_dead(queue: Queue, topic: str) -> None:
    queue.put(topic, {"bad": True}, id="b", max_attempts=5)
    res = reserve_one(queue, topic)
    assert queue.bury(res, error="bad payload") is None
    info = queue.get(topic, "b")
    assert info is not None
    assert (info.state, info.attempts, info.last_error, info.deadline) == (
        State.DEAD,
        1,
        "bad payload",
        None,
    )
    assert counts(queue, topic) == zero(dead=1)
    assert queue.reserve(topic, wait=0.1) == []
    with pytest.raises(LeaseLost):
        queue.ack(res)


# -- delete ----------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["delayed", "ready", "reserved", "dead"])
def test_delete_in_any_state(queue: Queue, topic: str, state: str) -> None:
    res = make_job(queue, topic, state, "d")
    queue.put(topic, None, id="other", delay=FAR)
    assert queue.delete(topic, "d") is True
    assert queue.get(topic, "d") is None
    assert counts(queue, topic) == zero(delayed=1)
    assert queue.delete(topic, "d") is False
    if res is not None:
        with pytest.raises(LeaseLost):
            queue.ack(res)
    assert queue.reserve(topic) == []


def test_delete_missing_is_false(queue: Queue, topic: str) -> None:
    assert queue.delete(topic, "never") is False
    queue.put(topic, None, id="x")
    assert queue.delete(topic + "-other", "x") is False
    assert queue.get(topic, "x") is not None


# -- reschedule ------------------------------------------------------------------------


def test_reschedule_delayed_to_now_and_ready_to_later(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="d", delay=FAR)
    t0 = now_ms()
    assert queue.reschedule(topic, "d", delay=0) is True
    t1 = now_ms()
    info = queue.get(topic, "d")
    assert info is not None
    assert info.state is State.READY
    assert t0 <= info.due_at <= t1
    t0 = now_ms()
    assert queue.reschedule(topic, "d", delay=0.5) is True
    t1 = now_ms()
    info = queue.get(topic, "d")
    assert info is not None
    assert info.state is State.DELAYED
    assert t0 + 500 <= info.due_at <= t1 + 500
    assert queue.reserve(topic) == []
    res = reserve_one(queue, topic, wait=5)
    assert now_ms() >= info.due_at
    assert (res.id, res.due_at) == ("d", info.due_at)


@pytest.mark.parametrize("form", ["datetime", "epoch"])
def test_reschedule_run_at(queue: Queue, topic: str, form: str) -> None:
    queue.put(topic, None, id="d")
    due = (now_ms() // 1000 + 120) * 1000 + 250
    run_at: Any = datetime.fromtimestamp(due / 1000, UTC) if form == "datetime" else due / 1000
    assert queue.reschedule(topic, "d", run_at=run_at) is True
    info = queue.get(topic, "d")
    assert info is not None
    assert (info.state, info.due_at) == (State.DELAYED, due)
    t0 = now_ms()
    past: Any = datetime(2000, 1, 1, tzinfo=UTC) if form == "datetime" else 1.0
    assert queue.reschedule(topic, "d", run_at=past) is True
    t1 = now_ms()
    info = queue.get(topic, "d")
    assert info is not None
    assert info.state is State.READY
    assert t0 <= info.due_at <= t1


@pytest.mark.parametrize("state", ["reserved", "dead", "missing"])
def test_reschedule_refuses_reserved_dead_and_missing(queue: Queue, topic: str, state: str) -> None:
    if state != "missing":
        make_job(queue, topic, state, "x")
    before = queue.get(topic, "x")
    tail = EventTail(queue, topic)
    assert queue.reschedule(topic, "x", delay=0) is False
    assert queue.reschedule(topic, "x", run_at=time.time() + 60) is False
    assert queue.get(topic, "x") == before
    assert tail.new() == []


def test_reschedule_takes_exactly_one_of_delay_and_run_at(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="x", delay=FAR)
    with pytest.raises(InvalidInput):
        queue.reschedule(topic, "x", delay=1, run_at=time.time())
    with pytest.raises(InvalidInput):
        queue.reschedule(topic, "x")
    assert state_of(queue, topic, "x") is State.DELAYED


# -- requeue ---------------------------------------------------------------------------


def _dead_jobs(q: Queue, topic: str, ids: list[str]) -> None:
    for job_id in ids:
        make_job(q, topic, "dead", job_id, max_attempts=3)


def test_requeue_all_dead(queue: Queue, topic: str) -> None:
    _dead_jobs(queue, topic, ["a", "b"])
    queue.put(topic, None, id="live", delay=FAR)
    t0 = now_ms()
    assert queue.requeue(topic) == 2
    t1 = now_ms()
    for job_id in ("a", "b"):
        info = queue.get(topic, job_id)
        assert info is not None
        assert (info.state, info.attempts) == (State.READY, 0)
        assert t0 <= info.due_at <= t1
    assert counts(queue, topic) == zero(ready=2, delayed=1)
    assert queue.requeue(topic) == 0
    got = {r.id: r.attempts for r in queue.reserve(topic, count=5)}
    assert got == {"a": 1, "b": 1}


def test_requeue_by_ids(queue: Queue, topic: str) -> None:
    _dead_jobs(queue, topic, ["a", "b", "c"])
    queue.put(topic, None, id="live", delay=FAR)
    assert queue.requeue(topic, ids=["b", "live", "missing", "b"]) == 1
    assert state_of(queue, topic, "b") is State.READY
    assert state_of(queue, topic, "live") is State.DELAYED
    assert counts(queue, topic) == zero(dead=2, ready=1, delayed=1)
    assert queue.requeue(topic, ids=[]) == 0
    assert queue.requeue(topic, ids=["a", "c"]) == 2
    assert counts(queue, topic) == zero(ready=3, delayed=1)


# -- purge -----------------------------------------------------------------------------


def test_purge_deletes_every_job_of_the_topic(queue: Queue, topic: str) -> None:
    other = topic + "-other"
    queue.put(other, None, id="keep")
    queue.put(topic, None, id="delayed", delay=FAR)
    make_job(queue, topic, "dead", "dead")
    res = make_job(queue, topic, "reserved", "reserved")
    queue.put(topic, None, id="ready")
    queue.put(topic, None, id="remembered", unique_for=FAR)
    assert queue.delete(topic, "remembered")
    assert queue.purge(topic) == 4
    assert counts(queue, topic) == zero()
    assert queue.stats(topic)["total"] == 0
    for job_id in ("delayed", "dead", "reserved", "ready"):
        assert queue.get(topic, job_id) is None
    assert res is not None
    with pytest.raises(LeaseLost):
        queue.ack(res)
    assert queue.get(other, "keep") is not None
    assert queue.put(topic, None, id="remembered").created is True, "purge forgets ids"
    assert queue.purge(topic + "-empty") == 0


# -- pause / resume --------------------------------------------------------------------


def test_paused_topic_accepts_puts_and_hands_out_nothing(queue: Queue, topic: str) -> None:
    other = topic + "-other"
    queue.put(topic, "before", id="before")
    queue.put(other, "o", id="o")
    queue.pause(topic)
    assert queue.stats(topic)["paused"] is True
    assert queue.stats(other)["paused"] is False
    r = queue.put(topic, "during", id="during")
    assert r.created is True
    assert counts(queue, topic) == zero(ready=2)
    started = time.monotonic()
    assert queue.reserve(topic, count=5, wait=0.4) == []
    assert time.monotonic() - started >= 0.39, "reserve on a paused topic waits"
    assert state_of(queue, topic, "before") is State.READY
    assert reserve_one(queue, other).id == "o", "pause is per topic"
    queue.resume(topic)
    assert queue.stats(topic)["paused"] is False
    assert {j.id for j in queue.reserve(topic, count=5)} == {"before", "during"}


def test_resume_wakes_a_waiting_consumer(store_url: str, topic: str) -> None:
    with chronoq.connect(store_url) as producer, chronoq.connect(store_url) as consumer:
        producer.pause(topic)
        producer.put(topic, "x", id="x")
        waiter = Background(lambda: consumer.reserve(topic, wait=10))
        time.sleep(0.3)
        assert waiter.thread.is_alive(), "reserve returned from a paused topic"
        resumed = time.monotonic()
        producer.resume(topic)
        got = waiter.join()
        assert [j.id for j in got] == ["x"]
        assert waiter.done_at - resumed < 1.5, "the consumer was not woken by resume"


def test_pause_keeps_delayed_jobs_and_their_time(queue: Queue, topic: str) -> None:
    r = queue.put(topic, None, id="d", delay=0.1)
    queue.pause(topic)
    sleep_past(r.due_at)
    assert queue.reserve(topic, wait=0.1) == []
    assert state_of(queue, topic, "d") is State.READY
    queue.resume(topic)
    assert reserve_one(queue, topic).due_at == r.due_at


# -- stats, topics, dead, get ----------------------------------------------------------


def test_stats_counts_by_state(queue: Queue, topic: str) -> None:
    assert queue.stats(topic) | {"next_due_at": None} == {
        **zero(),
        "total": 0,
        "paused": False,
        "next_due_at": None,
    }
    queue.put_many(topic, [Job(id=f"d{i}", delay=FAR) for i in range(3)])
    queue.put_many(topic, [Job(id=f"r{i}") for i in range(4)])
    jobs = queue.reserve(topic, count=2)
    queue.bury(jobs[0])
    stats = queue.stats(topic)
    assert {k: stats[k] for k in ("delayed", "ready", "reserved", "dead", "total")} == {
        "delayed": 3,
        "ready": 2,
        "reserved": 1,
        "dead": 1,
        "total": 7,
    }
    assert stats["paused"] is False


def test_topics_lists_used_topics_sorted(queue: Queue, topic: str) -> None:
    names = [topic + "-b", topic + "-a", topic + "-c"]
    queue.put(names[0], None)
    queue.put(names[1], None)
    queue.pause(names[2])
    listed = queue.topics()
    assert listed == sorted(listed)
    assert set(names) <= set(listed)


def test_dead_lists_oldest_death_first_with_limit(queue: Queue, topic: str) -> None:
    queue.put_many(topic, [Job(payload=n, id=name) for n, name in enumerate("abc")])
    by_id = {r.id: r for r in queue.reserve(topic, count=3)}
    for job_id in ("c", "a", "b"):
        queue.bury(by_id[job_id], error=f"err {job_id}")
        time.sleep(0.01)
    dead = queue.dead(topic)
    assert [d.id for d in dead] == ["c", "a", "b"]
    assert all(d.state is State.DEAD for d in dead)
    assert [d.last_error for d in dead] == ["err c", "err a", "err b"]
    assert [d.id for d in queue.dead(topic, limit=2)] == ["c", "a"]
    assert queue.dead(topic + "-none") == []


@pytest.mark.parametrize("state", ["delayed", "ready", "reserved", "dead"])
def test_get_reports_each_state(queue: Queue, topic: str, state: str) -> None:
    res = make_job(queue, topic, state, "g")
    info = queue.get(topic, "g")
    assert isinstance(info, JobInfo)
    assert info.state is State(state)
    assert info.payload == {"s": state}
    assert (info.deadline is not None) == (state == "reserved")
    if res is not None:
        assert info.deadline == res.deadline
        queue.ack(res)
        assert queue.get(topic, "g") is None
    assert queue.get(topic, "never") is None


PAYLOADS = [
    None,
    True,
    False,
    0,
    -1,
    2**62,
    10**30,
    1.5,
    -0.1,
    1e300,
    "",
    "text",
    "ünïcødé ☃ \U0001f600 \x00 \n\t\"'\\",
    [],
    {},
    [1, "two", 3.0, None, [True, {"k": []}]],
    {"nested": {"list": [1, 2, {"deep": "x"}], "n": None}, "é": 1},
    b"",
    b"\x00",
    b"\x00\x01\xff{}",
    b'{"looks": "like json"}',
    bytes(range(256)) * 40,
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_payload_round_trips_exactly(queue: Queue, topic: str, payload: Any) -> None:
    queue.put(topic, payload, id="p")
    info = queue.get(topic, "p")
    assert info is not None
    assert strict_equal(info.payload, payload), info.payload
    res = reserve_one(queue, topic)
    assert strict_equal(res.payload, payload), res.payload
    queue.put_many(topic, [Job(payload=payload, id="q")])
    assert strict_equal(queue.get(topic, "q").payload, payload)  # type: ignore[union-attr]


def test_bytearray_payload_comes_back_as_bytes(queue: Queue, topic: str) -> None:
    queue.put(topic, bytearray(b"\x01\x02"), id="b")
    assert strict_equal(queue.get(topic, "b").payload, b"\x01\x02")  # type: ignore[union-attr]


# -- lease fencing ---------------------------------------------------------------------


def _snapshot(q: Queue, topic: str, job_id: str) -> tuple[Any, ...]:
    return q.get(topic, job_id), q.stats(topic)


@pytest.mark.parametrize("op", LEASE_OPS)
@pytest.mark.parametrize("form", ["reservation", "triple"])
def test_stale_lease_after_reserve_by_another(
    store_url: str, topic: str, op: str, form: str
) -> None:
    with chronoq.connect(store_url) as a, chronoq.connect(store_url) as b:
        a.put(topic, "x", id="j", ttr=0.05)
        stale = reserve_one(a, topic)
        sleep_past(stale.deadline)
        live = reserve_one(b, topic, ttr=30)
        assert (live.id, live.attempts) == ("j", 2)
        before = _snapshot(a, topic, "j")
        tail = EventTail(a, topic)
        args = (stale,) if form == "reservation" else (topic, "j", stale.lease)
        with pytest.raises(LeaseLost):
            lease_call(a, op, *args)
        assert _snapshot(a, topic, "j") == before
        assert tail.new() == []
        b.ack(live)
        assert a.get(topic, "j") is None


@pytest.mark.parametrize("op", LEASE_OPS)
def test_stale_lease_expired_not_yet_reserved_again(queue: Queue, topic: str, op: str) -> None:
    queue.put(topic, "x", id="j", ttr=0.05, max_attempts=1)
    stale = reserve_one(queue, topic)
    sleep_past(stale.deadline)
    before = _snapshot(queue, topic, "j")
    tail = EventTail(queue, topic)
    with pytest.raises(LeaseLost):
        lease_call(queue, op, stale)
    assert _snapshot(queue, topic, "j") == before
    assert tail.new() == []
    # the expiry itself still happens as if the call had not been made
    assert queue.reserve(topic) == []
    info = queue.get(topic, "j")
    assert info is not None
    assert (info.state, info.attempts) == (State.DEAD, 1)
    assert "lease" in (info.last_error or "")


@pytest.mark.parametrize("op", LEASE_OPS)
@pytest.mark.parametrize("gone_by", ["ack", "delete", "purge", "ack-and-put-again"])
def test_stale_lease_of_a_gone_job(queue: Queue, topic: str, op: str, gone_by: str) -> None:
    queue.put(topic, "x", id="j")
    stale = reserve_one(queue, topic)
    if gone_by.startswith("ack"):
        queue.ack(stale)
    elif gone_by == "delete":
        queue.delete(topic, "j")
    else:
        queue.purge(topic)
    live = None
    if gone_by == "ack-and-put-again":
        queue.put(topic, "y", id="j")
        live = reserve_one(queue, topic)
    before = _snapshot(queue, topic, "j")
    tail = EventTail(queue, topic)
    with pytest.raises(LeaseLost):
        lease_call(queue, op, topic, "j", stale.lease)
    with pytest.raises(LeaseLost):
        lease_call(queue, op, stale)
    assert _snapshot(queue, topic, "j") == before
    assert tail.new() == []
    if live is not None:
        queue.ack(live)


@pytest.mark.parametrize("op", LEASE_OPS)
def test_wrong_lease_token_on_a_live_reservation(queue: Queue, topic: str, op: str) -> None:
    queue.put(topic, "x", id="j")
    live = reserve_one(queue, topic)
    before = _snapshot(queue, topic, "j")
    with pytest.raises(LeaseLost):
        lease_call(queue, op, topic, "j", "0123456789abcdef")
    with pytest.raises(LeaseLost):
        lease_call(queue, op, topic + "-other", "j", live.lease)
    assert _snapshot(queue, topic, "j") == before
    queue.ack(live)


def test_lease_calls_take_the_topic_id_lease_triple(queue: Queue, topic: str) -> None:
    queue.put_many(topic, [Job(payload=i, id=f"j{i}", ttr=1) for i in range(4)])
    res = {r.id: r for r in queue.reserve(topic, count=4)}
    t0 = now_ms()
    deadline = queue.touch(topic, "j0", res["j0"].lease, ttr=20)
    assert deadline >= t0 + 20_000
    assert queue.get(topic, "j0").deadline == deadline  # type: ignore[union-attr]
    queue.ack(topic, "j0", res["j0"].lease)
    assert queue.get(topic, "j0") is None
    assert queue.nack(topic, "j1", res["j1"].lease, delay=FAR, error="e") is State.DELAYED
    assert state_of(queue, topic, "j1") is State.DELAYED
    queue.bury(topic, "j2", res["j2"].lease, error="b")
    assert state_of(queue, topic, "j2") is State.DEAD
    with pytest.raises(InvalidInput):
        queue.ack(topic, "j3")  # type: ignore[call-arg]
    assert state_of(queue, topic, "j3") is State.RESERVED


# -- event log -------------------------------------------------------------------------


def _check(
    event: Event,
    kind: str,
    job_id: str,
    attempt: int,
    due_at: int,
    priority: int = 0,
    error: str | None = None,
) -> None:
    assert event.event is EventKind(kind), event
    assert (event.id, event.attempt, event.due_at, event.priority) == (
        job_id,
        attempt,
        due_at,
        priority,
    ), event
    if error is not None:
        assert event.error == error, event


def test_events_put_reserve_ack(queue: Queue, topic: str) -> None:
    tail = EventTail(queue, topic)
    t0 = now_ms()
    put = queue.put(topic, None, id="a", priority=4, delay=0.05)
    [e] = tail.new()
    _check(e, "put", "a", 0, put.due_at, 4)
    assert e.topic == topic
    assert t0 <= e.ts_ms <= now_ms()
    assert queue.put(topic, None, id="a").created is False
    assert tail.new() == [], "a put that was not created appends nothing"
    res = reserve_one(queue, topic, wait=5)
    [e] = tail.new()
    _check(e, "reserve", "a", 1, put.due_at, 4)
    assert e.lag_ms is not None
    assert e.lag_ms >= 0
    assert e.lag_ms == e.ts_ms - put.due_at
    assert e.ts_ms == res.deadline - round(res.ttr * 1000)
    queue.ack(res)
    [e] = tail.new()
    _check(e, "ack", "a", 1, put.due_at, 4)


def test_events_put_many_and_reserve_many(queue: Queue, topic: str) -> None:
    tail = EventTail(queue, topic)
    results = queue.put_many(
        topic, [Job(id="x", priority=1), Job(id="y"), Job(id="x"), Job(id="z", delay=FAR)]
    )
    due = {r.id: r.due_at for r in results}
    puts = tail.kinds()
    assert sorted(puts) == [("put", "x"), ("put", "y"), ("put", "z")]
    assert per_shard(queue, [i for _, i in puts]) == per_shard(queue, ["x", "y", "z"])
    jobs = queue.reserve(topic, count=5)
    events = tail.new()
    assert sorted((e.event.value, e.id) for e in events) == sorted(("reserve", j.id) for j in jobs)
    assert per_shard(queue, [e.id for e in events]) == per_shard(queue, [j.id for j in jobs])
    for e in events:
        assert e.lag_ms is not None
        assert e.lag_ms >= 0
        _check(e, "reserve", e.id, 1, due[e.id], 1 if e.id == "x" else 0)
    assert queue.ack_many([*jobs, jobs[0]]) == [jobs[0].id]
    acked = tail.kinds()
    assert sorted(acked) == sorted(("ack", j.id) for j in jobs)
    assert per_shard(queue, [i for _, i in acked]) == per_shard(queue, [j.id for j in jobs])


def test_events_nack_and_dead(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="n", max_attempts=2, priority=-3)
    tail = EventTail(queue, topic)
    res = reserve_one(queue, topic)
    tail.new()
    queue.nack(res, delay=0.05, error="first")
    [e] = tail.new()
    info = queue.get(topic, "n")
    assert info is not None
    _check(e, "nack", "n", 1, info.due_at, -3, error="first")
    res = reserve_one(queue, topic, wait=5)
    [e] = tail.new()
    _check(e, "reserve", "n", 2, info.due_at, -3)
    assert queue.nack(res, delay=0, error="second") is State.DEAD
    [e] = tail.new()
    _check(e, "dead", "n", 2, info.due_at, -3, error="second")


def test_events_expire_and_dead_by_expiry(queue: Queue, topic: str) -> None:
    put = queue.put(topic, None, id="e", ttr=0.05, max_attempts=2)
    res = reserve_one(queue, topic)
    tail = EventTail(queue, topic)
    sleep_past(res.deadline)
    again = reserve_one(queue, topic)
    expire, reserve = tail.new()
    _check(expire, "expire", "e", 1, put.due_at)
    assert expire.ts_ms >= res.deadline
    _check(reserve, "reserve", "e", 2, put.due_at)
    sleep_past(again.deadline)
    assert queue.reserve(topic) == []
    [dead] = tail.new()
    _check(dead, "dead", "e", 2, put.due_at)
    assert "lease" in (dead.error or "")


def test_events_touch_bury_requeue(queue: Queue, topic: str) -> None:
    put = queue.put(topic, None, id="t", priority=2)
    res = reserve_one(queue, topic)
    tail = EventTail(queue, topic)
    queue.touch(res, ttr=10)
    [e] = tail.new()
    _check(e, "touch", "t", 1, put.due_at, 2)
    queue.bury(res, error="nope")
    [e] = tail.new()
    _check(e, "bury", "t", 1, put.due_at, 2, error="nope")
    assert queue.requeue(topic) == 1
    [e] = tail.new()
    info = queue.get(topic, "t")
    assert info is not None
    _check(e, "requeue", "t", 0, info.due_at, 2)


def test_events_reschedule_and_delete(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="r", delay=FAR, priority=7)
    tail = EventTail(queue, topic)
    assert queue.reschedule(topic, "r", delay=30)
    [e] = tail.new()
    info = queue.get(topic, "r")
    assert info is not None
    _check(e, "reschedule", "r", 0, info.due_at, 7)
    assert queue.delete(topic, "r")
    [e] = tail.new()
    _check(e, "delete", "r", 0, info.due_at, 7)
    assert queue.delete(topic, "r") is False
    assert queue.reschedule(topic, "r", delay=1) is False
    assert tail.new() == []


def test_events_purge_one_delete_per_job(queue: Queue, topic: str) -> None:
    queue.put_many(topic, [Job(id="a"), Job(id="b", delay=FAR), Job(id="c")])
    reserve_one(queue, topic)
    tail = EventTail(queue, topic)
    assert queue.purge(topic) == 3
    events = tail.new()
    assert sorted((e.event.value, e.id) for e in events) == [
        ("delete", "a"),
        ("delete", "b"),
        ("delete", "c"),
    ]


def test_pause_resume_and_reads_append_no_job_event(queue: Queue, topic: str) -> None:
    queue.put(topic, None, id="x")
    tail = EventTail(queue, topic)
    queue.pause(topic)
    assert queue.reserve(topic) == []
    queue.resume(topic)
    queue.get(topic, "x")
    queue.stats(topic)
    queue.dead(topic)
    queue.topics()
    assert queue.requeue(topic) == 0
    assert tail.new() == []


def test_event_cursor_resumes_without_duplicates_or_gaps(queue: Queue, topic: str) -> None:
    other = topic + "-other"
    queue.put_many(topic, [Job(id=f"a{i:02d}") for i in range(25)])
    queue.put(other, None, id="noise")
    everything = queue.events(topic=topic, limit=100_000).events
    ids = [e.id for e in everything]
    assert per_shard(queue, ids) == per_shard(queue, [f"a{i:02d}" for i in range(25)])
    assert len(ids) == 25
    pages: list[Event] = []
    cursor = None
    for _ in range(10):
        page = queue.events(topic=topic, cursor=cursor, limit=7)
        assert len(page.events) <= 7
        pages.extend(page.events)
        if not page.events:
            assert page.cursor == cursor
            break
        cursor = page.cursor
    assert pages == everything
    # seq numbers a shard's events (docs/contract.md §7): increasing, each once, shard by shard
    for shard_ids in per_shard(queue, [e.id for e in pages]).values():
        seqs = [e.seq for e in pages if e.id in shard_ids]
        assert seqs == sorted(seqs)
        assert len(set(seqs)) == len(seqs)
    # more events later: the saved cursor yields exactly the new ones
    queue.put(topic, None, id="late")
    queue.put(other, None, id="noise2")
    page = queue.events(topic=topic, cursor=cursor)
    assert [e.id for e in page.events] == ["late"]
    assert queue.events(topic=topic, cursor=page.cursor).events == []
    # without a topic, both topics' events are there
    all_ids = {(e.topic, e.id) for e in queue.events(limit=100_000).events}
    assert {(topic, "late"), (other, "noise"), (other, "noise2")} <= all_ids
