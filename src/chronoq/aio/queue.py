"""AsyncQueue: the asyncio facade. Its operations are those of ``Queue``,
defined once in ``chronoq.calls``, as coroutines; this module awaits their
steps, and holds what is its own: opening on a store (natively or in
threads), giving back what a cancelled reserve leased, and the watchers and
waits of a consumer with its own loop (the worker, the server's pop)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

from chronoq.aio.giving_back import GivingBack
from chronoq.aio.waiting import WAKE_EARLY_S, wait_for_jobs
from chronoq.backends import StoreURL, open_backend
from chronoq.backends.base import AsyncBackend, AsyncWatcher, ReserveResult, TopicsWatcher
from chronoq.backends.threaded import asyncio_backend
from chronoq.backoff import Backoff
from chronoq.calls.call import (
    Awaiting,
    Call,
    Close,
    GiveBack,
    Lease,
    Step,
    StoreSteps,
    Use,
    Wait,
    await_steps,
)
from chronoq.calls.consuming import ReserveOnce
from chronoq.calls.on_store import OnStore
from chronoq.job import DEFAULT_MAX_PAYLOAD, validate_topic
from chronoq.queue import Queue

__all__ = ["AsyncQueue", "connect"]

T = TypeVar("T")


def connect(url: str | None = None, *, backoff: Backoff | None = None) -> AsyncQueue:
    """Open an asyncio queue on the store at ``url`` (see ``chronoq.connect``).
    Opening does no I/O: the first call connects."""
    parsed = StoreURL.parse(url)
    max_payload = parsed.pop_int("max_payload", DEFAULT_MAX_PAYLOAD, minimum=1)
    backend = asyncio_backend(open_backend(parsed), owned=True)
    return AsyncQueue(backend, max_payload=max_payload, backoff=backoff)


class AsyncQueue(Awaiting, OnStore[AsyncBackend]):
    """A delay queue on one store, for asyncio. Use it from one event loop."""

    def __init__(
        self,
        backend: AsyncBackend,
        *,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__(backend, max_payload=max_payload, backoff=backoff)
        self._give_back = GivingBack(
            lambda job: self.release(job, error="the reserve was cancelled")
        )

    @classmethod
    def from_queue(cls, queue: Queue) -> AsyncQueue:
        """An asyncio queue on the same store as ``queue``, with its settings.
        Closing it leaves ``queue`` open."""
        return cls(
            asyncio_backend(queue.backend, owned=False),
            max_payload=queue.max_payload,
            backoff=queue.backoff,
        )

    def __repr__(self) -> str:
        return f"<chronoq.aio.AsyncQueue {self.url}>"

    async def close(self) -> None:
        """Close the store (its connections, its watchers)."""
        await self.backend.close()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- a consumer with its own wait loop ------------------------------------------

    async def watch(self, topic: str) -> AsyncWatcher:
        """A watcher of the topic, for a consumer with its own wait loop: take
        it before ``reserve_once``; its ``wait(timeout)`` returns when a job
        may have become available since. ``close`` it when done."""
        return await self.backend.watch(validate_topic(topic))

    async def watch_topics(self, topics: Sequence[str]) -> TopicsWatcher:
        """``watch`` of several topics that wait as one (backends/watchers.py):
        each ``reserve_once`` takes ``of(topic)``. asyncio only (the server's pop)."""
        return await self.backend.watch_topics([validate_topic(topic) for topic in topics])

    async def reserve_once(
        self,
        topic: str,
        count: int = 1,
        *,
        ttr: float | None = None,
        watcher: AsyncWatcher | None = None,
    ) -> ReserveResult:
        return await self._perform(ReserveOnce(topic, count, ttr=ttr, watcher=watcher))

    reserve_once.__doc__ = ReserveOnce.__doc__

    async def wait_for_jobs(
        self,
        watcher: AsyncWatcher,
        result: ReserveResult,
        limit: float,
        *,
        early: float = WAKE_EARLY_S,
    ) -> None:
        """After ``result`` (of ``reserve_once``) leased nothing, return when a
        job may be available: on a change that ``watcher`` sees, or at the
        next due time; after ``limit`` seconds at the most. A due time is
        timed on the store until ``early`` seconds before it, and the rest on
        the event loop, to the tick (the worker's way: a loop timer wakes up
        to 1 ms late). An attempt then may still find nothing: loop."""
        await wait_for_jobs(watcher, result, limit, early=early)

    # -- performing calls: each step awaited -------------------------------------------

    async def _perform(self, call: Call[T]) -> T:
        steps = call.store(self)
        if type(steps) is Use:  # one backend call: no steps to run
            answer = await getattr(self.backend, steps.name)(*steps.args)
            return cast(T, answer if steps.then is None else steps.then(answer))
        if type(steps) is Lease:
            return cast(T, await self._step(steps))
        return await await_steps(cast("StoreSteps[T]", steps), self._step)

    async def _step(self, step: Step) -> Any:
        # the watchers in steps are this facade's own (from watch): AsyncWatcher
        if type(step) is Use:
            answer = await getattr(self.backend, step.name)(*step.args)
            return answer if step.then is None else step.then(answer)
        if type(step) is Lease:
            result = await self._lease(step)
            return result if step.then is None else step.then(result)
        if type(step) is Wait:
            # a due time's last 2 ms on the loop's timer, with no attempt
            # before it and no spinning: N waiters on a topic cost nothing more
            watcher = cast(AsyncWatcher, step.watcher)
            return await wait_for_jobs(watcher, step.result, step.limit, to_the_tick=False)
        if type(step) is Close:
            return await cast(AsyncWatcher, step.watcher).close()
        if type(step) is GiveBack:
            return self._give_back(step.jobs)
        raise TypeError(f"not a step of a store: {step!r}")

    async def _lease(self, step: Lease) -> ReserveResult:
        call = asyncio.ensure_future(self.backend.reserve(*step.args))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            # the call went out and may lease jobs that nobody would see until
            # their ttr ran out: let it finish and give them back at once
            self._give_back(call)
            raise
