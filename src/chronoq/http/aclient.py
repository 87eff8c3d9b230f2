"""AsyncClient: the methods of ``chronoq.Client`` as coroutines, on httpx's
asyncio client. The operations themselves are in ops.py, shared with Client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from chronoq.calls import LeaseRef
from chronoq.http import ops
from chronoq.http.ops import Request, Steps
from chronoq.http.transport import Settings
from chronoq.job import Job, JobInfo, JobLease, PutResult, Reservation
from chronoq.states import State

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """``Client`` for asyncio: the same methods as coroutines. Use it from one
    event loop; cancelling a waiting ``reserve`` hangs up, and the server
    gives back any job it had leased for it.

    Its arguments are those of ``Client``."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        long_poll: float = 30.0,
        max_batch: int = 1000,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = Settings(base_url, token, timeout, retries, long_poll, max_batch)
        self._http = httpx.AsyncClient(
            base_url=self.settings.url, headers=self.settings.headers(), transport=transport
        )

    @property
    def url(self) -> str:
        """The server's root URL."""
        return self.settings.url

    def __repr__(self) -> str:
        return f"<chronoq.http.AsyncClient {self.url}>"

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the driver ----------------------------------------------------------------

    async def _run(self, steps: Steps[T]) -> T:
        """Run an operation of ops.py: send each request it yields."""
        try:
            request = next(steps)
            while True:
                request = steps.send(await self._send(request))
        except StopIteration as done:
            return cast(T, done.value)
        finally:
            steps.close()

    async def _send(self, request: Request) -> Any:
        settings = self.settings
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    request.method,
                    request.path,
                    content=request.body,
                    params=request.params,
                    timeout=settings.timeout_of(request),
                )
            except httpx.TransportError as exc:
                pause = settings.pause_after_failure(request, attempt, exc)
                if pause is None:
                    raise settings.failure(request, exc) from None
            else:
                status = response.status_code
                pause = settings.pause_after_answer(request, attempt, status, response.headers)
                if pause is None:
                    return settings.answer(request, status, response.content)
            await asyncio.sleep(pause)
            attempt += 1

    # -- producing -----------------------------------------------------------------

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
        """See ``Client.put``."""
        job = Job(payload, delay, run_at, id, priority, ttr, max_attempts, unique_for)
        return await self._run(ops.put(topic, job, replace))

    async def put_many(
        self, topic: str, jobs: Iterable[Job], *, replace: bool = False
    ) -> list[PutResult]:
        """See ``Client.put_many``."""
        return await self._run(ops.put_many(topic, jobs, replace))

    # -- consuming -------------------------------------------------------------------

    async def reserve(
        self, topic: str, count: int = 1, *, wait: float = 0.0, ttr: float | None = None
    ) -> list[Reservation]:
        """See ``Client.reserve``."""
        return await self._run(ops.reserve(topic, count, wait, ttr, self.settings.long_poll))

    async def ack(self, job: LeaseRef, id: str | None = None, lease: str | None = None) -> None:
        """See ``Client.ack``."""
        await self._run(ops.ack(job, id, lease))

    async def ack_many(self, jobs: Iterable[Reservation | JobLease]) -> list[str]:
        """See ``Client.ack_many``."""
        return await self._run(ops.ack_many(jobs, self.settings.max_batch))

    async def nack(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        delay: float | None = None,
        error: object = None,
    ) -> State:
        """See ``Client.nack``."""
        return await self._run(ops.nack(job, id, lease, delay, error))

    async def release(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """See ``Client.release``."""
        await self._run(ops.release(job, id, lease, error))

    async def touch(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        ttr: float | None = None,
    ) -> int:
        """See ``Client.touch``."""
        return await self._run(ops.touch(job, id, lease, ttr))

    async def bury(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """See ``Client.bury``."""
        await self._run(ops.bury(job, id, lease, error))

    # -- by id -----------------------------------------------------------------------

    async def get(self, topic: str, id: str) -> JobInfo | None:
        """See ``Client.get``."""
        return await self._run(ops.get(topic, id))

    async def delete(self, topic: str, id: str) -> bool:
        """See ``Client.delete``."""
        return await self._run(ops.delete(topic, id))

    async def reschedule(
        self,
        topic: str,
        id: str,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
    ) -> bool:
        """See ``Client.reschedule``."""
        return await self._run(ops.reschedule(topic, id, delay, run_at))

    # -- topic-wide --------------------------------------------------------------------

    async def stats(self, topic: str) -> dict[str, Any]:
        """See ``Client.stats``."""
        return await self._run(ops.stats(topic))

    async def topics(self) -> list[str]:
        """See ``Client.topics``."""
        return await self._run(ops.topics())

    async def dead(self, topic: str, limit: int = 100) -> list[JobInfo]:
        """See ``Client.dead``."""
        return await self._run(ops.dead(topic, limit))

    async def requeue(self, topic: str, ids: Sequence[str] | None = None) -> int:
        """See ``Client.requeue``."""
        return await self._run(ops.requeue(topic, ids))

    async def purge(self, topic: str) -> int:
        """See ``Client.purge``."""
        return await self._run(ops.purge(topic))

    async def pause(self, topic: str) -> None:
        """See ``Client.pause``."""
        await self._run(ops.set_paused(topic, True))

    async def resume(self, topic: str) -> None:
        """See ``Client.resume``."""
        await self._run(ops.set_paused(topic, False))
