"""The server's HTTP connections: uvicorn's httptools protocol with the
bounds it lacks, and the uvicorn config that ``chronoq serve`` runs with.

uvicorn closes a keep-alive connection that stays idle after an answer
(``timeout_keep_alive``), but never one that has sent nothing, or half a
request head: each holds a descriptor and a parser for as long as its
client likes (a thousand of them were open after 32 s in the probe of issue
24). Here a request head must be complete within ``limits.head_timeout`` of
the connection's opening, or of the first byte of a later request on it;
else the connection is answered 408 and closed. A request that arrives while
``limits.max_connections`` connections are open is answered 503 (the API's
JSON) and its connection closed, so a flood of connections costs each of
them one short answer, and the server's descriptors stay bounded."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from chronoq.server.asgi import ASGIApp, Receive, Scope, Send
from chronoq.server.problems import RETRY_AFTER_S, ApiError
from chronoq.server.settings import Limits
from chronoq.server.wire import ENCODER

__all__ = ["BoundedHttp", "ServerConfig"]

log = logging.getLogger("chronoq")


class ServerConfig(uvicorn.Config):
    """uvicorn's config, with the server's limits for ``BoundedHttp`` (a
    config is pickled to each ``--workers`` process, and so are these)."""

    def __init__(self, app: Any, *, limits: Limits, **options: Any) -> None:
        super().__init__(
            app,
            http=BoundedHttp,
            timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]  # a float works
            **options,
        )
        self.limits = limits


def _timed_out(problem: ApiError) -> bytes:
    """A 408 answer, written straight to the transport: no request to answer."""
    body = ENCODER.encode(problem.body())
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _busy(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to a request over ``max_connections``; its connection closes."""
    problem = ApiError(
        503, "too_many_connections", "this server has as many connections open as it "
        "takes (limits.max_connections): try again in a moment",
    )  # fmt: skip
    body = ENCODER.encode(problem.body())
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_S).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_BUSY: ASGIApp = _busy


class BoundedHttp(HttpToolsProtocol):
    """httptools' protocol with a head timeout and a connection cap."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        limits = getattr(config, "limits", None) or Limits()
        self._head_timeout = limits.head_timeout
        self._max_connections = limits.max_connections
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        # the first byte of a request after an answer: its head is timed from here
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm_head_timer()
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        if len(self.connections) <= self._max_connections:
            super().on_headers_complete()
            return
        # uvicorn starts the request's task with self.app; this one, with _BUSY
        app, self.app = self.app, _BUSY
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self._head_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        problem = ApiError(
            408, "timeout", f"the request's head did not arrive within {self._head_timeout:g} s "
            "(limits.head_timeout): the connection is closed",
        )  # fmt: skip
        self.transport.write(_timed_out(problem))
        self.transport.close()
