"""Client: the methods of ``chronoq.Queue`` over the HTTP API of ``chronoq
serve``, on blocking httpx. The operations themselves are in ops.py."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

import chronoq.tracing as tracing
from chronoq.calls.call import Blocking, Call
from chronoq.calls.surface import Operations
from chronoq.http import ops
from chronoq.http.ops import Request, Steps
from chronoq.http.transport import Settings

__all__ = ["Client"]

T = TypeVar("T")


class Client(Blocking, Operations):
    """A delay queue behind a chronoq server, with the methods of ``Queue``
    that the HTTP API has, the same arguments, values and typed errors.

    ``base_url``: the server's root (``http://127.0.0.1:7070``); ``token``:
    a bearer token when the server has a config with tokens. ``timeout``:
    seconds to connect, send, and wait for an answer (a long poll waits its
    ``wait`` more). ``retries``: how many times a read (get, stats, topics,
    dead) or pause/resume is sent again after a 502/503/504 (after its
    Retry-After) or a dropped connection, and any call after a refused
    connection. ``long_poll``: the longest one reserve request waits (at most
    the server's ``limits.max_wait``, 60 s by default); a longer ``wait`` is
    made of several. ``max_batch``: the server's ``limits.max_batch``, the
    size of each request of ``ack_many``. Safe to share between threads."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        long_poll: float = 30.0,
        max_batch: int = 1000,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings(base_url, token, timeout, retries, long_poll, max_batch)
        self._http = httpx.Client(
            base_url=self.settings.url, headers=self.settings.headers(), transport=transport
        )

    @property
    def url(self) -> str:
        """The server's root URL."""
        return self.settings.url

    def __repr__(self) -> str:
        return f"<chronoq.http.Client {self.url}>"

    def close(self) -> None:
        """Close the connections to the server."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the driver ----------------------------------------------------------------

    def _perform(self, call: Call[T]) -> T:
        return self._run(ops.steps_of(call, self.settings))

    def _run(self, steps: Steps[T]) -> T:
        """Run the requests of an operation (ops.py): send each one."""
        try:
            request = next(steps)
            while True:
                request = steps.send(self._send(request))
        except StopIteration as done:
            return cast(T, done.value)
        finally:
            steps.close()

    def _send(self, request: Request) -> Any:
        settings = self.settings
        attempt = 0
        while True:
            try:
                response = self._http.request(
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
            time.sleep(pause)
            attempt += 1
