"""``chronoq.testing.run_due`` on every backend: what runs by ``until`` and in
which order, jobs put and retried by handlers, the worker's outcomes, and the
store left as it would be at ``until``."""

from __future__ import annotations

import time
from typing import Any

import pytest

import chronoq
from chronoq.errors import InvalidInput
from chronoq.job import Reservation
from chronoq.states import State
from chronoq.testing import RunError, dead, delayed, ready, run_due

H = 3600.0  # seconds
MINUTE_MS = 60_000  # how long a run may take, at most, in the bounds below


def recorder(into: list[Any]) -> Any:
    def handler(job: Reservation) -> None:
        into.append(job.payload)

    return handler


def test_jobs_due_by_until_run_in_due_order_and_later_ones_do_not(
    queue: chronoq.Queue, topic: str
) -> None:
    for name, hours in [("third", 3), ("first", 1), ("fifth", 5), ("second", 2)]:
        queue.put(topic, name, delay=hours * H)
    ran: list[str] = []
    report = run_due(queue, {topic: recorder(ran)}, until=3 * H)  # 3 h: inclusive
    assert ran == ["first", "second", "third"]
    assert report.outcomes == ["ack", "ack", "ack"]
    assert [job.payload for job in delayed(queue, topic)] == ["fifth"]


def test_without_until_only_due_jobs_run_and_no_due_time_moves(
    queue: chronoq.Queue, topic: str
) -> None:
    queue.put(topic, "now")
    later = queue.put(topic, "later", delay=H)
    ran: list[str] = []
    report = run_due(queue, {topic: recorder(ran)})
    assert ran == ["now"] and report.skipped == 0
    info = queue.get(topic, later.id)
    assert info is not None and info.due_at == later.due_at


def test_jobs_left_are_due_sooner_by_the_skip_in_every_topic(
    queue: chronoq.Queue, topic: str
) -> None:
    other = f"{topic}-other"
    late = queue.put(topic, "late", delay=5 * H)
    fell_due = queue.put(other, "no handler", delay=H)
    elsewhere = queue.put(other, "later", delay=4 * H)
    report = run_due(queue, {topic: recorder([])}, until=2 * H)
    skip_ms = round(report.skipped * 1000)
    assert 2 * H * 1000 - MINUTE_MS < skip_ms <= 2 * H * 1000
    for put in (late, elsewhere):
        info = queue.get(topic if put is late else other, put.id)
        assert info is not None and info.state is State.DELAYED
        assert info.due_at == put.due_at - skip_ms  # as the store would show it at until
    assert [job.id for job in ready(queue, other)] == [fell_due.id]


def test_jobs_put_by_handlers_run_when_they_fall_due_on_the_run_clock(
    queue: chronoq.Queue, topic: str
) -> None:
    ran: list[str] = []

    def handler(job: Reservation) -> None:
        ran.append(job.payload)
        if job.payload == "parent":
            queue.put(topic, "child", delay=0.5 * H)  # 1.5 h on the run's clock
            queue.put(topic, "grandchild", delay=3 * H)  # 4 h: after until
            queue.put(topic, "at once")

    queue.put(topic, "parent", delay=H)
    queue.put(topic, "two hours", delay=2 * H)
    report = run_due(queue, {topic: handler}, until=3 * H)
    assert ran == ["parent", "at once", "child", "two hours"]
    parent, at_once, child = report.runs[:3]
    # the run's clock stands still while a handler runs
    assert at_once.due_at == parent.due_at
    assert child.due_at == parent.due_at + 0.5 * H * 1000
    assert [job.payload for job in delayed(queue, topic)] == ["grandchild"]


def test_a_job_put_at_once_by_the_last_job_of_the_window_runs(
    queue: chronoq.Queue, topic: str
) -> None:
    ran: list[str] = []

    def handler(job: Reservation) -> None:
        ran.append(job.payload)
        if job.payload == "last":
            queue.put(topic, "follow-up")

    queue.put(topic, "last", delay=H)
    assert run_due(queue, {topic: handler}, until=H).outcomes == ["ack", "ack"]
    assert ran == ["last", "follow-up"]


def test_a_job_due_after_until_never_runs_even_once_due_on_the_wall_clock(
    queue: chronoq.Queue, topic: str
) -> None:
    ran: list[str] = []

    def handler(job: Reservation) -> None:
        ran.append(job.payload)
        if job.payload == "slow":
            time.sleep(0.3)  # the urgent job falls due on the wall clock meanwhile

    queue.put(topic, "slow")
    queue.put(topic, "next")
    urgent = queue.put(topic, "urgent", delay=0.1, priority=9)  # due after until=0
    assert run_due(queue, {topic: handler}).outcomes == ["ack", "ack"]
    assert ran == ["slow", "next"]
    assert [job.id for job in ready(queue, topic)] == [urgent.id]  # due by now, not run


def test_a_failing_job_is_retried_after_its_backoff_then_dead(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        raise ValueError("boom")

    put = queue.put(topic, "x", delay=H, max_attempts=3)
    report = run_due(queue, {topic: handler}, until=2 * H)  # backoff 1 s, 2 s: within
    assert report.outcomes == ["retry", "retry", "dead"]
    assert [run.attempt for run in report] == [1, 2, 3]
    first, second, third = (run.due_at for run in report)
    assert first == put.due_at
    assert 500 <= second - first <= 1000  # Backoff(): 1 s, then 2 s, less up to half
    assert 1000 <= third - second <= 2000
    assert [str(error) for error in report.errors] == ["boom"] * 3
    [buried] = dead(queue, topic)
    assert buried.id == put.id and buried.last_error == "ValueError: boom"


def test_retry_with_a_delay_and_bury_settle_as_the_worker_does(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        if job.attempts == 1:
            raise chronoq.Retry(delay=600)
        raise chronoq.Bury("no such address")

    put = queue.put(topic, "x")
    first = run_due(queue, {topic: handler}, until=300)
    assert first.outcomes == ["retry"]
    assert [job.id for job in delayed(queue, topic)] == [put.id]
    # 600 s after the retry (counted from the nack, some ms into the first run)
    second = run_due(queue, {topic: handler}, until=310)
    assert second.outcomes == ["bury"] and second.runs[0].attempt == 2
    assert [(job.id, job.last_error) for job in dead(queue, topic)] == [(put.id, "no such address")]


def test_a_backoff_longer_than_the_window_keeps_the_retry_for_later(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        raise RuntimeError("down")

    queue.put(topic, "x")
    slow = chronoq.Backoff(base=H, cap=10 * H)  # retries after 30-60 min, then 1-2 h
    report = run_due(queue, {topic: handler}, until=1000, backoff=slow)
    assert report.outcomes == ["retry"]
    worker = chronoq.Worker(queue, {topic: handler}, backoff={topic: slow})
    assert run_due(queue, worker, until=600).outcomes == []  # the worker's backoff too
    assert run_due(queue, worker, until=H).outcomes == ["retry"]  # 27 to 87 min in


def test_jobs_due_together_run_by_priority_then_put_order(queue: chronoq.Queue, topic: str) -> None:
    at = time.time() + H
    for name, priority in [("a", 0), ("b", 5), ("c", 0), ("d", 5)]:
        queue.put(topic, name, run_at=at, priority=priority)
    ran: list[str] = []
    run_due(queue, {topic: recorder(ran)}, until=H + 60)
    assert ran == ["b", "d", "a", "c"]


def test_of_two_topics_the_job_due_sooner_runs_first(queue: chronoq.Queue, topic: str) -> None:
    other = f"{topic}-b"
    queue.put(topic, "two hours", delay=2 * H)
    queue.put(other, "one hour", delay=H)
    queue.put(topic, "three hours", delay=3 * H)
    ran: list[str] = []
    run_due(queue, {topic: recorder(ran), other: recorder(ran)}, until=3 * H)
    assert ran == ["one hour", "two hours", "three hours"]


def test_handlers_see_the_job_as_due_on_the_wall_clock(queue: chronoq.Queue, topic: str) -> None:
    seen: list[tuple[int, int]] = []

    def handler(job: Reservation) -> None:
        seen.append((job.due_at, time.time_ns() // 1_000_000))

    queue.put(topic, "x", delay=H)
    run_due(queue, {topic: handler}, until=H)
    [(due_at, wall)] = seen
    assert due_at <= wall  # a handler comparing job.due_at with time.time() sees it due


def test_raise_errors_raises_the_first_failure_once_its_job_is_settled(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        if job.payload == "bad":
            raise KeyError("missing")

    queue.put(topic, "fine", delay=H)
    bad = queue.put(topic, "bad", delay=2 * H)
    queue.put(topic, "never reached", delay=3 * H)
    with pytest.raises(KeyError, match="missing"):
        run_due(
            queue,
            {topic: handler},
            until=4 * H,
            raise_errors=True,
            backoff=chronoq.Backoff(base=600),  # its retry stays delayed
        )
    info = queue.get(topic, bad.id)
    assert info is not None and info.attempts == 1 and info.last_error == "KeyError: 'missing'"
    assert sorted(job.payload for job in delayed(queue, topic)) == ["bad", "never reached"]


def test_a_handler_that_puts_a_due_job_on_every_run_is_stopped(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        queue.put(topic, job.payload + 1)

    queue.put(topic, 0)
    with pytest.raises(RunError, match="ran 5 jobs and more are due"):
        run_due(queue, {topic: handler}, max_runs=5)
    assert [job.payload for job in ready(queue, topic)] == [5]


def test_async_handlers_are_awaited(queue: chronoq.Queue, topic: str) -> None:
    ran: list[str] = []

    async def handler(job: Reservation) -> None:
        ran.append(job.payload)

    queue.put(topic, "x", delay=H)
    assert run_due(queue, {topic: handler}, until=H).outcomes == ["ack"]
    assert ran == ["x"]


def test_jobs_of_a_paused_topic_do_not_run(queue: chronoq.Queue, topic: str) -> None:
    put = queue.put(topic, "x")
    queue.pause(topic)
    assert run_due(queue, {topic: recorder([])}, until=H).outcomes == []
    assert [job.id for job in ready(queue, topic)] == [put.id]


def test_a_sqlite_store_in_memory(topic: str) -> None:
    with chronoq.connect("sqlite://:memory:") as q:
        q.put(topic, "b", delay=2 * H)
        q.put(topic, "a", delay=H)
        ran: list[str] = []
        assert run_due(q, {topic: recorder(ran)}, until=2 * H).outcomes == ["ack", "ack"]
        assert ran == ["a", "b"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"until": -1}, "until must be seconds from now"),
        ({"until": "1h"}, "until must be seconds from now"),
        ({"max_runs": 0}, "max_runs must be an integer >= 1"),
        ({"backoff": {"other": chronoq.Backoff()}}, "backoff names topic 'other'"),
        ({"handlers": {}}, "handlers must be a non-empty mapping"),
        ({"handlers": {"t": 42}}, "the handler of topic 't' is not callable"),
    ],
)
def test_bad_arguments_say_what_is_wrong(
    sqlite_url: str, arguments: dict[str, Any], message: str
) -> None:
    with chronoq.connect(sqlite_url) as q:
        handlers = arguments.pop("handlers", {"t": recorder([])})
        with pytest.raises(InvalidInput, match=message):
            run_due(q, handlers, **arguments)


def test_the_queue_must_be_a_queue() -> None:
    with pytest.raises(InvalidInput, match=r"queue must be a chronoq\.Queue"):
        run_due("sqlite://:memory:", {"t": recorder([])})  # type: ignore[arg-type]
