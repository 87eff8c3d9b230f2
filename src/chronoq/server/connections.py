"""The server's HTTP connections: uvicorn's httptools protocol with the
bounds it lacks, and the uvicorn config that ``chronoq serve`` runs with.

uvicorn closes a keep-alive connection that stays idle after an answer
(``timeout_keep_alive``), but never one that has sent nothing, or half a
request: each holds a descriptor and a parser for as long as its client
likes (a thousand of them were open after 32 s in the probe of issue 24).
Here a request's head must be in within ``limits.head_timeout`` of the
connection's opening, or of the first byte of a later request on it, and
its body within ``limits.body_timeout`` of its head; else it is answered 408
and the connection closed. A connection opened while
``limits.max_connections`` are open is answered 503 at once and closed, so
the server's descriptors stay bounded however many a client opens. With
TLS (``--ssl-*``) all of this starts once the handshake is done: a
connection that never finishes one is closed by the event loop's own
handshake timeout (uvloop: 60 s), so a server exposed to untrusted clients
is better behind a proxy that ends TLS.

The deadlines are kept as numbers, set in one override of
``data_received``, and checked by one sweep per server a few times per
timeout: with a timer per request (armed, then cancelled) and an asyncio
timeout around each body, the put's share of hello-world fell from
0.36-0.40 to 0.31-0.33 on Redis in two A/B runs of bench/http/run.py."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from chronoq.server.settings import Limits
from chronoq.server.web.problems import ApiError
from chronoq.server.wire import ENCODER

__all__ = ["BoundedHttp", "ServerConfig"]

log = logging.getLogger("chronoq")

_REFUSED_S = 1.0  # a refused connection is closed this long after its answer at most


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


def _answer(status: int, reason: str, problem: ApiError) -> bytes:
    """An answer written straight to the transport, closing the connection."""
    body = ENCODER.encode(problem.body())
    head = [f"HTTP/1.1 {status} {reason}", "content-type: application/json"]
    head += [f"{name.decode()}: {value.decode()}" for name, value in problem.headers()]
    head += [f"content-length: {len(body)}", "connection: close", "", ""]
    return "\r\n".join(head).encode() + body


_BUSY = _answer(
    503, "Service Unavailable", ApiError(
        503, "too_many_connections", "this server has as many connections open as it takes "
        "(limits.max_connections): try again in a moment",
    ),
)  # fmt: skip


class BoundedHttp(HttpToolsProtocol):
    """httptools' protocol with head and body timeouts and a connection cap."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._limits: Limits = getattr(config, "limits", None) or Limits()
        # while a request is coming in: when it began, and whether its head is in
        self._since: float | None = None
        self._head_in = False
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._since = self.loop.time()
        _sweep_for(self)
        if len(self.connections) > self._limits.max_connections:
            self._refuse()

    def data_received(self, data: bytes) -> None:
        # one override, not one per parser callback: this runs per request
        if self._refused:
            return  # whatever it sent, the answer is out
        before = self.cycle
        if self._since is None and (before is None or before.response_complete):
            self._since = self.loop.time()  # the first byte of the next request
        super().data_received(data)
        cycle = self.cycle
        if cycle is not before and cycle is not None:  # a head came in
            # its body is timed from here; not one pipelined behind an answer
            # still going (uvicorn reads it only after that answer)
            pipelined = before is not None and not before.response_complete
            self._head_in = cycle.more_body and not pipelined
            self._since = self.loop.time() if self._head_in else None
        elif self._head_in and cycle is not None and not cycle.more_body:
            self._since, self._head_in = None, False  # the rest of its body

    def eof_received(self) -> None:
        if self._refused:
            self.transport.close()  # the client read the answer and closed

    def _refuse(self) -> None:
        """The 503 now, then a close (after the client's, so that the answer
        is not lost to a reset; ``_REFUSED_S`` at the most)."""
        self._refused = True
        self.transport.write(_BUSY)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def overdue(self, now: float) -> None:
        """Close this connection if its request is late (the sweep's call)."""
        since = self._since
        if since is None or self.transport.is_closing():
            return
        if self._refused:
            if now - since > _REFUSED_S:
                self.transport.close()
            return
        part = "body" if self._head_in else "head"
        limit = self._limits.body_timeout if self._head_in else self._limits.head_timeout
        if now - since <= limit:
            return
        self._since = None
        if self.cycle is not None and self._head_in and self.cycle.response_started:
            self.transport.close()  # answered already (a refusal before the body)
            return
        problem = ApiError(
            408, "timeout", f"the request's {part} did not arrive within {limit:g} s "
            f"(limits.{part}_timeout): the connection is closed",
        )  # fmt: skip
        self.transport.write(_answer(408, "Request Timeout", problem))
        self.transport.close()


# each server's sweep (tests run several servers in one process)
_SWEEPS: weakref.WeakKeyDictionary[ServerState, asyncio.Task[None]] = weakref.WeakKeyDictionary()


def _sweep_for(protocol: BoundedHttp) -> None:
    """Start the sweep of ``protocol``'s server, once per server."""
    state = protocol.server_state
    if state not in _SWEEPS:
        limits = protocol._limits
        every = min(max(min(limits.head_timeout, limits.body_timeout) / 4, 0.05), 1.0)
        _SWEEPS[state] = protocol.loop.create_task(_sweep(state.connections, every))


async def _sweep(connections: set[Any], every: float) -> None:
    """Each ``every`` seconds, close the connections whose request is late
    (until the server's loop ends)."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(every)
        now = loop.time()
        for connection in list(connections):
            if isinstance(connection, BoundedHttp):
                try:
                    connection.overdue(now)
                except Exception:  # one connection's trouble must not end the sweep
                    log.exception("could not time out a connection")
