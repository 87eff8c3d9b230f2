"""Fixtures of the HTTP clients' tests: a real server (uvicorn in a thread,
tests/server/live.py) on each backend, and a client of each kind on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import chronoq.http
from chronoq.server import ServerSettings

from ..aio_bridge import BridgedQueue
from ..server.live import LiveServer, start_server


@pytest.fixture
def serve(store_url: str) -> Iterator[Callable[..., LiveServer]]:
    """Start servers on this test's store (each backend in turn), or on
    ``store``; all are stopped at the end."""
    started: list[LiveServer] = []

    def start(settings: ServerSettings | None = None, store: str | None = None) -> LiveServer:
        server = start_server(store or store_url, settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve()


@pytest.fixture
def client(server: LiveServer) -> Iterator[chronoq.http.Client]:
    with chronoq.http.Client(server.url) as c:
        yield c


@pytest.fixture(params=["sync", "aio"])
def api_client(request: pytest.FixtureRequest, server: LiveServer) -> Iterator[Any]:
    """A client of each kind in turn: ``Client``, and ``AsyncClient`` behind
    a synchronous bridge (its own event loop in a thread)."""
    if request.param == "sync":
        c: Any = chronoq.http.Client(server.url)
    else:
        c = BridgedQueue(lambda: chronoq.http.AsyncClient(server.url))  # type: ignore[arg-type, return-value]
    yield c
    c.close()
