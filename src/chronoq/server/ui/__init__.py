"""The dashboard at /ui/: server-rendered pages over the same queue."""

from __future__ import annotations

from chronoq.aio import AsyncQueue
from chronoq.server.asgi import ASGIApp, Service

__all__ = ["dashboard"]


def dashboard(queue: AsyncQueue, service: Service) -> ASGIApp | None:
    return None
