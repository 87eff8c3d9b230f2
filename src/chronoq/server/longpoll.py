"""Long polls that share the store's wake-up: all the waiting requests of one
topic in this process wait behind one watcher (on Redis, one blocked
connection over the topic's shards), and one task reserves for them in the
order they came, so a thousand idle long polls cost one connection and no
CPU, and a job that becomes due is reserved once, for the first in line.

A request on several topics (the compatibility protocols' pop) waits the
same way, behind one watcher of its topics (``watch_topics``: on Redis, one
BLPOP over all their wake lists), shared with the requests on the same
topics; each attempt tries the topics in the order given. Its watcher, and
the connection it blocks, are released when its last request ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from chronoq.aio import AsyncQueue
from chronoq.backends.base import ReserveResult, TopicsWatcher
from chronoq.calls.checks import MAX_COUNT
from chronoq.errors import ChronoqError
from chronoq.job import Reservation
from chronoq.server.batching import Coalescer

__all__ = ["LongPolls"]

log = logging.getLogger("chronoq")

_MAX_WAIT_S = 300.0  # a hub's single wait on the store, when its waiters wait longer
_INTERRUPT_S = 1.0  # an interrupted wait that takes longer to end is cancelled


@dataclass(eq=False)
class _Waiter:
    count: int
    ttr: float | None
    deadline: float  # loop.time()
    jobs: asyncio.Future[list[Reservation]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class _Hub:
    """The waiters of some topics, and the task that reserves for them."""

    def __init__(self, polls: LongPolls, topics: tuple[str, ...]) -> None:
        self.polls = polls
        self.topics = topics
        self.waiters: deque[_Waiter] = deque()
        self.task: asyncio.Task[None] | None = None
        self.idle = asyncio.Event()  # every waiter left: the wait on the store ends
        self._tried: set[str] = set()  # the topics reserved on since the last wait

    def left(self) -> None:
        """A waiter gave up (hung up, timed out): when it was the last, the
        hub stops waiting, and releases its watcher, now."""
        if self._head() is None:
            self.idle.set()

    def _head(self) -> _Waiter | None:
        while self.waiters and self.waiters[0].jobs.done():  # timed out, hung up
            self.waiters.popleft()
        return self.waiters[0] if self.waiters else None

    async def run(self) -> None:
        watcher: TopicsWatcher | None = None
        try:
            watcher = await self.polls.queue.watch_topics(self.topics)
            while self._head() is not None and not self.polls.closing.is_set():
                result = await self._serve(watcher)
                # a wake-up of a topic that no reserve looked at goes to
                # another waiter (a Redis token wakes one): it was for a job
                await watcher.unused(self._tried)
                self._tried.clear()
                if result is None:
                    break
                await self._wait(watcher, result)
        except Exception as exc:  # the waiters answer it (503, or 500 and logged)
            self._fail(exc)
        finally:
            self.polls.hub_done(self)
            if watcher is not None:
                with contextlib.suppress(ChronoqError):
                    await watcher.unused(self._tried)  # woken, then nobody was left
                with contextlib.suppress(ChronoqError):
                    await watcher.close()  # hands on a due-time wake-up it holds

    async def _serve(self, watcher: TopicsWatcher) -> ReserveResult | None:
        """Reserve for the waiters in turn until an attempt leases nothing
        (returned, for its next wake-up time); None when no one is waiting."""
        while (head := self._head()) is not None:
            result = await self._reserve(head, watcher)
            if not result.jobs:
                return result
            if head.jobs.done():  # gave up while the call ran: the jobs go back
                await self.polls.give_back(result.jobs)
            else:
                head.jobs.set_result(result.jobs)
                self.waiters.popleft()
        return None

    async def _reserve(self, head: _Waiter, watcher: TopicsWatcher) -> ReserveResult:
        """The jobs of the first topic, in order, that has some for ``head``;
        else when the soonest of them may have some."""
        queue, loop = self.polls.queue, asyncio.get_running_loop()
        soonest: float | None = None  # loop.time()
        for topic in self.topics:
            self._tried.add(topic)
            result = await queue.reserve_once(
                topic, head.count, ttr=head.ttr, watcher=watcher.of(topic)
            )
            if result.jobs or len(self.topics) == 1:
                return result
            if result.wake_in_ms is not None:
                at = loop.time() + result.wake_in_ms / 1000
                soonest = at if soonest is None else min(soonest, at)
        wake = None if soonest is None else max(soonest - loop.time(), 0.0) * 1000
        return ReserveResult([], wake)

    async def _wait(self, watcher: TopicsWatcher, result: ReserveResult) -> None:
        self.idle.clear()
        if self._head() is None:  # the last waiter left while the hub reserved
            return
        loop = asyncio.get_running_loop()
        live = [w.deadline for w in self.waiters if not w.jobs.done()]
        limit = min(max(max(live) - loop.time(), 0.001), _MAX_WAIT_S)
        waiting = asyncio.ensure_future(self.polls.queue.wait_for_jobs(watcher, result, limit))
        stops = [asyncio.ensure_future(e.wait()) for e in (self.polls.closing, self.idle)]
        try:
            await asyncio.wait({waiting, *stops}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for stop in stops:
                stop.cancel()
            if not waiting.done():
                await self._stop_waiting(watcher, waiting)
        if waiting.done() and not waiting.cancelled() and waiting.exception() is not None:
            raise waiting.exception()  # type: ignore[misc]

    @staticmethod
    async def _stop_waiting(watcher: TopicsWatcher, waiting: asyncio.Future[None]) -> None:
        """End ``waiting`` now: as its own time would where the watcher can
        (on Redis it keeps its connection, and a token that came meanwhile),
        else, or if that takes long, cancelled (safe too)."""
        if watcher.interrupt():
            await asyncio.wait({waiting}, timeout=_INTERRUPT_S)
        if not waiting.done():
            waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError, ChronoqError):
            await waiting

    def _fail(self, exc: Exception) -> None:
        for waiter in self.waiters:
            if not waiter.jobs.done():
                waiter.jobs.set_exception(exc)
        self.waiters.clear()


class LongPolls:
    """The long polls of one server process, by topic."""

    def __init__(self, queue: AsyncQueue) -> None:
        self.queue = queue
        self.closing = asyncio.Event()
        self._hubs: dict[tuple[str, ...], _Hub] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # first attempts that meet at the store go as one reserve (batching.py)
        self._first: Coalescer[tuple[str, float | None], int, list[Reservation]] = Coalescer(
            self._reserve_group, unclaimed=self.give_back_later
        )

    async def _reserve_group(
        self, key: tuple[str, float | None], counts: list[int]
    ) -> list[list[Reservation]]:
        """One reserve for several requests, its jobs shared in their order."""
        topic, ttr = key
        total = min(sum(counts), MAX_COUNT)
        jobs = (await self.queue.reserve_once(topic, total, ttr=ttr)).jobs
        shares, start = [], 0
        for count in counts:
            shares.append(jobs[start : start + count])
            start += count
        return shares

    @property
    def waiting(self) -> int:
        """How many requests wait (for tests and metrics)."""
        return sum(1 for hub in self._hubs.values() for w in hub.waiters if not w.jobs.done())

    @property
    def watchers(self) -> int:
        """How many watchers (store wake-ups) this process holds."""
        return len(self._hubs)

    async def reserve(
        self,
        topics: tuple[str, ...],
        count: int,
        ttr: float | None,
        wait: float,
        hung_up: asyncio.Event | None = None,
    ) -> list[Reservation]:
        """Up to ``count`` jobs of the first of ``topics`` that has some,
        waiting up to ``wait`` seconds for the first; [] when the wait ends,
        the client hangs up or the server stops."""
        for topic in topics:
            jobs = await self._first.call((topic, ttr), count)
            if jobs:
                return jobs
        if wait <= 0 or self.closing.is_set():
            return []
        loop = asyncio.get_running_loop()
        waiter = _Waiter(count, ttr, loop.time() + wait)
        hub = self._join(topics, waiter)
        stops: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.closing.wait())]
        if hung_up is not None:
            stops.append(asyncio.ensure_future(hung_up.wait()))
        try:
            await asyncio.wait(
                [waiter.jobs, *stops], timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for stop in stops:
                stop.cancel()
            if not waiter.jobs.done():
                waiter.jobs.cancel()  # the hub gives back what it leases for it now
                hub.left()
        return [] if waiter.jobs.cancelled() else waiter.jobs.result()

    def _join(self, topics: tuple[str, ...], waiter: _Waiter) -> _Hub:
        hub = self._hubs.get(topics)
        if hub is None:
            hub = self._hubs[topics] = _Hub(self, topics)
        hub.waiters.append(waiter)
        if hub.task is None:
            hub.task = self._spawn(hub.run())
        return hub

    def hub_done(self, hub: _Hub) -> None:
        if self._hubs.get(hub.topics) is hub:
            del self._hubs[hub.topics]
        if hub.waiters and not self.closing.is_set():  # joined after its last turn
            self._hubs[hub.topics] = hub
            hub.task = self._spawn(hub.run())

    async def give_back(self, jobs: list[Reservation]) -> None:
        """Release leased jobs that no client will get (now, not after their ttr)."""
        for job in jobs:
            try:
                await self.queue.release(job, error="the HTTP client was gone")
            except ChronoqError as exc:
                log.warning("could not give back job %r of %r: %s", job.id, job.topic, exc)

    def give_back_later(self, jobs: list[Reservation]) -> None:
        if jobs:
            self._spawn(self.give_back(jobs))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Answer every waiting request with [] and stop the hubs."""
        self.closing.set()
        for hub in list(self._hubs.values()):
            for waiter in hub.waiters:
                waiter.jobs.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=10)
