"""The worker's prefetch and precise waits: jobs held beyond the running ones
(at most ``concurrency + prefetch``), started as slots free and released at
once by a stop; the automatic amount, which follows the handlers' run time;
and the CLI's log handler, which writes a turn of the loop's lines at once."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Job, Reservation, Worker
from chronoq.cli.joblog import BurstHandler
from chronoq.cli.worker import WorkerOptions, make_worker
from chronoq.errors import InvalidInput
from chronoq.worker.fetching import HOLD_S
from chronoq.worker.session import Session

from .test_worker import WAIT_S, Recorder, running, stop, wait_until


class Gate:
    """A sync handler that blocks until opened; counts the jobs it started."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.lock = threading.Lock()
        self.started: list[str] = []

    def __call__(self, job: Reservation) -> None:
        with self.lock:
            self.started.append(job.id)
        self.opened.wait(WAIT_S)

    def count(self) -> int:
        with self.lock:
            return len(self.started)


@pytest.mark.parametrize("prefetch", [0, 3])
def test_a_worker_holds_at_most_concurrency_plus_prefetch(
    queue: chronoq.Queue, topic: str, prefetch: int
) -> None:
    queue.put_many(topic, [Job(payload=n) for n in range(12)])
    gate = Gate()
    worker = Worker(queue, {topic: gate}, concurrency=2, prefetch=prefetch, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: gate.count() == 2 and queue.stats(topic)["reserved"] == 2 + prefetch)
        time.sleep(0.3)  # room for more reserves, had the worker wanted them
        assert queue.stats(topic)["reserved"] == 2 + prefetch
        assert gate.count() == 2
        gate.opened.set()
        wait_until(lambda: worker.counts.acked == 12)
        stop(worker, thread)
    assert queue.stats(topic)["total"] == 0


def test_held_jobs_start_in_the_order_they_were_reserved(queue: chronoq.Queue, topic: str) -> None:
    ids = [queue.put(topic, n, priority=n).id for n in range(6)]  # the last put is the best
    gate = Gate()
    worker = Worker(queue, {topic: gate}, concurrency=1, prefetch=5, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: queue.stats(topic)["reserved"] == 6)
        gate.opened.set()
        wait_until(lambda: worker.counts.acked == 6)
        stop(worker, thread)
    assert gate.started == ids[::-1]


def test_the_automatic_prefetch_holds_nothing_while_handlers_run_long(
    queue: chronoq.Queue, topic: str
) -> None:
    queue.put_many(topic, [Job(payload=n) for n in range(8)])
    gate = Gate()
    worker = Worker(queue, {topic: gate}, concurrency=2, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: gate.count() == 2)
        time.sleep(0.3)
        assert queue.stats(topic)["reserved"] == 2  # no run time known yet: none held
        gate.opened.set()
        wait_until(lambda: worker.counts.acked == 8)
        stop(worker, thread)


def test_the_automatic_prefetch_follows_the_run_time(sqlite_url: str, topic: str) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(sqlite_url)
        worker = Worker(aq, {topic: Recorder()}, concurrency=4, batch=100, recurring=False)
        session = Session(worker.settings, worker.counts, asyncio.get_running_loop())
        assert session.fetcher.prefetch() == 0  # nothing has run yet
        for mean, held in ((1e-5, 100), (0.01, int(4 * HOLD_S / 0.01)), (1.0, 0)):
            session.slots.mean_run_s = mean
            assert session.fetcher.prefetch() == held
        fixed = Worker(aq, {topic: Recorder()}, concurrency=4, prefetch=7, recurring=False)
        session = Session(fixed.settings, fixed.counts, asyncio.get_running_loop())
        session.slots.mean_run_s = 1e-5
        assert session.fetcher.prefetch() == 7
        await aq.close()

    asyncio.run(main())


def test_a_stop_releases_held_jobs_at_once(queue: chronoq.Queue, topic: str) -> None:
    queue.put_many(topic, [Job(payload=n) for n in range(3)])
    gate = Gate()
    worker = Worker(queue, {topic: gate}, concurrency=1, prefetch=2, grace=WAIT_S, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: gate.count() == 1 and queue.stats(topic)["reserved"] == 3)
        worker.stop()
        # the two that never started are ready for other workers while the
        # running one finishes within the grace
        wait_until(lambda: queue.stats(topic)["ready"] == 2)
        assert queue.stats(topic)["reserved"] == 1
        gate.opened.set()
        thread.join(WAIT_S)
    assert gate.count() == 1
    assert (worker.counts.acked, worker.counts.released) == (1, 2)
    assert queue.stats(topic)["total"] == 2


@pytest.mark.parametrize("bad", [-1, True, 1.5, "4"])
def test_a_bad_prefetch_is_refused(queue: chronoq.Queue, topic: str, bad: Any) -> None:
    with pytest.raises(InvalidInput, match="prefetch"):
        Worker(queue, {topic: Recorder()}, prefetch=bad)


def test_the_cli_passes_prefetch_on(queue: chronoq.Queue, topic: str) -> None:
    options = WorkerOptions("m:h", prefetch=5)
    assert options.child_argv(1).count("--prefetch") == 1
    assert options.child_argv(1)[options.child_argv(1).index("--prefetch") + 1] == "5"
    assert "--prefetch" not in WorkerOptions("m:h").child_argv(1)
    assert make_worker(queue, {topic: Recorder()}, options).prefetch == 5


def test_jobs_due_a_tick_apart_never_start_early(queue: chronoq.Queue, topic: str) -> None:
    # gaps around the early wake (2 ms) and the spin (1.2 ms): each path of the wait
    start = time.time() + 0.3
    gaps = [0.0007, 0.0013, 0.0021, 0.0026, 0.004, 0.0005] * 6
    due = start
    for n, gap in enumerate(gaps):
        due += gap
        queue.put(topic, n, run_at=due)
    handler = Recorder()
    worker = Worker(queue, {topic: handler}, concurrency=2, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == len(gaps))
        stop(worker, thread)
    assert len(handler.calls) == len(gaps)
    for job, called_at in handler.calls:
        assert called_at >= job.due_at


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_lines_logged_in_one_turn_of_the_loop_go_out_in_one_write() -> None:
    stream = CountingStream()
    handler = BurstHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("chronoq.test-burst")
    logger.addHandler(handler)
    logger.propagate = False
    try:

        async def main() -> None:
            for n in range(100):
                logger.warning("line %d", n)
            assert stream.writes == 0  # gathered
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert stream.writes == 1
            assert stream.getvalue().splitlines() == [f"line {n}" for n in range(100)]
            logger.warning("last")  # the loop ends before its turn comes

        asyncio.run(main())
        logger.warning("off the loop")  # at once, after the one still gathered
        assert stream.getvalue().splitlines()[-2:] == ["last", "off the loop"]
        logger.warning("again")
        assert stream.getvalue().endswith("again\n")
    finally:
        logger.removeHandler(handler)


def test_a_line_still_gathered_is_written_by_flush() -> None:
    stream = CountingStream()
    handler = BurstHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    record = logging.LogRecord("chronoq", logging.INFO, __file__, 1, "pending", None, None)

    async def main() -> None:
        handler.handle(record)
        assert stream.getvalue() == ""  # gathered for the loop's next turn
        handler.flush()  # as logging.shutdown() and the CLI's restore() do
        assert stream.getvalue() == "pending\n"
        await asyncio.sleep(0)  # that turn finds nothing left to write
        assert stream.writes == 1

    asyncio.run(main())


def test_threads_that_go_on_to_held_jobs_keep_to_the_concurrency(
    store_url: str, topic: str
) -> None:
    # a handler thread starts the next held plain-function job itself; async
    # jobs start on the loop: together never more than `concurrency` at once
    lock = threading.Lock()
    active, peak, order = [0], [0], []

    def enter(name: str) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            order.append(name)

    def leave() -> None:
        with lock:
            active[0] -= 1

    def plain(job: Reservation) -> None:
        enter("plain")
        time.sleep(0.01)
        leave()

    async def coroutine(job: Reservation) -> None:
        enter("async")
        await asyncio.sleep(0.01)
        leave()

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        await aq.put_many(topic, [Job(payload=n) for n in range(20)])
        await aq.put_many(topic + "-a", [Job(payload=n) for n in range(20)])
        handlers = {topic: plain, topic + "-a": coroutine}
        async with Worker(aq, handlers, concurrency=2, prefetch=6, recurring=False) as worker:
            while worker.counts.acked < 40:
                await asyncio.sleep(0.01)
        await aq.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert 1 <= peak[0] <= 2
    assert order.count("plain") == 20 and order.count("async") == 20


def test_the_automatic_prefetch_reserves_beyond_the_slots_for_short_jobs(
    store_url: str, topic: str
) -> None:
    asked: list[int] = []

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.reserve

        async def reserve(topic: str, count: int, ttr_ms: Any, waiter: Any = None) -> Any:
            asked.append(count)
            return await original(topic, count, ttr_ms, waiter)

        aq.backend.reserve = reserve  # type: ignore[method-assign]
        await aq.put_many(topic, [Job(payload=n) for n in range(300)])
        async with Worker(aq, {topic: Recorder()}, concurrency=2, recurring=False) as worker:
            while worker.counts.acked < 300:
                await asyncio.sleep(0.01)
        await aq.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert asked[0] == 2  # nothing has run yet: the free slots only
    assert max(asked) > 2  # short jobs: held beyond the slots
    assert max(asked) <= 100  # never more than batch
