"""``chronoq.testing.run_due`` at its edges, on every backend: the forms of
``until``, the report's sums, jobs parked and given back, handlers that
settle their job themselves, interrupt the run, or are async where a loop
runs already."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import chronoq
from chronoq.job import Reservation
from chronoq.states import State
from chronoq.testing import RunError, delayed, ready, run_due

H = 3600.0


def noop(job: Reservation) -> None:
    pass


@pytest.mark.parametrize(
    "until",
    [
        2 * H,
        timedelta(hours=2),
        datetime.now(UTC) + timedelta(hours=2, minutes=30),
        (datetime.now(UTC) + timedelta(hours=2, minutes=30)).replace(tzinfo=None),  # UTC
    ],
    ids=["seconds", "timedelta", "aware datetime", "naive datetime"],
)
def test_until_in_each_form(queue: chronoq.Queue, topic: str, until: Any) -> None:
    first = queue.put(topic, "first", delay=H)
    queue.put(topic, "second", delay=2 * H)
    queue.put(topic, "third", delay=3 * H)
    report = run_due(queue, {topic: noop}, until=until)
    assert [run.payload for run in report] == ["first", "second"]
    assert report.runs[0].due_at == first.due_at == report.runs[0].at


def test_the_report_sums_up_the_runs(queue: chronoq.Queue, topic: str) -> None:
    def handler(job: Reservation) -> None:
        if job.payload == "fails":
            raise chronoq.Retry(delay=10 * H)
        if job.payload == "buried":
            raise chronoq.Bury("no")

    ok = queue.put(topic, "ok")
    fails = queue.put(topic, "fails")
    buried = queue.put(f"{topic}-b", "buried")
    report = run_due(queue, {topic: handler, f"{topic}-b": handler})
    assert len(report) == 3
    assert report.ids() == [ok.id, fails.id, buried.id]
    assert report.ids("retry") == [fails.id]
    assert report.ids(topic=f"{topic}-b") == [buried.id]
    assert [type(error) for error in report.errors] == [chronoq.Retry, chronoq.Bury]
    assert report.skipped == 0


def test_a_job_parked_during_the_run_gets_its_due_time_back(
    queue: chronoq.Queue, topic: str
) -> None:
    soon = queue.put(topic, "soon", delay=5)  # due after until=0, near enough to be parked
    queue.put(topic, "now")
    assert run_due(queue, {topic: noop}).outcomes == ["ack"]
    info = queue.get(topic, soon.id)
    assert info is not None and info.state is State.DELAYED and info.due_at == soon.due_at


def test_a_handler_that_settles_its_job_itself_makes_it_lost(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        queue.nack(job, delay=10 * H)

    put = queue.put(topic, "x")
    report = run_due(queue, {topic: handler}, until=60)
    assert report.outcomes == ["lost"]
    assert [job.id for job in delayed(queue, topic)] == [put.id]


def test_an_interrupt_in_a_handler_gives_its_job_back_and_ends_the_run(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        raise KeyboardInterrupt

    put = queue.put(topic, "x", delay=H)
    later = queue.put(topic, "later", delay=2 * H)
    with pytest.raises(KeyboardInterrupt):
        run_due(queue, {topic: handler}, until=3 * H)
    [back] = ready(queue, topic)
    assert back.id == put.id and back.attempts == 1
    assert back.last_error == "run_due stopped before its handler ended"
    # the run's clock got to the interrupted job's due time: an hour went by
    info = queue.get(topic, later.id)
    assert info is not None and info.state is State.DELAYED
    assert later.due_at - info.due_at >= H * 1000 - 60_000


def test_an_interrupt_after_the_handler_settled_its_job_is_raised_as_it_is(
    queue: chronoq.Queue, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        queue.ack(job)
        raise KeyboardInterrupt

    put = queue.put(topic, "x")
    with pytest.raises(KeyboardInterrupt):  # not the LeaseLost of giving the job back
        run_due(queue, {topic: handler})
    assert queue.get(topic, put.id) is None


def test_an_async_handler_where_a_loop_runs_already_says_what_to_do(
    queue: chronoq.Queue, topic: str
) -> None:
    async def handler(job: Reservation) -> None:
        pass

    put = queue.put(topic, "x")

    async def from_async_code() -> None:
        with pytest.raises(RunError, match=r"asyncio\.to_thread\(run_due"):
            run_due(queue, {topic: handler})
        # as the message says: the handler is awaited on the thread's own loop
        report = await asyncio.to_thread(run_due, queue, {topic: handler})
        assert report.outcomes == ["ack"]

    asyncio.run(from_async_code())
    assert queue.get(topic, put.id) is None
