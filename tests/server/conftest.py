"""Fixtures of the HTTP service's tests: a real server on each backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from chronoq.server import ServerSettings

from .live import LiveServer, start_server


@pytest.fixture
def serve(store_url: str) -> Iterator[Callable[..., LiveServer]]:
    """Start servers on this test's store (each backend in turn); all are
    stopped at the end."""
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
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client
