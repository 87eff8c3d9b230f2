"""The dashboard at /ui/: server-rendered pages over the same queue."""

from __future__ import annotations

from chronoq.aio import AsyncQueue
from chronoq.server.asgi import ASGIApp, Service

__all__ = ["dashboard"]


def dashboard(queue: AsyncQueue, service: Service, store: str) -> ASGIApp | None:
    """The dashboard's ASGI app, mounted at /ui/; ``store`` is the full store
    URL (with any password), for reads that need a blocking queue."""
    return None
