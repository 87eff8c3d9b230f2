"""A worker never starts a job whose lease ran out while it held it (frozen
by SIGSTOP, its loop stalled, a reserve answer late, a renewal refused):
another consumer may hold that job by then. The job is given back, not acked
and not nacked, and the store delivers it again: it runs exactly once, on its
next attempt. On each backend, for plain and ``async def`` handlers."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Reservation, Worker
from chronoq.errors import LeaseLost

from .test_worker import WAIT_S, run_async

TTR_S = 0.3  # the short lease that runs out; renewed every 0.1 s while held


class Calls:
    """Handlers that record (id, attempt) of each call; the job ``blocker``
    waits for ``opened`` (a threading.Event for plain functions, set from the
    loop: both kinds can wait on it)."""

    def __init__(self, blocker: str | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.blocker = blocker
        self.opened = threading.Event()

    def _record(self, job: Reservation) -> None:
        with self.lock:
            self.calls.append((job.id, job.attempts))

    def sync(self, job: Reservation) -> None:
        self._record(job)
        if job.id == self.blocker:
            assert self.opened.wait(WAIT_S)

    async def async_(self, job: Reservation) -> None:
        self._record(job)
        if job.id == self.blocker:
            while not self.opened.is_set():
                await asyncio.sleep(0.01)

    def handler(self, kind: str) -> Callable[[Reservation], Any]:
        return self.sync if kind == "sync" else self.async_

    def ids(self) -> list[str]:
        with self.lock:
            return [job_id for job_id, _ in self.calls]


async def until(condition: Callable[[], Any]) -> None:
    end = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {condition}"
        await asyncio.sleep(0.01)


async def until_gone(aq: chronoq.aio.AsyncQueue, topic: str, job_id: str) -> None:
    """Until the job is acked (a lost ack leaves it for a later run)."""
    end = time.monotonic() + WAIT_S
    while await aq.get(topic, job_id) is not None:
        assert time.monotonic() < end, f"timed out waiting for job {job_id} to be acked"
        await asyncio.sleep(0.01)


async def until_reserved(aq: chronoq.aio.AsyncQueue, topic: str, count: int) -> None:
    end = time.monotonic() + WAIT_S
    while (await aq.stats(topic))["reserved"] < count:
        assert time.monotonic() < end, f"timed out waiting for {count} reserved jobs"
        await asyncio.sleep(0.01)


def run_logged(
    caplog: pytest.LogCaptureFixture, main: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """Run ``main`` with chronoq's log captured down to debug (quiet releases)."""
    with caplog.at_level(logging.DEBUG, logger="chronoq"):
        run_async(main)


def warnings_about(caplog: pytest.LogCaptureFixture, job_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "chronoq" and r.levelno == logging.WARNING and f"/{job_id} " in r.getMessage()
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_held_job_is_not_started_after_the_worker_was_frozen(
    store_url: str, topic: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The handler slot is busy while the worker is frozen past the lease of
    the job held next: when the slot frees, that job is not started."""

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        calls = Calls(blocker="a")
        await aq.put(topic, "busy", id="a", ttr=30)  # its lease outlives the freeze
        await aq.put(topic, "held", id="b", ttr=TTR_S)
        worker = Worker(
            aq, {topic: calls.handler(kind)}, concurrency=1, prefetch=1, recurring=False
        )
        async with worker:
            await until(lambda: calls.ids() == ["a"])
            await until_reserved(aq, topic, 2)  # b is held, waiting for the slot
            # the whole worker stops (its loop: what SIGSTOP does to it, less
            # the handler threads), longer than b's lease: nothing renews it
            time.sleep(TTR_S * 2)
            calls.opened.set()
            await until_gone(aq, topic, "b")
        # b ran once, on the attempt after the one whose lease ran out
        assert calls.calls == [("a", 1), ("b", 2)]
        counts = worker.counts
        assert (counts.skipped, counts.lost, counts.retried) == (1, 0, 0)
        events = [e for e in (await aq.events(topic)).events if e.id == "b"]
        assert [e.event.value for e in events if e.event.value in ("reserve", "ack")] == [
            "reserve",
            "reserve",
            "ack",
        ]
        await aq.close()

    run_logged(caplog, main)
    (line,) = [m for m in warnings_about(caplog, "b") if "not started" in m]
    assert "its lease ran out" in line and "ms ago" in line
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_job_whose_reserve_answer_came_after_its_lease_is_not_started(
    store_url: str,
    topic: str,
    kind: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reserve answer arrives after the lease ran out (the process was
    frozen while it was on the wire): a free slot does not start the job; its
    release fails quietly (LeaseLost, at debug level)."""

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.reserve
        late = [True]  # the first answer with jobs only

        async def late_answer(*args: Any) -> Any:
            result = await original(*args)
            if result.jobs and late:
                late.pop()
                await asyncio.sleep(TTR_S * 2)
            return result

        monkeypatch.setattr(aq.backend, "reserve", late_answer)
        calls = Calls()
        await aq.put(topic, "x", id="c", ttr=TTR_S)
        async with Worker(aq, {topic: calls.handler(kind)}, recurring=False) as worker:
            await until_gone(aq, topic, "c")
        assert calls.calls == [("c", 2)]
        assert (worker.counts.skipped, worker.counts.lost) == (1, 0)
        await aq.close()

    run_logged(caplog, main)
    assert any("its lease ran out" in m for m in warnings_about(caplog, "c"))
    quiet = [r for r in caplog.records if "was not released" in r.getMessage()]
    assert quiet and all(r.levelno == logging.DEBUG for r in quiet)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_job_refused_while_the_store_still_leases_it_is_released(
    store_url: str,
    topic: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker measures a lease from when it sent the reserve, so a call
    that took longer than the ttr to reach the store looks run out though the
    store leased the job late: it is released, ready again at once (no expiry,
    which would cost an attempt's death on the last one)."""

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.reserve
        slow = [True]  # the first call only: it reserves the job, put before

        async def slow_call(*args: Any) -> Any:
            if slow:
                slow.pop()
                await asyncio.sleep(TTR_S * 2)
            return await original(*args)

        monkeypatch.setattr(aq.backend, "reserve", slow_call)
        calls = Calls()
        await aq.put(topic, "x", id="d", ttr=TTR_S, max_attempts=1)
        async with Worker(aq, {topic: calls.sync}, recurring=False) as worker:
            await until_gone(aq, topic, "d")
        assert calls.calls == [("d", 2)]
        assert (worker.counts.skipped, worker.counts.lost) == (1, 0)
        kinds = [e.event.value for e in (await aq.events(topic)).events if e.id == "d"]
        assert "expire" not in kinds and "dead" not in kinds
        assert kinds.count("reserve") == 2
        await aq.close()

    run_logged(caplog, main)
    assert not [r for r in caplog.records if "was not released" in r.getMessage()]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_held_job_whose_renewal_was_refused_is_not_started(
    store_url: str,
    topic: str,
    kind: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store answers a held job's renewal with LeaseLost (here: the job was
    deleted): the job is never started."""

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.touch
        refused = asyncio.Event()

        async def touch(*args: Any) -> Any:
            try:
                return await original(*args)
            except LeaseLost:
                refused.set()
                raise

        monkeypatch.setattr(aq.backend, "touch", touch)
        calls = Calls(blocker="a")
        await aq.put(topic, "busy", id="a", ttr=30)
        await aq.put(topic, "held", id="e", ttr=TTR_S)
        worker = Worker(
            aq, {topic: calls.handler(kind)}, concurrency=1, prefetch=1, recurring=False
        )
        async with worker:
            await until(lambda: calls.ids() == ["a"])
            await until_reserved(aq, topic, 2)
            assert await aq.delete(topic, "e")
            await refused.wait()
            calls.opened.set()
            # e was dispatched (or refused) when a ended, before its count: the
            # stop then waits for any handler it started
            await until(lambda: worker.counts.acked >= 1)
        assert calls.calls == [("a", 1)]
        assert (worker.counts.skipped, worker.counts.lost) == (1, 0)
        await aq.close()

    run_logged(caplog, main)
    assert any("not started" in m for m in warnings_about(caplog, "e"))
    assert not any("while its handler ran" in m for m in warnings_about(caplog, "e"))
