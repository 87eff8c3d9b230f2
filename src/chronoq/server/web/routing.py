"""Routes: one table that both dispatches requests and describes them in the
OpenAPI document. A path template's ``{name}`` matches one path segment
(percent-decoded, so a job id may hold ``/`` sent as ``%2F``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from chronoq.server.auth import Action, Token
from chronoq.server.web.problems import ApiError

__all__ = ["Call", "Handler", "Param", "Reply", "Route", "Router"]


@dataclass
class Call:
    """One request as a handler sees it."""

    params: dict[str, str]
    body: Any  # the decoded request type, or None
    query: dict[str, str]
    token: Token | None
    hung_up: asyncio.Event | None = None  # set when the client hangs up (long polls)
    raw_body: bytes = b""
    receive: Callable[[], Awaitable[Any]] | None = None
    hang_up_watch: asyncio.Task[None] | None = None

    def param(self, name: str) -> str:
        return self.params[name]

    def watch_hang_up(self) -> asyncio.Event:
        """An event set when the client hangs up, for a handler about to wait
        (the body has been read: what the connection says next is that)."""
        if self.hung_up is None:
            self.hung_up = asyncio.Event()
            if self.receive is not None:
                self.hang_up_watch = asyncio.ensure_future(_hang_up(self.receive, self.hung_up))
        return self.hung_up

    def stop_watching(self) -> None:
        if self.hang_up_watch is not None:
            self.hang_up_watch.cancel()


async def _hang_up(receive: Callable[[], Awaitable[Any]], hung_up: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    hung_up.set()


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # encoded with msgspec (a Struct, dict, list) or raw bytes
    content_type: bytes = b"application/json"
    headers: tuple[tuple[bytes, bytes], ...] = ()
    # run when the answer could not be written (the client is gone): what it
    # leased goes back now, not at the end of its ttr
    undelivered: Callable[[], None] | None = None


Handler = Callable[[Call], Awaitable[Reply]]


@dataclass(frozen=True)
class Param:
    """A query parameter, for the OpenAPI document."""

    name: str
    schema: dict[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    action: Action | None = None  # None: open to anyone
    body: Any = None  # the msgspec type of the JSON body
    answers: dict[int, Any] = field(default_factory=dict)  # status -> msgspec type
    query: tuple[Param, ...] = ()
    tag: str = "jobs"
    long_poll: bool = False  # watches for the client hanging up from the start
    in_schema: bool = True
    raw_body: bool = False  # the handler parses the body itself
    # the token is identified here, and the handler checks its action, which
    # only the body tells (the Youzan command protocol)
    checks_in_handler: bool = False
    # a protocol's own shape for refusals (the status is kept)
    envelope: Callable[[ApiError], Any] | None = None

    @property
    def segments(self) -> list[str]:
        return self.path.strip("/").split("/") if self.path != "/" else []


class Router:
    """Routes by path template. The usual request is found by one dict look-up
    on (method, segment count, last segment) and one check of the other
    segments; a path that ends in a parameter is matched among the templates
    of its length."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self._by_shape: dict[int, list[tuple[list[str], Route]]] = {}
        self._by_last: dict[tuple[str, int, str], list[tuple[list[str], Route]]] = {}

    def add(self, route: Route) -> None:
        self.routes.append(route)
        segments = route.segments
        self._by_shape.setdefault(len(segments), []).append((segments, route))
        if segments and segments[-1][:1] != "{":
            key = (route.method, len(segments), segments[-1])
            self._by_last.setdefault(key, []).append((segments, route))

    def match(self, method: str, raw_path: bytes) -> tuple[Route, dict[str, str]]:
        """The route for a request; raises 404 or 405 ApiError."""
        text = raw_path.decode("latin-1")
        parts = text.strip("/").split("/") if text.strip("/") else []
        if parts:
            for template, route in self._by_last.get((method, len(parts), parts[-1]), ()):
                params = _fit(template, parts)
                if params is not None:
                    return route, params
        allowed: list[str] = []
        for template, route in self._by_shape.get(len(parts), ()):
            params = _fit(template, parts)
            if params is not None:
                if route.method == method:
                    return route, params
                allowed.append(route.method)
        if allowed:
            raise ApiError(
                405, "method_not_allowed", f"{method} is not allowed here; use {', '.join(allowed)}"
            )
        raise ApiError(404, "no_such_route", f"no endpoint at {text}: see /openapi.json")


def _fit(template: list[str], parts: list[str]) -> dict[str, str] | None:
    """The parameters of ``parts`` when they fit ``template``, else None."""
    params: dict[str, str] = {}
    for want, got in zip(template, parts, strict=True):
        if want[:1] == "{":
            params[want[1:-1]] = unquote(got)
        elif want != got:
            return None
    return params


def query_of(raw: bytes) -> dict[str, str]:
    return dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True)) if raw else {}
