"""The dashboard at /ui/: server-rendered pages over the same queue.

A page shell, HTML fragments that htmx loads into it (the topics table
every 2 s), and POST actions; no JavaScript build step (static/ holds htmx
and one small script). docs/dashboard.md describes what it shows."""

from __future__ import annotations

from chronoq.aio import AsyncQueue
from chronoq.server.ui.assets import Assets
from chronoq.server.ui.board import Board
from chronoq.server.ui.guard import guard
from chronoq.server.ui.routes import ui_routes
from chronoq.server.web.asgi import App, ASGIApp, Service
from chronoq.server.web.routing import Router

__all__ = ["dashboard"]


def dashboard(queue: AsyncQueue, service: Service) -> ASGIApp:
    """The dashboard's ASGI app, mounted at /ui/."""
    router = Router()
    for route in ui_routes(Board(queue, service), Assets()):
        router.add(route)
    # mounted in the service's App, which has checked where the request came from
    return guard(App(service, router, check_site=False), service.settings)
