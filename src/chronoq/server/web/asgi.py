"""The ASGI application: dispatch of each request to its route, the body
read under a size limit and decoded to the route's type, the token checked,
and every failure answered ``{"error": {"code", "message"}}`` — a traceback
goes to the log, never to the client."""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import msgspec

import chronoq.tracing as tracing
from chronoq.errors import ChronoqError
from chronoq.job import validate_id, validate_topic
from chronoq.server.auth import Action, allowed, internal_topic, is_internal
from chronoq.server.settings import ServerSettings
from chronoq.server.web.problems import ApiError, from_chronoq, invalid_body, too_large
from chronoq.server.web.routing import Call, Reply, Route, Router, query_of
from chronoq.server.wire import ENCODER

__all__ = ["ASGIApp", "Observer", "Receive", "Scope", "Send", "Service", "header", "route_path"]

log = logging.getLogger("chronoq")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Observer = Callable[[str, int, float], None]  # route template, status, seconds

_JSON = b"application/json"
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


# a Host header: a name or IPv4 address, or an IPv6 address in brackets; a port
_HOST = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+))(?::[0-9]{1,5})?")


@functools.lru_cache(maxsize=256)  # a server sees a handful of Host values
def loopback_host(host: bytes) -> bool:
    """Whether a Host header names this machine by a loopback name: the name
    ``localhost``, or a literal loopback address as ``ipaddress`` reads it
    (127.0.0.0/8, ``[::1]``), with or without a port. A name that only
    starts like one (``127.evil.example``, ``localhost.evil.example``) is
    another machine's, whatever DNS says of it now: that is DNS rebinding."""
    shape = _HOST.fullmatch(host.decode("latin-1"))
    if shape is None:
        return False
    v6, name = shape.groups()
    if name is not None and name.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(v6 or name)
    except ValueError:
        return False
    return address.is_loopback and (v6 is not None) == (address.version == 6)


async def _status_of(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int:
    """Run a mounted app; the status it answered (0: none)."""
    status = 0

    async def sending(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, sending if tracing.active() else send)
    return status


class _HungUp(Exception):
    """The client hung up before its request was read: nobody to answer."""


def _body_too_large(limit: int, size: int | None) -> ApiError:
    return too_large(
        f"the body is over {limit} bytes (this server's limits.max_body): send less at once",
        size,
        limit,
    )


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The body, up to ``limit`` bytes; one that does not arrive in time is
    the connection's to end (connections.py: limits.body_timeout)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise _body_too_large(limit, int(value))
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _HungUp
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:  # sent in chunks: its whole size is not known
            raise _body_too_large(limit, None)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def route_path(scope: Scope) -> bytes:
    """The raw path a route is matched on: without the query, and without
    the prefix a proxy serves the app under (``--root-path``), which uvicorn
    puts in front of it."""
    path: bytes = scope.get("raw_path") or scope["path"].encode()
    path = path.partition(b"?")[0]
    root = scope.get("root_path", "").encode()
    if root and path.startswith(root):
        path = path[len(root) :] or b"/"
    return path


def header(scope: Scope, wanted: bytes) -> bytes | None:
    """The first value of a request header (lower-case name), or None."""
    for name, value in scope["headers"]:
        if name == wanted:
            return bytes(value)
    return None


def _refusal(route: Route | None, problem: ApiError) -> Reply:
    body = problem.body()
    if route is not None and route.envelope is not None:
        body = route.envelope(problem)
    return Reply(problem.status, body, headers=tuple(problem.headers()))


class Service:
    """What the routes share: settings, and hooks run when the server stops."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.on_start: list[Callable[[], Awaitable[None]]] = []
        self.on_drain: list[Callable[[], Awaitable[None]]] = []
        self.on_close: list[Callable[[], Awaitable[None]]] = []
        self._drained = False

    async def drain(self) -> None:
        """Answer waiting requests now (SIGTERM): long polls get []."""
        if not self._drained:
            self._drained = True
            for hook in self.on_drain:
                await hook()

    async def close(self) -> None:
        await self.drain()
        for hook in self.on_close:
            await hook()


class App:
    """An ASGI app over a ``Router``, with other ASGI apps mounted at prefixes."""

    def __init__(
        self,
        service: Service,
        router: Router,
        mounts: dict[str, ASGIApp] | None = None,
        observe: Observer | None = None,
        *,
        check_site: bool = True,  # False: mounted in an App that checks (_foreign)
    ) -> None:
        self.service = service
        self.router = router
        self.mounts = dict(mounts or {})
        self.observe = observe
        self.check_site = check_site
        self._decoders: dict[int, msgspec.json.Decoder[Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                for hook in self.service.on_start:
                    await hook()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.service.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _foreign(self, scope: Scope) -> ApiError | None:
        """Without tokens, a request that a web page made a browser send:
        another site (Origin, Sec-Fetch-Site; Referer on a request that
        changes something, for browsers and proxies that send no Origin), or
        a foreign name for this loopback server (DNS rebinding). Clients
        that are not browsers send none of these, and a Host of this machine."""
        settings = self.service.settings
        if settings.auth.enabled:
            return None
        site = origin = referer = None
        host = b""
        for name, value in scope["headers"]:  # one pass: this runs on every request
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"sec-fetch-site":
                site = value
            elif name == b"referer":
                referer = value
        if origin is None and referer is not None and scope["method"] not in _SAFE_METHODS:
            origin = referer  # its site is what matters: scheme and host:port
        if site in (b"cross-site", b"same-site") or (
            origin is not None and urlsplit(origin.decode("latin-1")).netloc.encode() != host
        ):
            return ApiError(
                403, "cross_origin", "a request from another web site: without tokens this "
                "server answers only its own pages and clients that are not browsers",
            )  # fmt: skip
        if settings.local_only and not loopback_host(host):
            shown = host.decode("latin-1")[:100]
            return ApiError(
                403, "foreign_host", f"this server has no tokens and answers only on "
                f"loopback names (localhost, 127.0.0.1, [::1]), not {shown!r}: use "
                "127.0.0.1, or give it tokens",
            )  # fmt: skip
        return None

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not tracing.active() or not self.check_site:  # a mounted App: in its host's span
            await self._serve(scope, receive, send)
            return
        path = scope["path"]
        with tracing.server_span(scope["method"], path, scope["headers"]) as span:
            template, status = await self._serve(scope, receive, send)
            span.answered(template, status)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> tuple[str, int]:
        """Answer one request; its route template (or what answered it) and status."""
        started = time.perf_counter()
        refused = self._foreign(scope) if self.check_site else None
        if refused is not None:
            await self._send(send, _refusal(None, refused))
            return "refused", refused.status
        path = route_path(scope)
        for prefix, app in self.mounts.items():
            if path == prefix.encode().rstrip(b"/") or path.startswith(prefix.encode()):
                status = await _status_of(app, scope, receive, send)
                return prefix.rstrip("/") or "/", status
        call: list[Call] = []  # the request as its handler saw it, once read
        try:
            template, reply = await self._answer(scope, receive, path, call)
        except _HungUp:
            return "hung up", 499
        try:
            if not await self._send(send, reply) and reply.undelivered is not None:
                reply.undelivered()
        finally:
            if call:
                call[0].stop_watching()
            if self.observe is not None:
                self.observe(template, reply.status, time.perf_counter() - started)
        return template, reply.status

    async def _answer(
        self, scope: Scope, receive: Receive, path: bytes, seen: list[Call]
    ) -> tuple[str, Reply]:
        """The route template and the reply; every failure becomes a reply."""
        template = "unmatched"
        route: Route | None = None
        try:
            route, params = self.router.match(scope["method"], path)
            template = route.path
            call = await self._call(route, params, scope, receive)
            seen.append(call)
            if route.long_poll:
                call.watch_hang_up()
            return template, await route.handler(call)
        except ApiError as exc:
            return template, _refusal(route, exc)
        except ChronoqError as exc:
            problem = from_chronoq(exc)
            if problem.status >= 500 and problem.status != 503:
                log.exception("%s %s failed", scope["method"], template)
            return template, _refusal(route, problem)
        except _HungUp:  # before the catch-all below (CancelledError is no Exception)
            raise
        except Exception:
            log.exception("%s %s failed", scope["method"], template)
            problem = ApiError(500, "internal", "an internal error; it is in the server's log")
            return template, Reply(500, problem.body())

    async def _call(
        self, route: Route, params: dict[str, str], scope: Scope, receive: Receive
    ) -> Call:
        settings = self.service.settings
        # the names in the path are checked before anything else is (the
        # queue would check them too, but not on every path: an empty batch)
        topic = params.get("topic")
        if topic is not None:
            validate_topic(topic)
        if "id" in params:
            validate_id(params["id"])
        token = None
        if route.action is not None and settings.auth.enabled:
            token = settings.auth.identify(header(scope, b"authorization"))
        # the server's own topics, whatever the route: read by a token that
        # names them, written by nobody
        if (
            topic is not None
            and is_internal(topic)
            and (scope["method"] != "GET" or not allowed(token, Action.READ, topic))
        ):
            raise internal_topic(topic)
        if token is not None and route.action is not None and not route.checks_in_handler:
            settings.auth.check(token, route.action, topic)
        raw = b""
        if scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            raw = await _read_body(scope, receive, settings.limits.max_body)
        body = None
        if route.body is not None and not route.raw_body:
            body = self._decode(route, raw)
        query = query_of(scope.get("query_string", b""))
        return Call(params, body, query, token, raw_body=raw, receive=receive)

    def _decode(self, route: Route, raw: bytes) -> Any:
        decoder = self._decoders.get(id(route))
        if decoder is None:
            decoder = self._decoders[id(route)] = msgspec.json.Decoder(route.body)
        try:
            return decoder.decode(raw or b"{}")
        except msgspec.ValidationError as exc:
            raise invalid_body(str(exc)) from None
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ApiError(400, "bad_json", f"the body is not valid JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, "bad_json", "the body's JSON is nested too deeply") from None

    async def _send(self, send: Send, reply: Reply) -> bool:
        body = reply.body if isinstance(reply.body, bytes) else ENCODER.encode(reply.body)
        headers = [
            (b"content-type", reply.content_type),
            (b"content-length", str(len(body)).encode()),
            *reply.headers,
        ]
        try:
            await send({"type": "http.response.start", "status": reply.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        except Exception:  # the client is gone (uvloop: RuntimeError, else OSError)
            return False
        return True
