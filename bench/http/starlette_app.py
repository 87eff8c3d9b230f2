"""A prototype for the measurement of issue 26, not used by ``chronoq serve``:
the /v1 topic routes dispatched by Starlette (its ``Route``, ``Request`` and
``Response``) in front of the server's own app, which keeps the rest (the
compatibility protocols, health, metrics, the dashboard, the lifespan).

Two variants, so that the measurement brackets what a migration would cost:

- ``starlette``: a ``Starlette`` application as a migration would build it:
  the body limit by its ``max_body_size``, the error shapes by its exception
  handlers, the Host/Origin check and the request metric in an ASGI
  middleware;
- ``starlette-router``: the lean floor: a bare ``Router``, each endpoint
  checking its request and answering its own errors, as ``asgi.App`` does.

Each request does what the own dispatch does: the Host/Origin check, the
names in the path, the token, the server's own topics, the body under its
limit (read by ``await request.body()``), msgspec decoding, the error body
``{"error": {"code", "message"}}``, the hang-up watch of long polls, the
give-back of a lease whose answer could not be written, the request metric.
The handlers are the same ``V1`` methods, called with the same ``Call``.
bench/http/toolkit.py starts a server on either (docs/benchmarks.md, "Web
toolkit (issue 26)")."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute
from starlette.routing import Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chronoq.errors import ChronoqError
from chronoq.job import validate_id, validate_topic
from chronoq.server.app import ChronoqApp
from chronoq.server.auth import Action, allowed, internal_topic, is_internal
from chronoq.server.serving import app_from_env
from chronoq.server.settings import ServerSettings
from chronoq.server.web.problems import ApiError, from_chronoq, invalid_body
from chronoq.server.web.routing import Call, Reply, Route, query_of
from chronoq.server.wire import ENCODER

__all__ = ["ToolkitApp", "router_app_from_env", "starlette_app", "starlette_app_from_env"]

log = logging.getLogger("chronoq")

Endpoint = Callable[[Request], Awaitable[Response]]
_JSON = "application/json"
_BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_CODES = {404: "no_such_route", 405: "method_not_allowed", 413: "too_large"}


def _problem_response(problem: ApiError) -> Response:
    headers = {name.decode(): value.decode() for name, value in problem.headers()}
    return Response(ENCODER.encode(problem.body()), problem.status, headers or None, _JSON)


class _ReplyResponse(Response):
    """A handler's ``Reply`` sent through Starlette, and what ``asgi.App``
    does after its send: a lease whose answer could not be written goes
    back, the hang-up watch stops, and (``done``) the metric is recorded."""

    def __init__(
        self, reply: Reply, call: Call | None, done: Callable[[int], None] | None = None
    ) -> None:
        body = reply.body if isinstance(reply.body, bytes) else ENCODER.encode(reply.body)
        headers = {name.decode(): value.decode() for name, value in reply.headers} or None
        super().__init__(body, reply.status, headers, reply.content_type.decode())
        self.reply = reply
        self.call = call
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except Exception:  # the client is gone (uvloop: RuntimeError, else OSError)
            if self.reply.undelivered is not None:
                self.reply.undelivered()
        finally:
            if self.call is not None:
                self.call.stop_watching()
            if self.done is not None:
                self.done(self.status_code)


class _Endpoints:
    """Starlette endpoints for the own route table's /v1 routes."""

    def __init__(self, own: ChronoqApp, *, lean: bool) -> None:
        self.settings: ServerSettings = own.service.settings
        self.observe = own.observe
        self.lean = lean  # check the body's size and answer errors here (the bare Router)

    def routes(self, own: ChronoqApp) -> list[StarletteRoute]:
        mine = [route for route in own.router.routes if route.path.startswith("/v1/topics")]
        return [
            StarletteRoute(route.path, self.endpoint(route), methods=[route.method])
            for route in mine
        ]

    def endpoint(self, route: Route) -> Endpoint:
        decoder = None
        if route.body is not None and not route.raw_body:
            decoder = msgspec.json.Decoder(route.body)

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            done = None
            if self.lean and self.observe is not None:
                observe = self.observe

                def done(status: int) -> None:
                    observe(route.path, status, time.perf_counter() - started)

            try:
                call = await self.call(route, request, decoder)
            except ClientDisconnect:
                return Response()  # nobody to answer: uvicorn drops it
            except Exception as exc:
                if not self.lean:
                    raise
                return _ReplyResponse(_refusal(request, route, exc), None, done)
            if route.long_poll:
                call.watch_hang_up()
            try:
                reply = await route.handler(call)
            except BaseException as exc:
                call.stop_watching()
                if not self.lean or not isinstance(exc, Exception):
                    raise
                reply = _refusal(request, route, exc)
            return _ReplyResponse(reply, call, done)

        return endpoint

    async def call(
        self, route: Route, request: Request, decoder: msgspec.json.Decoder[Any] | None
    ) -> Call:
        """The request as ``asgi.App._call`` hands it to the handler."""
        settings = self.settings
        params: dict[str, str] = request.path_params
        topic = params.get("topic")
        if topic is not None:
            validate_topic(topic)
        if "id" in params:
            validate_id(params["id"])
        token = None
        if route.action is not None and settings.auth.enabled:
            authorization = request.headers.get("authorization")
            token = settings.auth.identify(
                None if authorization is None else authorization.encode("latin-1")
            )
        method = request.method
        if (
            topic is not None
            and is_internal(topic)
            and (method != "GET" or not allowed(token, Action.READ, topic))
        ):
            raise internal_topic(topic)
        if token is not None and route.action is not None and not route.checks_in_handler:
            settings.auth.check(token, route.action, topic)
        raw = b""
        if method in _BODY_METHODS:
            raw = await self.body(request)
        body = None if decoder is None else _decode(decoder, raw)
        query = query_of(request.scope.get("query_string", b""))
        return Call(params, body, query, token, raw_body=raw, receive=request.receive)

    async def body(self, request: Request) -> bytes:
        if not self.lean:  # Starlette's max_body_size bounds what body() reads
            return await request.body()
        limit = self.settings.limits.max_body
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise _too_large(limit)
        raw = await request.body()
        if len(raw) > limit:  # a chunked body: read whole first (a migration: stream())
            raise _too_large(limit)
        return raw


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "too_large", f"the body is over {limit} bytes: send less at once")


def _decode(decoder: msgspec.json.Decoder[Any], raw: bytes) -> Any:
    try:
        return decoder.decode(raw or b"{}")
    except msgspec.ValidationError as exc:
        raise invalid_body(str(exc)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_json", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "bad_json", "the body's JSON is nested too deeply") from None


def _problem_of(request: Request, exc: Exception) -> ApiError:
    """What ``asgi.App._answer`` answers to each failure."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, HTTPException):
        code = _CODES.get(exc.status_code, "http_error")
        return ApiError(exc.status_code, code, str(exc.detail))
    route = request.scope.get("route")
    template = getattr(route, "path", "unmatched")
    if isinstance(exc, ChronoqError):
        problem = from_chronoq(exc)
        if problem.status >= 500 and problem.status != 503:
            log.error("%s %s failed", request.method, template, exc_info=exc)
        return problem
    log.error("%s %s failed", request.method, template, exc_info=exc)
    return ApiError(500, "internal", "an internal error; it is in the server's log")


def _refusal(request: Request, route: Route, exc: Exception) -> Reply:
    problem = _problem_of(request, exc)
    body = problem.body() if route.envelope is None else route.envelope(problem)
    return Reply(problem.status, body, headers=tuple(problem.headers()))


async def _on_error(request: Request, exc: Exception) -> Response:
    """Starlette's exception handler for every failure of a /v1 request."""
    return _problem_response(_problem_of(request, exc))


class _SiteAndMetrics:
    """The ``starlette`` variant's middleware: the Host/Origin check
    (``asgi.App._foreign``), and the request metric, its status read from
    the answer as it goes out."""

    def __init__(self, app: ASGIApp, own: ChronoqApp) -> None:
        self.app = app
        self.own = own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        refused = self.own._foreign(scope)
        if refused is not None:
            await _problem_response(refused)(scope, receive, send)
            return
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            observe = self.own.observe
            if route is not None and observe is not None:  # the own app observed the rest
                observe(route.path, status, time.perf_counter() - started)


class ToolkitApp:
    """The own app's parts (``service``, ``queue``, ``polls``, ``metrics``)
    with Starlette in front: HTTP requests go to ``front``, which hands any
    request outside its /v1 routes to the own app; the lifespan goes to the
    own app as it is."""

    def __init__(self, own: ChronoqApp, front: ASGIApp, *, check_site: bool) -> None:
        self.own = own
        self.front = front
        self.check_site = check_site
        self.service = own.service
        self.queue = own.queue
        self.polls = own.polls
        self.metrics = own.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.own(scope, receive, send)
            return
        if self.check_site:
            refused = self.own._foreign(scope)
            if refused is not None:
                await _problem_response(refused)(scope, receive, send)
                return
        await self.front(scope, receive, send)


def starlette_app(own: ChronoqApp, *, lean: bool = False) -> ToolkitApp:
    """Starlette in front of ``own``'s /v1 topic routes: a ``Starlette``
    application, or (``lean``) a bare ``Router``."""
    endpoints = _Endpoints(own, lean=lean)
    routes = endpoints.routes(own)
    if lean:
        router = Router(routes, redirect_slashes=False, default=own)
        return ToolkitApp(own, router, check_site=True)
    handlers: dict[Any, Any] = {
        ApiError: _on_error,
        ChronoqError: _on_error,
        HTTPException: _on_error,
        Exception: _on_error,  # Starlette answers it, then raises it again to uvicorn
    }
    app = Starlette(
        routes=routes,
        middleware=[Middleware(_SiteAndMetrics, own=own)],
        exception_handlers=handlers,
        max_body_size=own.service.settings.limits.max_body,
    )
    app.router.redirect_slashes = False
    app.router.default = own
    return ToolkitApp(own, app, check_site=False)


def starlette_app_from_env() -> ToolkitApp:
    """uvicorn's factory for the ``starlette`` variant (``serving.app_from_env``'s options)."""
    return starlette_app(app_from_env())


def router_app_from_env() -> ToolkitApp:
    """uvicorn's factory for the ``starlette-router`` variant."""
    return starlette_app(app_from_env(), lean=True)
