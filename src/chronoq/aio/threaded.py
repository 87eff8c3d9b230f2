"""Any synchronous backend, off the event loop: each call runs in a thread of
a small pool, and each wait in a thread of its own pool, so that consumers
waiting for jobs never hold up a put or an ack."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from chronoq.aio.base import AsyncBackend, AsyncWatcher
from chronoq.backends.base import Backend, ReserveResult, StoredSchedule, Watcher
from chronoq.backoff import Backoff
from chronoq.job import EventPage, JobInfo, NewJob, PutResult
from chronoq.states import State

__all__ = ["ThreadedBackend"]

T = TypeVar("T")
CALL_THREADS = 8
WAIT_THREADS = 64


class ThreadedWatcher(AsyncWatcher):
    def __init__(self, owner: ThreadedBackend, inner: Watcher) -> None:
        self._owner = owner
        self.inner = inner

    async def wait(self, timeout: float) -> bool:
        try:
            return await self._owner._in_thread(self._owner._waits, self.inner.wait, timeout)
        except asyncio.CancelledError:
            self.inner.interrupt()  # frees the thread now, not at the timeout
            raise

    async def close(self) -> None:
        await self._owner._call(self.inner.close)


class ThreadedBackend(AsyncBackend):
    """``backend``'s methods as coroutines. ``owned``: closing this closes it."""

    def __init__(self, backend: Backend, *, owned: bool = True) -> None:
        self.backend = backend
        self.url = backend.url
        self._owned = owned
        self._calls = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="chronoq-call")
        self._waits = ThreadPoolExecutor(WAIT_THREADS, thread_name_prefix="chronoq-wait")

    async def _in_thread(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(fn, *args))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._in_thread(self._calls, fn, *args)

    async def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> list[PutResult]:
        return await self._call(self.backend.put_many, topic, jobs, replace)

    async def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: AsyncWatcher | None = None
    ) -> ReserveResult:
        inner = waiter.inner if isinstance(waiter, ThreadedWatcher) else None
        return await self._call(self.backend.reserve, topic, count, ttr_ms, inner)

    async def watch(self, topic: str) -> AsyncWatcher:
        return ThreadedWatcher(self, await self._call(self.backend.watch, topic))

    async def ack_many(self, topic: str, leases: Sequence[tuple[str, str]]) -> list[str]:
        return await self._call(self.backend.ack_many, topic, leases)

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
        return await self._call(
            self.backend.nack, topic, job_id, lease, delay_ms, error, backoff, jitter
        )

    async def release(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        await self._call(self.backend.release, topic, job_id, lease, error)

    async def touch(self, topic: str, job_id: str, lease: str, ttr_ms: int | None) -> int:
        return await self._call(self.backend.touch, topic, job_id, lease, ttr_ms)

    async def bury(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        await self._call(self.backend.bury, topic, job_id, lease, error)

    async def get(self, topic: str, job_id: str) -> JobInfo | None:
        return await self._call(self.backend.get, topic, job_id)

    async def delete(self, topic: str, job_id: str) -> bool:
        return await self._call(self.backend.delete, topic, job_id)

    async def reschedule(
        self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None
    ) -> bool:
        return await self._call(self.backend.reschedule, topic, job_id, delay_ms, run_at_ms)

    async def stats(self, topic: str) -> dict[str, Any]:
        return await self._call(self.backend.stats, topic)

    async def topics(self) -> list[str]:
        return await self._call(self.backend.topics)

    async def dead(self, topic: str, limit: int) -> list[JobInfo]:
        return await self._call(self.backend.dead, topic, limit)

    async def requeue(self, topic: str, ids: Sequence[str] | None) -> int:
        return await self._call(self.backend.requeue, topic, ids)

    async def purge(self, topic: str) -> int:
        return await self._call(self.backend.purge, topic)

    async def set_paused(self, topic: str, paused: bool) -> None:
        await self._call(self.backend.set_paused, topic, paused)

    async def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage:
        return await self._call(self.backend.events, topic, cursor, limit)

    async def schedules_put(self, topic: str, name: str, spec: bytes) -> bool:
        return await self._call(self.backend.schedules_put, topic, name, spec)

    async def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]:
        return await self._call(self.backend.schedules_list, topic)

    async def schedules_remove(self, topic: str, name: str) -> bool:
        return await self._call(self.backend.schedules_remove, topic, name)

    async def schedules_mark(self, topic: str, name: str, at_ms: int) -> None:
        await self._call(self.backend.schedules_mark, topic, name, at_ms)

    async def close(self) -> None:
        if self._owned:
            await self._call(self.backend.close)
        self._calls.shutdown(wait=False)
        self._waits.shutdown(wait=False)
