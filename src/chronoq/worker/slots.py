"""The jobs a worker holds and its handler slots: a reserved job starts when
a slot is free, else waits in order; a handler thread that ends a job starts
the next waiting one itself (``chain``), without a trip through the event
loop. A job whose lease ran out while it was held is never started
(``refusal``)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chronoq.job import Reservation
from chronoq.worker.inline import InlineRuns, Quickness
from chronoq.worker.settings import Handler, Settings
from chronoq.worker.threads import HandlerThreads

__all__ = ["LeaseRanOut", "Lot", "Running", "Slots", "start_margin"]

#: told on the loop when a handler ended: (token, error, chained)
Ended = Callable[[int, BaseException | None, bool], None]

#: a held job starts only with more than start_margin(ttr) of its lease left.
#: A healthy worker renews held leases every ttr / 3, so it never gets near
#: this: a lease this close to its end was not renewed in time (the process
#: was frozen, the loop stalled, the store did not answer). The handler would
#: still need its first renewal to reach the store (a thread hand-off and a
#: round trip, a few ms) while the local clock and the store's may drift apart
#: by up to 500 ppm under NTP slewing (15 ms over a 30 s lease): 50 ms covers
#: both. It is at most a tenth of the ttr, so that short leases (down to 1 ms)
#: still start on time.
START_MARGIN_S = 0.05
START_MARGIN_SHARE = 0.1


def start_margin(ttr: float) -> float:
    """Seconds of lease a held job of this ``ttr`` needs left to be started."""
    return min(START_MARGIN_S, ttr * START_MARGIN_SHARE)


class LeaseRanOut(Exception):
    """Why a held job was not started: its lease ran out (or came within
    ``start_margin`` of it) first. ``left_s``: the lease left at the last
    moment before the handler call, negative once it ran out."""

    def __init__(self, left_s: float) -> None:
        super().__init__(f"its lease ran out before its handler started ({left_s:+.3f} s left)")
        self.left_s = left_s


@dataclass(slots=True)
class Lot:
    """The jobs that one reserve leased with one ttr: their leases are renewed
    together, by one timer (a timer per job was a tenth of a busy loop's time)."""

    period: float
    tokens: list[int]
    left: int = 0  # jobs still held (running or waiting for a slot)
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class Running:
    """A job the worker holds: running, or (``started`` None) waiting for a slot.
    ``leased_until``: when its lease ends at the latest, on the local monotonic
    clock (see ``lease_left``)."""

    job: Reservation
    started: float | None
    lot: Lot
    leased_until: float
    task: asyncio.Task[None] | None = None
    renewing: bool = True


class Slots:
    """Held jobs by token, the free slots, and the jobs waiting for one."""

    def __init__(
        self,
        settings: Settings,
        loop: asyncio.AbstractEventLoop,
        stopping: asyncio.Event,
        ended: Ended,
        run_async: Callable[[Handler, Reservation, int], asyncio.Task[None]],
    ) -> None:
        self.settings = settings
        self.stopping = stopping
        self.free = settings.concurrency  # handler slots not running a job
        self.running: dict[int, Running] = {}
        self.waiting: deque[int] = deque()  # held jobs waiting for a slot, in order
        # a handler thread that ends a job starts the next waiting one itself
        # (see chain): `free`, `waiting` and `started` change under this lock
        self.lock = threading.Lock()
        self.idle = asyncio.Event()  # nothing held
        self.idle.set()
        self.room_freed = asyncio.Event()
        self.mean_run_s: float | None = None  # recent handler run time (moving average)
        self._tokens = itertools.count()
        self._run_async = run_async
        self._loop = loop
        self._ended = ended
        # quick plain functions run on the loop (inline.py); the threads time every run
        self.quickness = Quickness()
        self.threads = HandlerThreads(
            settings.concurrency, loop, ended, self.chain, self.refusal, self._observe
        )
        self.inline_runs = InlineRuns(loop, self.quickness, ended, self.refusal, self._await_result)

    def _observe(self, job: Reservation, seconds: float) -> None:  # in a handler thread
        self.quickness.threaded(job.topic, seconds)

    def _await_result(self, token: int, awaitable: Any) -> None:
        """A plain function run inline returned an awaitable: awaited in a task
        as an ``async def`` handler's coroutine is (``run_async``), which tells
        ``ended``, as a handler thread would have."""
        run = self.running.get(token)
        if run is None:
            return
        run.task = self._run_async(lambda _job: awaitable, run.job, token)

    def hold(self, job: Reservation, lot: Lot, leased_until: float) -> None:
        """Take a reserved job: start it if a slot is free, else queue it.
        ``leased_until``: the local monotonic time its lease ends by (the time
        the reserve was sent, plus the ttr)."""
        token = next(self._tokens)
        self.running[token] = Running(job, None, lot, leased_until)
        lot.tokens.append(token)
        lot.left += 1
        self.idle.clear()
        with self.lock:
            if not self.free or self.waiting:
                self.waiting.append(token)
                return
            self._take_slot(token)
        self.start(token)

    def _take_slot(self, token: int) -> None:  # under self.lock
        self.running[token].started = time.monotonic()
        self.free -= 1

    def chain(self, token: int) -> tuple[Handler, Reservation, int] | None:
        """In a handler thread whose job (``token``) just ended: the next waiting
        job, if it is a plain function's, for this thread to run now; the ended
        job's slot passes to it (``ended`` is told: ``chained``)."""
        if self.stopping.is_set():
            return None
        with self.lock:
            if not self.waiting:
                return None
            following = self.waiting[0]
            topic = self.running[following].job.topic
            if self.settings.is_async[topic] or (
                self.settings.inline and not self.quickness.thread_may_take(topic)
            ):
                return None  # runs on the loop (start asks on_loop again: the same answer)
            self.waiting.popleft()
            run = self.running[following]
            run.started = time.monotonic()  # in the ended job's slot: `free` is unchanged
        return self.settings.handlers[topic], run.job, following

    def refusal(self, token: int) -> LeaseRanOut | None:
        """Called at the last moment before a held job's handler is called (in
        its thread, or in its task on the loop): None to call it, else why not.
        Another consumer may hold the job once its lease ran out, and two
        handlers would run it at once. A job given back already is refused too."""
        run = self.running.get(token)  # a plain read: safe from a handler thread
        if run is None:
            return LeaseRanOut(0.0)
        left = lease_left(run)
        return LeaseRanOut(left) if left <= start_margin(run.job.ttr) else None

    def start(self, token: int) -> None:
        """Dispatch a job that took a slot (``_take_slot``)."""
        run = self.running[token]
        job = run.job
        handler = self.settings.handlers[job.topic]
        if self.settings.is_async[job.topic]:
            run.task = self._run_async(handler, job, token)
        elif self.settings.inline and self.quickness.on_loop(job.topic):
            self.inline_runs.submit(handler, job, token)
        else:
            self.threads.submit(handler, job, token)

    def end(self, token: int, chained: bool, ran: bool = True) -> tuple[Running, float] | None:
        """A handler ended (or, not ``ran``, was refused): forget its job and free
        its slot; the job and how long it ran. None when the job was released
        meanwhile."""
        run = self.running.pop(token, None)
        if run is None:  # released at shutdown while it ran: its result is void
            return None
        self.free_slot(run, chained)
        if not ran:  # a refused start says nothing of the handlers' run time
            return run, 0.0
        ran_s = time.monotonic() - run.started if run.started is not None else 0.0
        mean = self.mean_run_s
        self.mean_run_s = ran_s if mean is None else mean + 0.1 * (ran_s - mean)
        return run, ran_s

    def take_back(self, token: int) -> Running:
        """Forget a held job (running, or waiting for a slot) that is given back."""
        with self.lock:  # a thread may be taking it from `waiting` right now
            run = self.running.pop(token)
            if run.started is None and token in self.waiting:
                self.waiting.remove(token)
        self.free_slot(run)
        if run.task is not None:
            run.task.cancel()
        return run

    def take_waiting(self) -> list[int]:
        """The jobs that never started (at shutdown), out of the line."""
        with self.lock:
            never_started = list(self.waiting)
            self.waiting.clear()
        return never_started

    def free_slot(self, run: Running, chained: bool = False) -> None:
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
            with self.lock:
                self.free += 1
                if self.waiting and not self.stopping.is_set():
                    following = self.waiting.popleft()
                    self._take_slot(following)
            if following is not None:
                self.start(following)
        if not self.running:
            self.idle.set()


def lease_left(run: Running) -> float:
    """Seconds left of a held job's lease, by the local monotonic clock. Not
    ``job.deadline`` against the local wall clock: the deadline is on the
    store's clock, and the two may be skewed by seconds (docs/contract.md §5). The
    worker times its renewals the same way (ttr / 3 after the reserve). The
    store started the lease after the reserve (or touch) was sent, so the
    local end (that moment plus the ttr) is never later than the store's."""
    return run.leased_until - time.monotonic()
