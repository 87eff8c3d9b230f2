"""Fixtures of the HTTP clients' tests: a client of each kind on the real
server of the ``server`` fixture (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import chronoq.http

from ..aio_bridge import BridgedQueue
from ..server.live import LiveServer


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
