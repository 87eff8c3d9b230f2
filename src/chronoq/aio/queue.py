"""AsyncQueue: the asyncio facade, with every method of ``Queue`` as a
coroutine. The argument checks are the same functions (``chronoq.calls``)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from chronoq.aio.giving_back import GivingBack
from chronoq.aio.waiting import WAKE_EARLY_S, wait_for_jobs
from chronoq.backends import StoreURL, open_backend
from chronoq.backends.base import AsyncBackend, AsyncWatcher, ReserveResult, TopicsWatcher
from chronoq.backends.threaded import asyncio_backend
from chronoq.backoff import Backoff
from chronoq.calls import (
    LeaseRef,
    check_limit,
    error_text,
    lease_args,
    leases_of,
    nack_args,
    optional_ttr_ms,
    put_args,
    requeue_ids,
    reschedule_args,
    reserve_args,
)
from chronoq.errors import LeaseLost
from chronoq.job import (
    DEFAULT_MAX_PAYLOAD,
    EventPage,
    Job,
    JobInfo,
    JobLease,
    PutResult,
    Reservation,
    shard_of,
    validate_id,
    validate_topic,
)
from chronoq.queue import Queue
from chronoq.recurring import (
    Recurring,
    RecurringRun,
    check_name,
    encode_spec,
    find_recurring,
    plan_run,
    recurring_list,
)
from chronoq.states import State

__all__ = ["AsyncQueue", "connect"]


def connect(url: str | None = None, *, backoff: Backoff | None = None) -> AsyncQueue:
    """Open an asyncio queue on the store at ``url`` (see ``chronoq.connect``).
    Opening does no I/O: the first call connects."""
    parsed = StoreURL.parse(url)
    max_payload = parsed.pop_int("max_payload", DEFAULT_MAX_PAYLOAD, minimum=1)
    backend = asyncio_backend(open_backend(parsed), owned=True)
    return AsyncQueue(backend, max_payload=max_payload, backoff=backoff)


class AsyncQueue:
    """A delay queue on one store, for asyncio. Use it from one event loop."""

    def __init__(
        self,
        backend: AsyncBackend,
        *,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        backoff: Backoff | None = None,
    ) -> None:
        self.backend = backend
        self.max_payload = max_payload
        self.backoff = backoff or Backoff()
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

    @property
    def url(self) -> str:
        """The store URL, without any password."""
        return self.backend.url

    @property
    def shards(self) -> int:
        """How many shards the store spreads a topic's jobs over (SQLite: 1)."""
        return self.backend.shards

    def shard_of(self, job_id: str) -> int:
        """The shard a job of this id is kept in (DESIGN §2: jobs are ordered within a shard)."""
        return shard_of(job_id, self.backend.shards)

    def __repr__(self) -> str:
        return f"<chronoq.aio.AsyncQueue {self.url}>"

    async def close(self) -> None:
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

    # -- producing -----------------------------------------------------------

    async def put(
        self,
        topic: str,
        payload: Any = None,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
        id: str | None = None,
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
        unique_for: float = 0.0,
        replace: bool = False,
    ) -> PutResult:
        """See ``Queue.put``."""
        job = Job(payload, delay, run_at, id, priority, ttr, max_attempts, unique_for)
        return (await self._put(topic, [job], replace, batch=False))[0]

    async def put_many(
        self, topic: str, jobs: Iterable[Job], *, replace: bool = False
    ) -> list[PutResult]:
        """See ``Queue.put_many``."""
        return await self._put(topic, list(jobs), replace, batch=True)

    async def _put(
        self, topic: str, jobs: list[Job], replace: bool, batch: bool
    ) -> list[PutResult]:
        prepared = put_args(topic, jobs, self.max_payload, batch)
        return await self.backend.put_many(topic, prepared, bool(replace)) if prepared else []

    # -- consuming -------------------------------------------------------------

    async def reserve(
        self, topic: str, count: int = 1, *, wait: float = 0.0, ttr: float | None = None
    ) -> list[Reservation]:
        """See ``Queue.reserve``. Cancelling a waiting reserve is safe: no job
        is leased by a call that did not return."""
        wait_s, ttr_ms = reserve_args(topic, count, wait, ttr)
        end = time.monotonic() + wait_s
        watcher = await self.backend.watch(topic) if wait_s > 0 else None
        jobs: list[Reservation] = []
        try:
            while True:
                result = await self._reserve_or_give_back(topic, count, ttr_ms, watcher)
                remaining = end - time.monotonic()
                if result.jobs or watcher is None or remaining <= 0:
                    jobs = result.jobs
                    break
                # a due time's last 2 ms on the loop's timer, with no attempt
                # before it and no spinning: N waiters on a topic cost nothing more
                await wait_for_jobs(watcher, result, remaining, to_the_tick=False)
        finally:
            if watcher is not None:
                try:
                    await watcher.close()
                except asyncio.CancelledError:  # cancelled with the jobs in hand
                    self._give_back(jobs)
                    raise
        return jobs

    async def _reserve_or_give_back(
        self, topic: str, count: int, ttr_ms: int | None, watcher: AsyncWatcher | None
    ) -> ReserveResult:
        """``reserve_once``'s attempt (its arguments checked by the caller)."""
        call = asyncio.ensure_future(self.backend.reserve(topic, count, ttr_ms, watcher))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            # the call went out and may lease jobs that nobody would see until
            # their ttr ran out: let it finish and give them back at once
            self._give_back(call)
            raise

    async def watch(self, topic: str) -> AsyncWatcher:
        """See ``Queue.watch``."""
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
        """See ``Queue.reserve_once``. Cancelling it may leave jobs leased
        (``reserve`` gives them back)."""
        _, ttr_ms = reserve_args(topic, count, 0.0, ttr)
        return await self.backend.reserve(topic, count, ttr_ms, watcher)

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

    async def ack(self, job: LeaseRef, id: str | None = None, lease: str | None = None) -> None:
        """See ``Queue.ack``."""
        held = lease_args(job, id, lease)
        if await self.backend.ack_many([held]):
            raise LeaseLost(held.topic, held.id)

    async def ack_many(self, jobs: Iterable[Reservation | JobLease]) -> list[str]:
        """See ``Queue.ack_many``."""
        leases = leases_of(jobs)
        return await self.backend.ack_many(leases) if leases else []

    async def nack(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        delay: float | None = None,
        error: object = None,
        backoff: Backoff | None = None,
    ) -> State:
        """See ``Queue.nack``."""
        held = lease_args(job, id, lease)
        delay_ms, curve = nack_args(delay, backoff, self.backoff)
        return await self.backend.nack(held, delay_ms, error_text(error), curve, random.random())

    async def release(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """See ``Queue.release``."""
        await self.backend.release(lease_args(job, id, lease), error_text(error))

    async def touch(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        ttr: float | None = None,
    ) -> int:
        """See ``Queue.touch``."""
        return await self.backend.touch(lease_args(job, id, lease), optional_ttr_ms(ttr))

    async def bury(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """See ``Queue.bury``."""
        await self.backend.bury(lease_args(job, id, lease), error_text(error))

    # -- by id -------------------------------------------------------------------

    async def get(self, topic: str, id: str) -> JobInfo | None:
        """See ``Queue.get``."""
        return await self.backend.get(validate_topic(topic), validate_id(id))

    async def delete(self, topic: str, id: str) -> bool:
        """See ``Queue.delete``."""
        return await self.backend.delete(validate_topic(topic), validate_id(id))

    async def reschedule(
        self,
        topic: str,
        id: str,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
    ) -> bool:
        """See ``Queue.reschedule``."""
        delay_ms, at_ms = reschedule_args(topic, id, delay, run_at)
        return await self.backend.reschedule(topic, id, delay_ms, at_ms)

    # -- topic-wide --------------------------------------------------------------

    async def stats(self, topic: str, *, per_shard: bool = False) -> dict[str, Any]:
        """See ``Queue.stats``."""
        return await self.backend.stats(validate_topic(topic), per_shard)

    async def topics(self) -> list[str]:
        """See ``Queue.topics``."""
        return await self.backend.topics()

    async def dead(self, topic: str, limit: int = 100) -> list[JobInfo]:
        """See ``Queue.dead``."""
        check_limit(limit)
        return await self.backend.dead(validate_topic(topic), limit)

    async def requeue(self, topic: str, ids: Sequence[str] | None = None) -> int:
        """See ``Queue.requeue``."""
        return await self.backend.requeue(topic, requeue_ids(topic, ids))

    async def purge(self, topic: str) -> int:
        """See ``Queue.purge``."""
        return await self.backend.purge(validate_topic(topic))

    async def pause(self, topic: str) -> None:
        """See ``Queue.pause``."""
        await self.backend.set_paused(validate_topic(topic), True)

    async def resume(self, topic: str) -> None:
        """See ``Queue.resume``."""
        await self.backend.set_paused(validate_topic(topic), False)

    async def events(
        self, topic: str | None = None, *, cursor: str | None = None, limit: int = 1000
    ) -> EventPage:
        """See ``Queue.events``."""
        check_limit(limit)
        return await self.backend.events(
            None if topic is None else validate_topic(topic), cursor, limit
        )

    # -- recurring jobs ----------------------------------------------------------------

    async def recurring(
        self,
        topic: str,
        *,
        name: str,
        cron: str | None = None,
        every: float | None = None,
        payload: Any = None,
        tz: str = "UTC",
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
    ) -> Recurring:
        """See ``Queue.recurring``."""
        spec = encode_spec(
            topic, name, cron, every, payload, tz, priority, ttr, max_attempts, self.max_payload
        )
        await self.backend.schedules_put(topic, name, spec)
        return find_recurring(topic, name, *await self.backend.schedules_list(topic))

    async def recurring_list(self, topic: str) -> list[Recurring]:
        """See ``Queue.recurring_list``."""
        validate_topic(topic)
        return recurring_list(topic, *await self.backend.schedules_list(topic))

    async def recurring_remove(self, topic: str, name: str) -> bool:
        """See ``Queue.recurring_remove``."""
        return await self.backend.schedules_remove(validate_topic(topic), check_name(name))

    async def run_recurring(self, topic: str) -> RecurringRun:
        """See ``Queue.run_recurring``."""
        validate_topic(topic)
        plan = plan_run(topic, *await self.backend.schedules_list(topic))
        results = await self.backend.put_many(topic, plan.jobs, False) if plan.jobs else []
        for name, at_ms in plan.marks:
            await self.backend.schedules_mark(topic, name, at_ms)
        return plan.done(results)
