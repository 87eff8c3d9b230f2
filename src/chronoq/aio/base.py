"""The asyncio Backend contract: the methods of ``chronoq.backends.Backend``
as coroutines. Implementations: the native Redis one (redis.asyncio), and
``ThreadedBackend``, which runs any synchronous backend off the event loop
(SQLite)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from chronoq.backends.base import ReserveResult, StoredSchedule
from chronoq.backoff import Backoff
from chronoq.job import EventPage, JobInfo, NewJob, PutResult
from chronoq.states import State

__all__ = ["AsyncBackend", "AsyncWatcher"]


class AsyncWatcher(ABC):
    """Taken before a reserve attempt; ``wait`` returns as soon as anything
    that could make a job available happened since, or after ``timeout``
    seconds. It may be reused for many waits; cancelling a wait is safe."""

    @abstractmethod
    async def wait(self, timeout: float) -> bool:
        """True when woken by a change, False on timeout."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the watcher holds."""


class AsyncBackend(ABC):
    """See ``chronoq.backends.base.Backend`` for what each method does."""

    url: str

    @abstractmethod
    async def put_many(
        self, topic: str, jobs: Sequence[NewJob], replace: bool
    ) -> list[PutResult]: ...

    @abstractmethod
    async def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: AsyncWatcher | None = None
    ) -> ReserveResult: ...

    @abstractmethod
    async def watch(self, topic: str) -> AsyncWatcher: ...

    @abstractmethod
    async def ack_many(self, topic: str, leases: Sequence[tuple[str, str]]) -> list[str]: ...

    @abstractmethod
    async def nack(
        self,
        topic: str,
        job_id: str,
        lease: str,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State: ...

    @abstractmethod
    async def release(self, topic: str, job_id: str, lease: str, error: str | None) -> None: ...

    @abstractmethod
    async def touch(self, topic: str, job_id: str, lease: str, ttr_ms: int | None) -> int: ...

    @abstractmethod
    async def bury(self, topic: str, job_id: str, lease: str, error: str | None) -> None: ...

    @abstractmethod
    async def get(self, topic: str, job_id: str) -> JobInfo | None: ...

    @abstractmethod
    async def delete(self, topic: str, job_id: str) -> bool: ...

    @abstractmethod
    async def reschedule(
        self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None
    ) -> bool: ...

    @abstractmethod
    async def stats(self, topic: str) -> dict[str, Any]: ...

    @abstractmethod
    async def topics(self) -> list[str]: ...

    @abstractmethod
    async def dead(self, topic: str, limit: int) -> list[JobInfo]: ...

    @abstractmethod
    async def requeue(self, topic: str, ids: Sequence[str] | None) -> int: ...

    @abstractmethod
    async def purge(self, topic: str) -> int: ...

    @abstractmethod
    async def set_paused(self, topic: str, paused: bool) -> None: ...

    @abstractmethod
    async def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage: ...

    @abstractmethod
    async def schedules_put(self, topic: str, name: str, spec: bytes) -> bool: ...

    @abstractmethod
    async def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]: ...

    @abstractmethod
    async def schedules_remove(self, topic: str, name: str) -> bool: ...

    @abstractmethod
    async def schedules_mark(self, topic: str, name: str, at_ms: int) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...
