"""One run of a Worker on one event loop: its fetchers, running handlers,
lease renewals, acks and settling of failed jobs, and the shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chronoq.aio.base import AsyncWatcher
from chronoq.aio.queue import AsyncQueue
from chronoq.backends.base import ReserveResult
from chronoq.errors import BackendUnavailable, ChronoqError, LeaseLost
from chronoq.job import Reservation, duration_ms
from chronoq.worker.acks import AckBatcher
from chronoq.worker.outcomes import Bury, Retry, error_of, log_outcome
from chronoq.worker.pause import Pause
from chronoq.worker.threads import HandlerThreads

if TYPE_CHECKING:
    from chronoq.worker.worker import Handler, Worker

__all__ = ["Session"]

log = logging.getLogger("chronoq")

HOLD_S = 0.05  # an automatic prefetch holds what the slots run in about this long
IDLE_WAIT_S = 5.0  # a waiting fetcher checks that it should still wait this often
# A fetcher due to wake for a job wakes this long before its due time and times
# the rest here, to the tick: the event loop's own timers wake up to 1 ms late
# (epoll counts whole ms), and ending a wait on the store takes round trips.
WAKE_EARLY_S = 0.002
SPIN_S = 0.0012  # the last stretch of such a wait, spent yielding to the loop
RECURRING_REFRESH_S = 1.0  # schedules added by other processes are seen this soon
SETTLE_TIMEOUT_S = 5.0  # at shutdown, for the last acks, nacks and releases


@dataclass(slots=True)
class _Lot:
    """The jobs that one reserve leased with one ttr: their leases are renewed
    together, by one timer (a timer per job was a tenth of a busy loop's time)."""

    period: float
    tokens: list[int]
    left: int = 0  # jobs still held (running or waiting for a slot)
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class _Running:
    """A job the worker holds: running, or (``started`` None) waiting for a slot."""

    job: Reservation
    started: float | None
    lot: _Lot
    task: asyncio.Task[None] | None = None
    renewing: bool = True


class Session:
    """One run of a worker, on one event loop."""

    def __init__(self, worker: Worker, loop: asyncio.AbstractEventLoop) -> None:
        self.w = worker
        self.loop = loop
        if isinstance(worker.queue, AsyncQueue):
            self.q, self._owns_queue = worker.queue, False
        else:
            self.q, self._owns_queue = AsyncQueue.from_queue(worker.queue), True
        self.ttr_ms = worker.ttr_ms
        self.free = worker.concurrency  # handler slots not running a job
        self.claimed = 0  # room taken by reserves on the wire (held jobs: self.running)
        self.mean_run_s: float | None = None  # recent handler run time (moving average)
        self.room_freed = asyncio.Event()
        self.waiting: deque[int] = deque()  # held jobs waiting for a slot, in order
        # a handler thread that ends a job starts the next waiting one itself
        # (see chain): `free`, `waiting` and `started` change under this lock
        self.slots = threading.Lock()
        self.stopping = asyncio.Event()
        self.hurry = asyncio.Event()  # a second signal: no grace
        self.idle = asyncio.Event()
        self.idle.set()
        self.running: dict[int, _Running] = {}
        self.tokens = itertools.count()
        self.side_tasks: set[asyncio.Task[Any]] = set()
        self.signals = 0

    # -- stopping --------------------------------------------------------------------

    def on_signal(self, signum: int) -> None:
        self.signals += 1
        log.info(
            "%s received: %s",
            signal.Signals(signum).name,
            "stopping now" if self.signals > 1 else "stopping after the running jobs",
        )
        self.request_stop(self.signals > 1)

    def request_stop(self, now: bool = False) -> None:
        self.stopping.set()
        self.room_freed.set()
        if now:
            self.hurry.set()

    # -- the session ------------------------------------------------------------------

    async def run(self) -> None:
        self.threads = HandlerThreads(self.w.concurrency, self.loop, self.finished, self.chain)
        self.acks = AckBatcher(self.q, self.lost)
        topics = sorted(self.w.handlers)
        loops = [self.loop.create_task(self.fetch(t), name=f"chronoq-fetch-{t}") for t in topics]
        if self.w.recurring:
            loops += [
                self.loop.create_task(self.schedule(t), name=f"chronoq-recurring-{t}")
                for t in topics
            ]
        log.info(
            "worker started: topics %s, concurrency %d, store %s",
            ", ".join(topics),
            self.w.concurrency,
            self.q.url,
        )
        # these tasks end only when stopping, or on a bug: then the worker
        # stops and raises it, rather than going on without a fetcher
        stopped = self.loop.create_task(self.stopping.wait())
        try:
            done, _ = await asyncio.wait(
                [stopped, *loops, self.acks.task], return_when=asyncio.FIRST_COMPLETED
            )
            failure = _failure(done - {stopped})
            if failure is not None:
                log.error("the worker stops: %s failed", failure[0], exc_info=failure[1])
                self.request_stop()
        finally:
            stopped.cancel()
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self.shut_down()
        if failure is not None:
            raise failure[1]

    async def shut_down(self) -> None:
        # jobs that never started go back at once, where another worker may be free
        with self.slots:
            never_started = list(self.waiting)
            self.waiting.clear()
        for token in never_started:
            self.release(token)
        if self.running and not self.hurry.is_set():
            log.info("waiting up to %g s for %d running jobs", self.w.grace, len(self.running))
            waits = [
                self.loop.create_task(self.idle.wait()),
                self.loop.create_task(self.hurry.wait()),
            ]
            await asyncio.wait(waits, timeout=self.w.grace, return_when=asyncio.FIRST_COMPLETED)
            for task in waits:
                task.cancel()
        for token in list(self.running):
            self.release(token)
        if self.side_tasks:
            await asyncio.wait(set(self.side_tasks), timeout=SETTLE_TIMEOUT_S)
        if not await self.acks.flush(SETTLE_TIMEOUT_S):
            log.warning("some acks did not reach the store; those jobs will be redelivered")
        await self.acks.close()
        self.threads.close()
        for task in set(self.side_tasks):
            task.cancel()
        if self._owns_queue:
            await self.q.close()
        log.info(
            "worker stopped: %d acked, %d retried, %d buried, %d released",
            self.w.counts.acked,
            self.w.counts.retried,
            self.w.counts.buried,
            self.w.counts.released,
        )

    def spawn(self, coroutine: Any) -> None:
        task = self.loop.create_task(coroutine)
        self.side_tasks.add(task)
        task.add_done_callback(self.side_tasks.discard)

    # -- reserving ---------------------------------------------------------------------

    async def fetch(self, topic: str) -> None:
        pause = Pause()
        watcher: AsyncWatcher | None = None
        try:
            while not self.stopping.is_set():
                try:
                    if watcher is None:
                        watcher = await self.q.backend.watch(topic)
                    await self.fetch_once(topic, watcher)
                    pause.reset()
                except ChronoqError as exc:
                    if not isinstance(exc, BackendUnavailable):
                        log.error("reserving from %s failed: %s", topic, exc)
                    else:
                        log.warning(
                            "store unavailable while reserving %s, retrying: %s", topic, exc
                        )
                    if watcher is not None:
                        with contextlib.suppress(ChronoqError):
                            await watcher.close()
                        watcher = None
                    await pause.sleep()
        finally:
            if watcher is not None:
                with contextlib.suppress(ChronoqError):
                    await watcher.close()

    async def fetch_once(self, topic: str, watcher: AsyncWatcher) -> None:
        while True:
            capacity = self.w.concurrency + self.prefetch()
            room = capacity - len(self.running) - self.claimed
            # while jobs wait for a slot, wait for half the room: one reserve of
            # many jobs rather than one round trip per freed slot
            if room > 0 and not (self.waiting and room < max(1, capacity // 2)):
                break
            self.room_freed.clear()
            await self.room_freed.wait()
            if self.stopping.is_set():
                return
        claimed = min(room, self.w.batch)
        self.claimed += claimed  # other topics' fetchers do not take this room meanwhile
        started = 0
        try:
            result, cancel = await self.lease(topic, claimed, watcher)
            lots: dict[float, _Lot] = {}
            for job in result.jobs:
                lot = lots.get(job.ttr)
                if lot is None:
                    lot = lots[job.ttr] = _Lot(job.ttr / 3, [])
                self.hold(job, lot)
                started += 1
            for lot in lots.values():
                lot.timer = self.loop.call_later(lot.period, self.renew, lot)
        finally:
            self.claimed -= claimed
            if claimed > started:
                self.room_freed.set()
        if cancel is not None:
            raise cancel
        if not result.jobs:
            timeout = IDLE_WAIT_S
            if result.wake_in_ms is not None:
                wake_in = result.wake_in_ms / 1000
                if wake_in <= WAKE_EARLY_S:
                    await sleep_until(self.loop, self.loop.time() + wake_in)
                    return
                timeout = min(timeout, wake_in - WAKE_EARLY_S)
            await watcher.wait(timeout)

    def prefetch(self) -> int:
        """Jobs to hold beyond the running ones: the worker's setting, or, when
        automatic, what the slots run in about HOLD_S at the recent run time (none
        until a job has ended): many for tiny jobs, none for long ones, so a job
        never waits long here while another worker is free."""
        if self.w.prefetch is not None:
            return self.w.prefetch
        if self.mean_run_s is None:
            return 0
        return min(self.w.batch, int(self.w.concurrency * HOLD_S / max(self.mean_run_s, 1e-6)))

    async def lease(
        self, topic: str, count: int, watcher: AsyncWatcher
    ) -> tuple[ReserveResult, asyncio.CancelledError | None]:
        """Reserve; if the worker stops meanwhile, the jobs and the cancellation."""
        call = asyncio.ensure_future(self.q.backend.reserve(topic, count, self.ttr_ms, watcher))
        try:
            result = await asyncio.shield(call)
        except asyncio.CancelledError as cancel:
            # the call may lease jobs: they run within the grace like the others.
            # Giving them back would use up an attempt of jobs that never ran
            # (and a job on its last attempt would go dead)
            return await call, cancel
        return result, None

    # -- running handlers ---------------------------------------------------------------

    def hold(self, job: Reservation, lot: _Lot) -> None:
        """Take a reserved job: start it if a slot is free, else queue it."""
        token = next(self.tokens)
        self.running[token] = _Running(job, None, lot)
        lot.tokens.append(token)
        lot.left += 1
        self.idle.clear()
        with self.slots:
            if not self.free or self.waiting:
                self.waiting.append(token)
                return
            self._take_slot(token)
        self.start(token)

    def _take_slot(self, token: int) -> None:  # under self.slots
        self.running[token].started = time.monotonic()
        self.free -= 1

    def chain(self, token: int) -> tuple[Handler, Reservation, int] | None:
        """In a handler thread whose job (``token``) just ended: the next waiting
        job, if it is a plain function's, for this thread to run now; the ended
        job's slot passes to it (``finished`` is told: ``chained``)."""
        if self.stopping.is_set():
            return None
        with self.slots:
            if not self.waiting:
                return None
            following = self.waiting[0]
            topic = self.running[following].job.topic
            if self.w._is_async[topic]:
                return None
            self.waiting.popleft()
            run = self.running[following]
            run.started = time.monotonic()  # in the ended job's slot: `free` is unchanged
        return self.w.handlers[topic], run.job, following

    def start(self, token: int) -> None:
        """Dispatch a job that took a slot (``_take_slot``)."""
        run = self.running[token]
        job = run.job
        handler = self.w.handlers[job.topic]
        if self.w._is_async[job.topic]:
            run.task = self.loop.create_task(self.run_async(handler, job, token))
        else:
            self.threads.submit(handler, job, token)

    async def run_async(self, handler: Handler, job: Reservation, token: int) -> None:
        try:
            await handler(job)
        except asyncio.CancelledError:
            # cancelled by someone else than release(): a failed run, unless the
            # loop is ending in a hurry (asyncio cancels every task), when the
            # shutdown that follows releases the job as it does the others
            if token in self.running and not self.hurry.is_set():
                self.finished(token, RuntimeError("the handler was cancelled"))
            raise
        except (KeyboardInterrupt, SystemExit):
            # asyncio ends the loop with them, and the shutdown that follows
            # would wait the whole grace for this job: skip it, and let the
            # shutdown release this job and the others at once
            self.request_stop(now=True)
            raise
        except Exception as exc:
            self.finished(token, exc)
        else:
            self.finished(token, None)

    def finished(self, token: int, error: BaseException | None, chained: bool = False) -> None:
        """A handler ended (on the loop): free its slot (unless its thread went
        on to the next job, ``chained``) and settle its job."""
        run = self.running.pop(token, None)
        if run is None:  # released at shutdown while it ran: its result is void
            return
        self.free_slot(run, chained)
        job = run.job
        if error is None:
            outcome = "ack"
            self.acks.add(job)
            self.w.counts.acked += 1
        elif isinstance(error, Bury):
            outcome = "bury"
            self.spawn(self.settle(job, bury=True, error=error))
        else:
            # the nack of a job on its last attempt moves it to dead
            outcome = "dead" if job.attempts >= job.max_attempts else "retry"
            self.spawn(self.settle(job, bury=False, error=error))
        ran_s = time.monotonic() - run.started if run.started is not None else 0.0
        mean = self.mean_run_s
        self.mean_run_s = ran_s if mean is None else mean + 0.1 * (ran_s - mean)
        if log.isEnabledFor(logging.INFO):
            log_outcome(job, ran_s * 1000, outcome, error)

    def free_slot(self, run: _Running, chained: bool = False) -> None:
        """Forget a held job (ended or released): its room, and its slot if it
        ran (unless ``chained``: passed on already), which the next waiting job
        takes unless the worker is stopping."""
        lot = run.lot
        lot.left -= 1
        if lot.left == 0 and lot.timer is not None:
            lot.timer.cancel()
        self.room_freed.set()
        if run.started is not None and not chained:
            following = None
            with self.slots:
                self.free += 1
                if self.waiting and not self.stopping.is_set():
                    following = self.waiting.popleft()
                    self._take_slot(following)
            if following is not None:
                self.start(following)
        if not self.running:
            self.idle.set()

    async def settle(self, job: Reservation, *, bury: bool, error: BaseException) -> None:
        """Nack or bury a failed job, retrying while the store is down."""
        pause = Pause()
        text = error_of(error)
        delay = error.delay if isinstance(error, Retry) else None
        while True:
            try:
                if bury:
                    await self.q.bury(job, error=text)
                    self.w.counts.buried += 1
                else:
                    await self.nack(job, delay, text)
                    self.w.counts.retried += 1
                return
            except LeaseLost:
                self.lost([job.id])
                return
            except BackendUnavailable as exc:
                if self.hurry.is_set():
                    return
                log.warning("could not settle job %s, retrying: %s", job.id, exc)
                await pause.sleep()
            except ChronoqError as exc:  # not the store being down: it would fail again
                log.error(
                    "could not %s job %s/%s (it runs again when its lease ends): %s",
                    "bury" if bury else "nack",
                    job.topic,
                    job.id,
                    exc,
                )
                return

    async def nack(self, job: Reservation, delay: float | None, text: str) -> None:
        # the backend's nack, for the topic's own backoff (Queue.nack uses the queue's)
        delay_ms = None if delay is None else duration_ms(delay, "delay")
        backoff = self.w.backoff_for(job.topic, self.q)
        await self.q.backend.nack(
            job.topic, job.id, job.lease, delay_ms, text, backoff, random.random()
        )

    def release(self, token: int) -> None:
        """Give a held job (running, or waiting for a slot) back to the queue at once."""
        with self.slots:  # a thread may be taking it from `waiting` right now
            run = self.running.pop(token)
            if run.started is None and token in self.waiting:
                self.waiting.remove(token)
        self.free_slot(run)
        if run.task is not None:
            run.task.cancel()
        self.w.counts.released += 1
        self.spawn(self.give_back(run.job))

    async def give_back(self, job: Reservation) -> None:
        try:
            await self.q.backend.release(
                job.topic, job.id, job.lease, "the worker stopped before its handler ended"
            )
        except ChronoqError as exc:
            log.warning(
                "could not release job %s/%s (it runs again when its lease ends): %s",
                job.topic,
                job.id,
                exc,
            )

    def renew(self, lot: _Lot) -> None:
        running = self.running
        lot.tokens = [t for t in lot.tokens if t in running and running[t].renewing]
        if not lot.tokens:
            return
        lot.timer = self.loop.call_later(lot.period, self.renew, lot)
        for token in lot.tokens:
            self.spawn(self.touch(token, running[token].job))

    async def touch(self, token: int, job: Reservation) -> None:
        try:
            await self.q.touch(job, ttr=job.ttr)
        except LeaseLost:
            run = self.running.get(token)
            if run is None:  # it finished (and was acked) while this touch was on the wire
                return
            run.renewing = False
            log.warning("lost the lease of job %s/%s while its handler ran", job.topic, job.id)
        except ChronoqError as exc:  # the next renewal tries again
            log.warning("could not renew the lease of job %s/%s: %s", job.topic, job.id, exc)

    def lost(self, ids: list[str]) -> None:
        self.w.counts.lost += len(ids)
        log.warning(
            "%d jobs finished after their lease was lost (they run again): %s",
            len(ids),
            ", ".join(ids[:10]),
        )

    # -- recurring jobs -----------------------------------------------------------------

    async def schedule(self, topic: str) -> None:
        """Put the topic's recurring occurrences as they fall due."""
        pause = Pause()
        while not self.stopping.is_set():
            try:
                run = await self.q.run_recurring(topic)
                pause.reset()
                sleep = RECURRING_REFRESH_S
                if run.next_in is not None:  # the store's clock: not time.time()
                    sleep = min(sleep, max(run.next_in, 0.0))
            except ChronoqError as exc:
                log.warning("could not put the recurring jobs of %s: %s", topic, exc)
                sleep = pause.take()
            await asyncio.sleep(sleep)


async def sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep until ``deadline`` (``loop.time()``) and not a tick later: the
    loop's timer for all but the last SPIN_S, then turns of the loop."""
    coarse = deadline - loop.time() - SPIN_S
    if coarse > 0:
        await asyncio.sleep(coarse)
    while loop.time() < deadline:
        await asyncio.sleep(0)


def _failure(tasks: set[asyncio.Task[Any]]) -> tuple[str, BaseException] | None:
    """The name and exception of a task that failed, if one did."""
    for task in tasks:
        if not task.cancelled() and (exc := task.exception()) is not None:
            return task.get_name(), exc
    return None
