"""The worker, in process: on each backend, handlers' outcomes, concurrency and
reserve sizes, lease renewal, never-early delivery, shutdown, validation,
lost leases and logs. A worker runs in a thread (``w.run()``) or on an event
loop (``async with`` / ``serve()`` under ``asyncio.run``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Backoff, Bury, Reservation, Retry, State, Worker
from chronoq.errors import ChronoqError, InvalidInput

from ..redis_server import RedisServer, redis_server_binary

WAIT_S = 20.0  # generous: two shared, noisy cores


def wait_until(condition: Callable[[], Any], timeout: float = WAIT_S) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {condition}")
        time.sleep(0.01)


def state_of(queue: chronoq.Queue, topic: str, job_id: str) -> State | None:
    info = queue.get(topic, job_id)
    return None if info is None else info.state


def now_ms() -> int:
    return int(time.time() * 1000)


@contextmanager
def running(worker: Worker) -> Iterator[threading.Thread]:
    """``worker.run()`` in a thread (no signal handlers: not the main thread);
    stopped at once at the end unless the test stopped it already."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        if thread.is_alive():  # a stop() after the run would be for the next run
            worker.stop(now=True)
        thread.join(WAIT_S)
    assert not thread.is_alive(), "the worker did not stop"
    if errors:
        raise errors[0]


def stop(worker: Worker, thread: threading.Thread, *, now: bool = False) -> None:
    worker.stop(now=now)
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the worker did not stop"


class Recorder:
    """A sync handler: records each call; ``fail`` decides what it raises."""

    def __init__(self, fail: Callable[[Reservation], BaseException | None] | None = None) -> None:
        self.calls: list[tuple[Reservation, int]] = []  # (job, ms at the call)
        self.lock = threading.Lock()
        self.fail = fail

    def __call__(self, job: Reservation) -> str:
        with self.lock:
            self.calls.append((job, now_ms()))
        error = None if self.fail is None else self.fail(job)
        if error is not None:
            raise error
        return "a value, ignored"

    def count(self) -> int:
        with self.lock:
            return len(self.calls)


def boom(job: Reservation) -> BaseException:
    return ValueError("boom")


def run_async(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 45))


# -- outcomes ----------------------------------------------------------------------------


def test_return_acks(queue: chronoq.Queue, topic: str) -> None:
    ids = [queue.put(topic, {"n": n}).id for n in range(5)]
    handler = Recorder()
    worker = Worker(queue, {topic: handler}, concurrency=3, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == 5)
        stop(worker, thread)
    assert sorted(job.payload["n"] for job, _ in handler.calls) == list(range(5))
    assert all(queue.get(topic, job_id) is None for job_id in ids)
    stats = queue.stats(topic)
    assert (stats["delayed"], stats["ready"], stats["reserved"], stats["dead"]) == (0, 0, 0, 0)


def test_exception_nacks_with_the_topics_backoff(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "x").id
    handler = Recorder(boom)
    # the queue's default backoff starts at 1 s; this topic's at 10 s (5-10 s with jitter)
    worker = Worker(queue, {topic: handler}, backoff={topic: Backoff(base=10)}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.retried == 1)
        stop(worker, thread)
    info = queue.get(topic, job_id)
    assert info is not None
    assert info.state is State.DELAYED
    assert info.attempts == 1
    assert info.last_error == "ValueError: boom"
    failed_at = handler.calls[0][1]
    assert failed_at + 5000 - 5 <= info.due_at <= now_ms() + 10_000


def test_backoff_then_dead_after_max_attempts(
    queue: chronoq.Queue, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chronoq")
    job_id = queue.put(topic, "x", max_attempts=3).id
    handler = Recorder(boom)
    backoff = Backoff(base=0.05, factor=2, cap=1)
    worker = Worker(queue, {topic: handler}, backoff={topic: backoff}, recurring=False)
    with running(worker) as thread:
        wait_until(
            lambda: (info := queue.get(topic, job_id)) is not None and info.state is State.DEAD
        )
        stop(worker, thread)
    assert [job.attempts for job, _ in handler.calls] == [1, 2, 3]
    for n in (1, 2):  # retry n waited at least half its nominal delay (equal jitter)
        failed_at = handler.calls[n - 1][1]
        again = handler.calls[n][0]
        assert again.due_at >= failed_at + backoff.nominal_ms(n) // 2 - 2
        assert handler.calls[n][1] >= again.due_at
    info = queue.get(topic, job_id)
    assert info is not None and info.attempts == 3 and info.last_error == "ValueError: boom"
    assert [job.id for job in queue.dead(topic)] == [job_id]
    outcomes = [r.chronoq["outcome"] for r in caplog.records if hasattr(r, "chronoq")]
    assert outcomes == ["retry", "retry", "dead"]


def test_retry_delay_is_honoured(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "x").id
    handler = Recorder(lambda job: Retry(delay=0.2) if job.attempts == 1 else None)
    worker = Worker(queue, {topic: handler}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == 1)
        stop(worker, thread)
    (_, failed_at), (second, ran_at) = handler.calls
    assert second.attempts == 2
    assert failed_at + 200 - 2 <= second.due_at <= failed_at + 5000
    assert ran_at >= second.due_at
    assert queue.get(topic, job_id) is None
    nacks = [e for e in queue.events(topic).events if e.event == "nack"]
    assert [e.error for e in nacks] == ["retry in 0.2 s"]


def test_an_invalid_retry_delay_nacks_with_backoff(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "x").id
    worker = Worker(queue, {topic: Recorder(lambda job: Retry(delay=-1))}, recurring=False)
    with running(worker) as thread:
        wait_until(
            lambda: (info := queue.get(topic, job_id)) is not None and info.state is State.DELAYED
        )
        stop(worker, thread)
    info = queue.get(topic, job_id)
    assert info is not None and info.last_error is not None
    assert info.last_error.startswith("InvalidInput: delay must be")


def test_bury(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "x").id
    worker = Worker(queue, {topic: Recorder(lambda job: Bury("bad"))}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.buried == 1)
        stop(worker, thread)
    info = queue.get(topic, job_id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (State.DEAD, 1, "bad")


def test_keyboard_interrupt_in_a_handler_thread_is_a_failed_run(
    queue: chronoq.Queue, topic: str
) -> None:
    first = queue.put(topic, "first").id
    handler = Recorder(lambda job: KeyboardInterrupt() if job.payload == "first" else None)
    worker = Worker(queue, {topic: handler}, concurrency=1, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.retried == 1)
        queue.put(topic, "second")
        wait_until(lambda: worker.counts.acked == 1)  # the worker went on
        stop(worker, thread)
    info = queue.get(topic, first)
    assert info is not None and info.state is State.DELAYED
    assert info.last_error == "KeyboardInterrupt"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_exception_that_cannot_be_printed_still_nacks(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "x").id
    worker = Worker(queue, {topic: Recorder(lambda job: Unprintable())}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: state_of(queue, topic, job_id) is State.DELAYED)
        stop(worker, thread)
    info = queue.get(topic, job_id)
    assert info is not None and info.last_error == "Unprintable: (its str() failed)"


def test_a_long_error_is_cut_like_every_last_error(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "x").id
    failure = ValueError("x" * 50_000)
    worker = Worker(queue, {topic: Recorder(lambda job: failure)}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: state_of(queue, topic, job_id) is State.DELAYED)
        stop(worker, thread)
    info = queue.get(topic, job_id)
    assert info is not None and info.last_error is not None
    assert len(info.last_error) == 10_000 and info.last_error.startswith("ValueError: xxx")
    assert info.last_error.endswith("…")


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt])
def test_an_async_handler_ending_the_process_skips_the_grace(
    queue: chronoq.Queue, topic: str, exc: type[BaseException]
) -> None:
    job_id = queue.put(topic, "x").id
    others_started = threading.Event()

    async def handle(job: Reservation) -> None:
        if job.payload == "x":
            assert others_started.wait(WAIT_S)
            raise exc("bye")
        others_started.set()
        await asyncio.sleep(WAIT_S)

    other = queue.put(topic, "other", priority=1).id
    worker = Worker(queue, {topic: handle}, grace=3600, recurring=False)
    with pytest.raises(exc), running(worker) as thread:
        thread.join(WAIT_S)  # not the grace: asyncio ends the loop with it, as Python means
        assert not thread.is_alive()
    for name in (job_id, other):  # both released for another worker at once
        info = queue.get(topic, name)
        assert info is not None and info.state is State.READY
        assert info.last_error == "the worker stopped before its handler ended"


def test_a_failed_settle_is_logged(
    store_url: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)

        async def refuse(*args: Any) -> Any:
            raise ChronoqError("the store refused the nack")

        aq.backend.nack = refuse  # type: ignore[method-assign]
        job_id = (await aq.put(topic, "x")).id
        async with Worker(aq, {topic: Recorder(boom)}, recurring=False):
            while not any("the store refused the nack" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.01)
        info = await aq.get(topic, job_id)
        assert info is not None and info.state is State.RESERVED
        await aq.close()

    with caplog.at_level(logging.INFO, logger="chronoq"):
        run_async(main)
    (record,) = [r for r in caplog.records if r.name == "chronoq" and "refused" in r.getMessage()]
    assert record.levelno == logging.ERROR and "could not nack job" in record.getMessage()


def test_a_failed_release_is_logged(
    store_url: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        started = asyncio.Event()

        async def refuse(*args: Any) -> Any:
            raise ChronoqError("the store refused the release")

        async def handle(job: Reservation) -> None:
            started.set()
            await asyncio.sleep(WAIT_S)

        aq.backend.release = refuse  # type: ignore[method-assign]
        job_id = (await aq.put(topic, "x")).id
        async with Worker(aq, {topic: handle}, grace=0, recurring=False) as worker:
            await started.wait()
        assert worker.counts.released == 1
        info = await aq.get(topic, job_id)
        assert info is not None and info.state is State.RESERVED  # until its lease ends
        await aq.close()

    with caplog.at_level(logging.INFO, logger="chronoq"):
        run_async(main)
    (record,) = [r for r in caplog.records if r.name == "chronoq" and "refused" in r.getMessage()]
    assert record.levelno == logging.WARNING and "could not release job" in record.getMessage()


# -- handler kinds -----------------------------------------------------------------------


def test_async_handler(store_url: str, topic: str) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        ids = [(await aq.put(topic, n)).id for n in range(4)]
        seen: list[int] = []
        loop_thread = threading.current_thread()
        threads: set[threading.Thread] = set()

        async def handle(job: Reservation) -> int:
            threads.add(threading.current_thread())
            await asyncio.sleep(0.01)
            seen.append(job.payload)
            return 42

        async with Worker(aq, {topic: handle}, concurrency=2, recurring=False) as worker:
            while worker.counts.acked < 4:
                await asyncio.sleep(0.01)
        assert sorted(seen) == [0, 1, 2, 3]
        assert threads == {loop_thread}
        assert [await aq.get(topic, i) for i in ids] == [None] * 4
        await aq.close()

    run_async(main)


def test_sync_and_async_handlers_on_two_topics(store_url: str, topic: str) -> None:
    other = topic + ".async"

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        for n in range(3):
            await aq.put(topic, n)
            await aq.put(other, n)
        sync_threads: set[str] = set()
        async_seen: list[int] = []

        def plain(job: Reservation) -> None:
            sync_threads.add(threading.current_thread().name)

        async def coroutine(job: Reservation) -> None:
            async_seen.append(job.payload)

        handlers = {topic: plain, other: coroutine}
        async with Worker(aq, handlers, concurrency=2, recurring=False) as worker:
            while worker.counts.acked < 6:
                await asyncio.sleep(0.01)
        assert sorted(async_seen) == [0, 1, 2]
        assert sync_threads and all(name.startswith("chronoq-handler") for name in sync_threads)
        for name in (topic, other):
            stats = await aq.stats(name)
            assert stats["ready"] + stats["reserved"] + stats["delayed"] == 0
        await aq.close()

    run_async(main)


class AsyncCallable:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def __call__(self, job: Reservation, tag: str = "obj") -> None:
        await asyncio.sleep(0)
        self.seen.append((tag, job.payload))


def handler_kinds() -> dict[str, Callable[[AsyncCallable], Any]]:
    return {
        "callable object": lambda sink: sink,
        "partial of a coroutine function": lambda sink: functools.partial(
            AsyncCallable.__call__, sink, tag="partial"
        ),
        "partial of a callable object": lambda sink: functools.partial(sink, tag="partial"),
        "lambda returning a coroutine": lambda sink: lambda job: sink(job, "lambda"),
    }


@pytest.mark.parametrize("kind", sorted(handler_kinds()))
def test_async_callables_are_awaited(queue: chronoq.Queue, topic: str, kind: str) -> None:
    sink = AsyncCallable()
    queue.put(topic, "p")
    worker = Worker(queue, {topic: handler_kinds()[kind](sink)}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked + worker.counts.retried == 1)
        stop(worker, thread)
    assert worker.counts.acked == 1
    assert [payload for _, payload in sink.seen] == ["p"]


# -- concurrency and reserve sizes -------------------------------------------------------


@pytest.mark.parametrize(
    ("concurrency", "batch", "prefetch"), [(3, 100, 0), (4, 2, 0), (3, 100, 4)]
)
def test_concurrency_and_reserve_sizes(
    store_url: str, topic: str, concurrency: int, batch: int, prefetch: int
) -> None:
    lock = threading.Lock()
    active = [0]
    peak = [0]
    reserves: list[tuple[int, int]] = []  # (count asked, handlers running then)

    def handle(job: Reservation) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.03)
        with lock:
            active[0] -= 1

    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.reserve

        async def reserve(topic: str, count: int, ttr_ms: Any, waiter: Any = None) -> Any:
            with lock:
                reserves.append((count, active[0]))
            return await original(topic, count, ttr_ms, waiter)

        aq.backend.reserve = reserve  # type: ignore[method-assign]
        await aq.put_many(topic, [chronoq.Job(payload=n) for n in range(15)])
        async with Worker(
            aq,
            {topic: handle},
            concurrency=concurrency,
            batch=batch,
            prefetch=prefetch,
            recurring=False,
        ) as worker:
            while worker.counts.acked < 15:
                await asyncio.sleep(0.01)
        await aq.close()

    run_async(main)
    assert 1 <= peak[0] <= concurrency
    assert reserves
    for count, running_then in reserves:
        # a job held (prefetched) is not running yet: the bound counts it as room
        assert 1 <= count <= min(batch, concurrency + prefetch - running_then)


# -- leases and due times ----------------------------------------------------------------


def test_a_long_handler_keeps_its_lease(queue: chronoq.Queue, topic: str) -> None:
    job_id = queue.put(topic, "slow", ttr=0.5).id
    handler = Recorder(lambda job: time.sleep(1.5))  # 3x its ttr
    worker = Worker(queue, {topic: handler}, concurrency=2, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == 1)
        time.sleep(0.6)  # a redelivery would happen within a ttr
        stop(worker, thread)
    assert handler.count() == 1
    assert queue.get(topic, job_id) is None
    kinds = [e.event for e in queue.events(topic).events]
    assert kinds.count("reserve") == 1 and kinds.count("ack") == 1
    assert "expire" not in kinds and kinds.count("touch") >= 3
    assert worker.counts.lost == 0


def test_no_job_is_handled_before_it_is_due(queue: chronoq.Queue, topic: str) -> None:
    for n in range(12):
        queue.put(topic, n, delay=0.05 * n)
    handler = Recorder()
    worker = Worker(queue, {topic: handler}, concurrency=4, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == 12)
        stop(worker, thread)
    assert len(handler.calls) == 12
    for job, called_at in handler.calls:
        assert called_at >= job.due_at
    reserves = [e for e in queue.events(topic).events if e.event == "reserve"]
    assert len(reserves) == 12 and all(e.ts_ms >= e.due_at for e in reserves)


def test_a_renewal_that_crosses_the_ack_is_quiet(
    store_url: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.touch
        touched = asyncio.Event()

        async def late_touch(*args: Any) -> Any:
            await asyncio.sleep(0.4)  # arrives after the ack
            try:
                return await original(*args)
            finally:
                touched.set()

        async def handle(job: Reservation) -> None:
            await asyncio.sleep(0.15)  # past the first renewal (ttr / 3 = 0.1 s)

        aq.backend.touch = late_touch  # type: ignore[method-assign]
        job_id = (await aq.put(topic, "x", ttr=0.3)).id
        async with Worker(aq, {topic: handle}, recurring=False) as worker:
            await touched.wait()
        assert (worker.counts.acked, worker.counts.lost) == (1, 0)
        assert await aq.get(topic, job_id) is None
        await aq.close()

    with caplog.at_level(logging.INFO, logger="chronoq"):
        run_async(main)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_lost_lease_is_logged_and_the_worker_goes_on(
    queue: chronoq.Queue, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chronoq")
    started, deleted = threading.Event(), threading.Event()

    def handle(job: Reservation) -> None:
        if job.id == "a":
            started.set()
            assert deleted.wait(WAIT_S)
            time.sleep(0.3)  # past a renewal (every ttr / 3 = 0.1 s)

    queue.put(topic, "x", id="a", ttr=0.3)
    worker = Worker(queue, {topic: handle}, recurring=False)
    with running(worker) as thread:
        assert started.wait(WAIT_S)
        assert queue.delete(topic, "a")
        deleted.set()
        wait_until(lambda: worker.counts.lost == 1)
        queue.put(topic, "y", id="b")
        wait_until(lambda: worker.counts.acked == 2)
        stop(worker, thread)
    assert queue.get(topic, "b") is None
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("lost the lease of job" in m and "/a" in m for m in messages)
    assert any("finished after their lease was lost" in m and "a" in m for m in messages)


def test_the_worker_rides_out_a_redis_outage(
    tmp_path: Path, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    if redis_server_binary() is None and os.environ.get("CI") != "true":
        pytest.skip("redis-server is not installed")
    caplog.set_level(logging.INFO, logger="chronoq")
    server = RedisServer(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always")
    started, release = threading.Event(), threading.Event()

    def handle(job: Reservation) -> None:
        if job.payload == "during":
            started.set()
            assert release.wait(WAIT_S)

    def warned(text: str) -> bool:
        return any(text in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)

    try:
        with chronoq.connect(server.url) as queue:
            during = queue.put(topic, "during", ttr=60).id
            worker = Worker(queue, {topic: handle}, recurring=False)
            with running(worker) as thread:
                assert started.wait(WAIT_S)
                server.stop()
                release.set()  # it ends while the store is down: its ack waits
                wait_until(lambda: warned("could not ack 1 jobs"))
                wait_until(lambda: warned("store unavailable while reserving"))
                server.start()
                wait_until(lambda: worker.counts.acked == 1)
                after = queue.put(topic, "after").id
                wait_until(lambda: worker.counts.acked == 2)
                stop(worker, thread)
            assert queue.get(topic, during) is None and queue.get(topic, after) is None
            assert queue.stats(topic)["reserved"] == 0
    finally:
        release.set()
        server.stop()


# -- shutdown ----------------------------------------------------------------------------


def test_stop_lets_running_handlers_finish(queue: chronoq.Queue, topic: str) -> None:
    ids = [queue.put(topic, n).id for n in range(2)]
    handler = Recorder(lambda job: time.sleep(0.5))
    worker = Worker(queue, {topic: handler}, concurrency=2, grace=WAIT_S, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: handler.count() == 2)
        stop(worker, thread)
    assert (worker.counts.acked, worker.counts.released) == (2, 0)
    assert all(queue.get(topic, job_id) is None for job_id in ids)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stop_releases_what_outlives_the_grace(queue: chronoq.Queue, topic: str, kind: str) -> None:
    # on its last attempt: a release must not send it to dead
    job_id = queue.put(topic, "x", ttr=60, max_attempts=1).id
    started, release = threading.Event(), threading.Event()
    cancelled = threading.Event()

    def blocking(job: Reservation) -> None:
        started.set()
        release.wait(WAIT_S)

    async def waiting(job: Reservation) -> None:
        started.set()
        try:
            await asyncio.sleep(WAIT_S)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    handler = blocking if kind == "sync" else waiting
    worker = Worker(queue, {topic: handler}, grace=0.2, recurring=False)
    try:
        with running(worker) as thread:
            assert started.wait(WAIT_S)
            stop(worker, thread)
    finally:
        release.set()
    assert (worker.counts.acked, worker.counts.released) == (0, 1)
    info = queue.get(topic, job_id)
    assert info is not None
    # released at once: ready again, not dead though its one attempt was used
    assert (info.state, info.attempts) == (State.READY, 1)
    assert info.last_error == "the worker stopped before its handler ended"
    assert kind == "sync" or cancelled.is_set()
    assert queue.reserve(topic)[0].id == job_id


@pytest.mark.parametrize("when", ["at once", "during the grace"])
def test_stop_now_skips_the_grace(queue: chronoq.Queue, topic: str, when: str) -> None:
    job_id = queue.put(topic, "x").id
    started, release = threading.Event(), threading.Event()

    def blocking(job: Reservation) -> None:
        started.set()
        release.wait(WAIT_S)

    worker = Worker(queue, {topic: blocking}, grace=3600, recurring=False)
    try:
        with running(worker) as thread:
            assert started.wait(WAIT_S)
            if when == "during the grace":
                worker.stop()
                time.sleep(0.2)
                assert thread.is_alive()
            stop(worker, thread, now=True)
    finally:
        release.set()
    info = queue.get(topic, job_id)
    assert info is not None and info.state is State.READY
    assert worker.counts.released == 1


def test_jobs_leased_by_a_reserve_cut_short_by_stop_still_run(store_url: str, topic: str) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        original = aq.backend.reserve
        leased = asyncio.Event()
        ran: list[str] = []

        async def slow_reserve(*args: Any) -> Any:
            result = await original(*args)
            if result.jobs:
                leased.set()
                await asyncio.sleep(0.3)  # the worker is told to stop meanwhile
            return result

        async def handle(job: Reservation) -> None:
            ran.append(job.id)

        aq.backend.reserve = slow_reserve  # type: ignore[method-assign]
        job_id = (await aq.put(topic, "x", max_attempts=1)).id
        async with Worker(aq, {topic: handle}, recurring=False) as worker:
            await leased.wait()
        # run within the grace, not given back: that would use up its only attempt
        assert ran == [job_id] and worker.counts.acked == 1
        assert await aq.get(topic, job_id) is None
        await aq.close()

    run_async(main)


def test_stop_now_before_run(queue: chronoq.Queue, topic: str) -> None:
    worker = Worker(queue, {topic: Recorder()}, grace=3600, recurring=False)
    worker.stop(now=True)
    with running(worker) as thread:
        thread.join(WAIT_S)
        assert not thread.is_alive()


def test_stop_before_run_then_run_again(queue: chronoq.Queue, topic: str) -> None:
    handler = Recorder()
    worker = Worker(queue, {topic: handler}, recurring=False)
    worker.stop()
    with running(worker) as thread:
        thread.join(WAIT_S)
        assert not thread.is_alive()  # that run saw the stop at once
    queue.put(topic, "x")
    with running(worker) as thread:  # the stop was for the run that ended
        wait_until(lambda: worker.counts.acked == 1)
        stop(worker, thread)
    assert handler.count() == 1


def test_run_while_running_is_refused(queue: chronoq.Queue, topic: str) -> None:
    queue.put(topic, "x")
    worker = Worker(queue, {topic: Recorder()}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == 1)
        errors: list[BaseException] = []

        def second() -> None:
            try:
                asyncio.run(worker.serve())
            except BaseException as exc:
                errors.append(exc)

        other = threading.Thread(target=second, daemon=True)
        other.start()
        other.join(WAIT_S)
        assert not other.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
        assert "already running" in str(errors[0])
        stop(worker, thread)  # the first run still answers stop()


def test_async_with(store_url: str, topic: str) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)
        done = asyncio.Event()
        seen: list[int] = []

        async def handle(job: Reservation) -> None:
            seen.append(job.payload)
            if len(seen) == 3:
                done.set()

        for n in range(3):
            await aq.put(topic, n)
        async with Worker(aq, {topic: handle}, recurring=False) as worker:
            await done.wait()
        assert worker.counts.acked == 3
        stats = await aq.stats(topic)
        assert stats["ready"] + stats["reserved"] + stats["delayed"] == 0
        await aq.put(topic, 3)  # the queue is still open: the worker did not own it
        assert (await aq.stats(topic))["ready"] == 1
        await aq.close()

    run_async(main)


def test_an_unexpected_error_stops_the_worker_and_is_raised(
    store_url: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        aq = chronoq.aio.connect(store_url)

        async def broken(*args: Any) -> Any:
            raise RuntimeError("a bug in reserve")

        aq.backend.reserve = broken  # type: ignore[method-assign]
        worker = Worker(aq, {topic: Recorder()}, recurring=False)
        with pytest.raises(RuntimeError, match="a bug in reserve"):
            await asyncio.wait_for(worker.serve(), WAIT_S)
        await aq.close()

    run_async(main)
    assert any(
        r.levelno == logging.ERROR and "a bug in reserve" in str(r.exc_info) for r in caplog.records
    )


def test_recurring_occurrences_are_put_and_handled(queue: chronoq.Queue, topic: str) -> None:
    queue.recurring(topic, name="tick", every=1, payload="tick")
    handler = Recorder()
    worker = Worker(queue, {topic: handler})  # recurring=True: the default
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked >= 1)
        stop(worker, thread)
    assert {job.payload for job, _ in handler.calls} == {"tick"}


# -- validation and logs -----------------------------------------------------------------


def fine(job: Reservation) -> None:
    pass


@pytest.mark.parametrize(
    ("handlers", "options"),
    [
        ({}, {}),
        ([("t", fine)], {}),
        ({"t": "not callable"}, {}),
        ({"bad topic!": fine}, {}),
        ({"t": fine}, {"concurrency": 0}),
        ({"t": fine}, {"concurrency": True}),
        ({"t": fine}, {"concurrency": 2.5}),
        ({"t": fine}, {"batch": 0}),
        ({"t": fine}, {"batch": 10_001}),
        ({"t": fine}, {"grace": -1}),
        ({"t": fine}, {"grace": float("nan")}),
        ({"t": fine}, {"ttr": 0}),
        ({"t": fine}, {"ttr": -1.0}),
        ({"t": fine}, {"ttr": "30"}),
        ({"t": fine}, {"backoff": 5}),
        ({"t": fine}, {"backoff": {"t": 5}}),
        ({"t": fine}, {"backoff": {"other": Backoff()}}),
    ],
)
def test_invalid_arguments(sqlite_url: str, handlers: Any, options: dict[str, Any]) -> None:
    with chronoq.connect(sqlite_url) as q, pytest.raises(InvalidInput):
        Worker(q, handlers, **options)


def test_invalid_queue() -> None:
    with pytest.raises(InvalidInput, match="Queue or an AsyncQueue"):
        Worker("sqlite:///x.db", {"t": fine})  # type: ignore[arg-type]


def test_per_job_log_line(
    queue: chronoq.Queue, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chronoq")
    queue.put(topic, "ok", id="good")
    queue.put(topic, "fail", id="bad")
    handler = Recorder(lambda job: ValueError("boom") if job.payload == "fail" else None)
    worker = Worker(queue, {topic: handler}, recurring=False)
    with running(worker) as thread:
        wait_until(lambda: worker.counts.acked == 1 and worker.counts.retried == 1)
        stop(worker, thread)
    lines = {r.chronoq["id"]: r for r in caplog.records if hasattr(r, "chronoq")}
    good, bad = lines["good"], lines["bad"]
    assert good.levelno == logging.INFO
    assert f"topic={topic} id=good attempt=1 outcome=ack" in good.getMessage()
    assert f"topic={topic} id=bad attempt=1 outcome=retry" in bad.getMessage()
    assert "error='ValueError: boom'" in bad.getMessage()
    fields = bad.chronoq
    assert (fields["topic"], fields["attempt"], fields["outcome"]) == (topic, 1, "retry")
    assert fields["error"] == "ValueError: boom" and fields["duration_ms"] >= 0
