"""Real servers on loopback for the retry tests of the HTTP clients.

``FaultServer``: a small HTTP server (stdlib, a thread per connection) that
answers each request with the next step of a script: close the connection
without answering, hold it unanswered past the client's timeout, answer a
given status and body (a proxy's error page), or forward the request to a
real chronoq server and pass its answer back. It records every request it
received, so a test can count how many times a call was sent, and when.
The chronoq servers themselves come from tests/server/live.py."""

from __future__ import annotations

import http.client
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "DROP",
    "Answer",
    "Drop",
    "FaultServer",
    "Forward",
    "Hold",
    "Received",
]

# headers that belong to one connection, not to the message
_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "date", "server"}
)


# -- the steps of a script ---------------------------------------------------------------


@dataclass(frozen=True)
class Drop:
    """Read the request, then close the connection without answering."""


DROP = Drop()


@dataclass(frozen=True)
class Hold:
    """Read the request and answer nothing for ``seconds`` (or until the
    server stops), then close the connection: a client's read times out."""

    seconds: float = 10.0


@dataclass(frozen=True)
class Answer:
    """Answer ``status`` with ``body`` (``content_type``) and ``headers``."""

    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def page(cls, status: int, html: str) -> Answer:
        """An HTML page, as a proxy in front of the server sends."""
        return cls(status, html.encode())

    @classmethod
    def problem(cls, status: int, code: str, **extra: object) -> Answer:
        """A refusal in chronoq's shape, ``{"error": {"code", "message", ...}}``."""
        body = {"error": {"code": code, "message": f"{code} message", **extra}}
        return cls(status, json.dumps(body).encode(), "application/json")


@dataclass(frozen=True)
class Forward:
    """Send the request on to the upstream server and pass its answer back;
    ``then`` runs after the upstream answered and before the client gets it."""

    then: Callable[[], object] | None = None


Step = Drop | Hold | Answer | Forward


@dataclass
class Received:
    """One request the fault server read; ``status``: what it was answered
    (None when the connection was closed without an answer)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)
    status: int | None = None

    def json(self) -> Any:
        return json.loads(self.body)


# -- the server ------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a proxy in front of chronoq would
    timeout = 30  # an idle kept-alive connection is closed after this
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = Received(self.command, self.path, headers, body)
        step = self.server.fault.take(received)
        if isinstance(step, Drop):
            self.close_connection = True
        elif isinstance(step, Hold):
            self.server.fault.stopping.wait(step.seconds)
            self.close_connection = True
        elif isinstance(step, Forward):
            answer = self.server.fault.forward(received)
            if step.then is not None:
                step.then()
            self._answer(received, answer)
        else:
            self._answer(received, step)

    def _answer(self, received: Received, answer: Answer) -> None:
        received.status = answer.status
        self.send_response(answer.status)
        self.send_header("content-type", answer.content_type)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve


class _Server(ThreadingHTTPServer):
    block_on_close = False  # stop() does not wait for kept-alive connections
    fault: FaultServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hung up (a timeout) is part of the script, not an error
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class FaultServer:
    """A real HTTP server on a loopback port (``port``, or a free one) that
    answers the requests it gets with ``steps`` in turn; when they run out,
    it forwards to ``upstream`` (a chronoq server's root URL), or answers 500
    if there is none. ``received``: what it got, in order."""

    def __init__(self, *steps: Step, upstream: str | None = None, port: int = 0) -> None:
        self.steps = list(steps)
        self.upstream = urlsplit(upstream) if upstream is not None else None
        self.received: list[Received] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.fault = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fault-server-{self.url}",
            daemon=True,
        )
        self._thread.start()

    @property
    def count(self) -> int:
        """How many requests it received."""
        return len(self.received)

    def gaps(self) -> list[float]:
        """Seconds between each request received and the one before."""
        times = [r.at for r in self.received]
        return [later - earlier for earlier, later in itertools.pairwise(times)]

    def take(self, received: Received) -> Step:
        with self._lock:
            self.received.append(received)
            if self.steps:
                return self.steps.pop(0)
        if self.upstream is not None:
            return Forward()
        return Answer(500, b"fault server: no step left for this request", "text/plain")

    def forward(self, received: Received) -> Answer:
        assert self.upstream is not None, "Forward needs an upstream server"
        upstream = http.client.HTTPConnection(
            self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=60
        )
        headers = {k: v for k, v in received.headers.items() if k not in _HOP}
        try:
            upstream.request(received.method, received.path, received.body or None, headers)
            response = upstream.getresponse()
            body = response.read()
        except ConnectionError:  # the server is not there: answer as a proxy does
            return Answer.page(502, "<html><body>502 Bad Gateway</body></html>")
        finally:
            upstream.close()
        kept = tuple((k, v) for k, v in response.getheaders() if k.lower() not in _HOP)
        content_type = response.getheader("content-type", "application/octet-stream")
        passed = tuple((k, v) for k, v in kept if k.lower() != "content-type")
        return Answer(response.status, body, content_type, passed)

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
