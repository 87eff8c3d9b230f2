"""AsyncClient: the methods of ``chronoq.Client`` as coroutines, on httpx's
asyncio client. The operations themselves are in ops.py, shared with Client."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

import chronoq.tracing as tracing
from chronoq.calls.call import Awaiting, Call
from chronoq.calls.surface import Operations
from chronoq.http import ops
from chronoq.http.ops import Request, Steps
from chronoq.http.transport import Settings

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient(Awaiting, Operations):
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
        """Close the connections to the server."""
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

    async def _perform(self, call: Call[T]) -> T:
        return await self._run(ops.steps_of(call, self.settings))

    async def _run(self, steps: Steps[T]) -> T:
        """Run the requests of an operation (ops.py): send each one."""
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
                    headers=tracing.outgoing_headers(),
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
