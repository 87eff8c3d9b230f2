"""``create_app``: the whole service as one ASGI app — the /v1 API, the
compatibility protocols, health, metrics, the OpenAPI document, its
reference page at /docs and the dashboard — over one ``AsyncQueue``."""

from __future__ import annotations

from typing import Any

import msgspec

from chronoq.aio import AsyncQueue
from chronoq.aio import connect as aio_connect
from chronoq.server import wire
from chronoq.server.auth import Action
from chronoq.server.compat import compat_routes
from chronoq.server.docs_page import docs_page
from chronoq.server.grouped_puts import GroupedPuts
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import CONTENT_TYPE, Metrics
from chronoq.server.settings import ServerSettings
from chronoq.server.ui import dashboard
from chronoq.server.v1_routes import v1_routes
from chronoq.server.web.asgi import App, Service
from chronoq.server.web.openapi import openapi_document
from chronoq.server.web.problems import ApiError
from chronoq.server.web.routing import Call, Reply, Route, Router

__all__ = ["ChronoqApp", "create_app"]

_HEALTH_TOPIC = "chronoq.healthz"  # a topic that is read, never written


class Health(msgspec.Struct):
    ok: bool
    store: str


class ChronoqApp(App):
    """The service's ASGI app, with its parts in reach (tests, the dashboard)."""

    def __init__(
        self,
        service: Service,
        router: Router,
        queue: AsyncQueue,
        polls: LongPolls,
        metrics: Metrics,
    ) -> None:
        mounts = {"/ui/": dashboard(queue, service), "/docs/": docs_page()}
        super().__init__(service, router, mounts, observe=metrics.observe_request)
        self.queue = queue
        self.polls = polls
        self.metrics = metrics


def create_app(
    store: str | None = None,
    *,
    settings: ServerSettings | None = None,
    queue: AsyncQueue | None = None,
) -> ChronoqApp:
    """The ASGI app of ``chronoq serve`` on the store at ``store`` (a store
    URL as ``chronoq.connect`` takes; default ``sqlite:///chronoq.db``), or
    on an open ``queue`` (which the app then closes when it stops)."""
    settings = settings or ServerSettings()
    q = queue if queue is not None else aio_connect(store)
    service = Service(settings)
    polls = LongPolls(q)
    metrics = Metrics()
    service.on_drain.append(polls.close)
    service.on_close.append(q.close)
    router = Router()
    puts = GroupedPuts(q)  # every protocol's single puts meet in one group commit
    routes = v1_routes(q, polls, settings.limits, metrics, puts)
    routes += compat_routes(q, polls, settings, metrics, puts)

    async def healthz(call: Call) -> Reply:
        try:
            await q.stats(_HEALTH_TOPIC)
        except Exception as exc:  # any failure to read means unhealthy
            raise ApiError(503, "store_unavailable", f"the store is unavailable: {exc}") from None
        return Reply(200, Health(True, settings.shown_store(q.url)))

    async def openapi(call: Call) -> Reply:
        return Reply(200, document)

    async def metrics_page(call: Call) -> Reply:
        token = call.token
        if token is not None and not (Action.READ in token.actions and "*" in token.topics):
            raise ApiError(403, "forbidden", f"token {token.name!r} may not read /metrics: it "
                           "shows every topic, so it needs read on the topic glob '*'")  # fmt: skip
        return Reply(200, await metrics.render(q), content_type=CONTENT_TYPE)

    routes += [
        Route(
            "GET",
            "/healthz",
            healthz,
            "200 when the store can be read, else 503",
            answers={200: Health, 503: wire.ErrorBody},
            tag="service",
        ),
        Route(
            "GET",
            "/openapi.json",
            openapi,
            "This document",
            answers={200: dict[str, Any]},
            tag="service",
            in_schema=False,
        ),
        Route(
            "GET",
            "/metrics",
            metrics_page,
            "Prometheus metrics (text format)",
            Action.READ,
            tag="service",
            checks_in_handler=True,
            in_schema=False,
        ),
    ]
    for route in routes:
        router.add(route)
    document = openapi_document(router.routes, settings.auth.enabled, settings.limits)
    return ChronoqApp(service, router, q, polls, metrics)
