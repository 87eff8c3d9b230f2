"""The Redis backend on redis.asyncio: the operations of core.py (the same
ones the blocking backend runs), their round trips made on the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import redis.asyncio

from chronoq.aio.base import AsyncBackend, AsyncWatcher
from chronoq.backends.base import Backend, ReserveResult, StoredSchedule
from chronoq.backends.redis import schedules
from chronoq.backends.redis.aio_link import AsyncLink
from chronoq.backends.redis.aio_watcher import AsyncRedisWatcher
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.steps import REDIS_ERRORS, Pipeline, Steps, translated
from chronoq.backoff import Backoff
from chronoq.errors import ChronoqError
from chronoq.job import EventPage, JobInfo, NewJob, PutResult
from chronoq.states import State

__all__ = ["AsyncRedisBackend"]

T = TypeVar("T")


class AsyncRedisBackend(AsyncBackend):
    """``core``'s operations on ``client``; ``owner``, when given, is the
    blocking backend this one was made from, closed with it."""

    def __init__(
        self, core: RedisCore, client: redis.asyncio.Redis, *, owner: Backend | None = None
    ) -> None:
        self.url = core.url
        self._core = core
        self._client = client
        self._owner = owner
        self._link = AsyncLink(client)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _check_loop(self) -> None:
        """redis.asyncio's connections belong to the loop that opened them:
        used from another loop they fail with a bare RuntimeError, or mix two
        loops' sockets in one pool. Say so, and what to do."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop  # created outside any loop is fine: bound at first use
        elif loop is not self._loop:
            raise ChronoqError(
                f"{self.url}: this AsyncQueue was first used on another event loop; "
                "its connections belong to that loop. Open one AsyncQueue per event "
                "loop (chronoq.aio.connect inside it), and close it there"
            )

    async def _drive(self, steps: Steps[T]) -> T:
        """Run an operation of the core: make each round trip it asks for."""
        self._check_loop()
        reply: Any = None
        try:
            while True:
                request = steps.send(reply)
                if isinstance(request, Pipeline):
                    reply = await self._link.pipeline(request.commands, request.on_reply)
                else:
                    reply = await self._client.execute_command(*request.args)
        except StopIteration as done:
            return cast(T, done.value)
        except REDIS_ERRORS as exc:
            raise translated(self.url, exc) from None

    async def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> list[PutResult]:
        return await self._drive(self._core.put_many(topic, jobs, replace))

    async def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: AsyncWatcher | None = None
    ) -> ReserveResult:
        holder = waiter if isinstance(waiter, AsyncRedisWatcher) else None
        return await self._drive(self._core.reserve(topic, count, ttr_ms, holder))

    async def watch(self, topic: str) -> AsyncWatcher:
        async def release(shards: set[int], token: str) -> None:
            await self._drive(self._core.release(topic, shards, token))

        self._check_loop()
        return AsyncRedisWatcher(self._link, self._core.wake_keys(topic), self.url, release)

    async def ack_many(self, topic: str, leases: Sequence[tuple[str, str]]) -> list[str]:
        return await self._drive(self._core.ack_many(topic, leases))

    async def nack(
        self,
        topic: str,
        job_id: str,
        lease: str,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State:
        return await self._drive(
            self._core.nack(topic, job_id, lease, delay_ms, error, backoff, jitter)
        )

    async def release(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        await self._drive(self._core.give_back(topic, job_id, lease, error))

    async def touch(self, topic: str, job_id: str, lease: str, ttr_ms: int | None) -> int:
        return await self._drive(self._core.touch(topic, job_id, lease, ttr_ms))

    async def bury(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        await self._drive(self._core.bury(topic, job_id, lease, error))

    async def get(self, topic: str, job_id: str) -> JobInfo | None:
        return await self._drive(self._core.get(topic, job_id))

    async def delete(self, topic: str, job_id: str) -> bool:
        return await self._drive(self._core.delete(topic, job_id))

    async def reschedule(
        self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None
    ) -> bool:
        return await self._drive(self._core.reschedule(topic, job_id, delay_ms, run_at_ms))

    async def stats(self, topic: str) -> dict[str, Any]:
        return await self._drive(self._core.stats(topic))

    async def topics(self) -> list[str]:
        return await self._drive(self._core.topics())

    async def dead(self, topic: str, limit: int) -> list[JobInfo]:
        return await self._drive(self._core.dead(topic, limit))

    async def requeue(self, topic: str, ids: Sequence[str] | None) -> int:
        return await self._drive(self._core.requeue(topic, ids))

    async def purge(self, topic: str) -> int:
        return await self._drive(self._core.purge(topic))

    async def set_paused(self, topic: str, paused: bool) -> None:
        await self._drive(self._core.set_paused(topic, paused))

    async def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage:
        return await self._drive(self._core.events(topic, cursor, limit))

    # -- recurring schedules (schedules.py) ------------------------------------------

    async def schedules_put(self, topic: str, name: str, spec: bytes) -> bool:
        return await self._drive(schedules.schedules_put(self._core, topic, name, spec))

    async def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]:
        return await self._drive(schedules.schedules_list(self._core, topic))

    async def schedules_remove(self, topic: str, name: str) -> bool:
        return await self._drive(schedules.schedules_remove(self._core, topic, name))

    async def schedules_mark(self, topic: str, name: str, at_ms: int) -> None:
        await self._drive(schedules.schedules_mark(self._core, topic, name, at_ms))

    async def close(self) -> None:
        await self._client.aclose()
        self._loop = None  # no connection left open: another loop may use it now
        if self._owner is not None:
            self._owner.close()
