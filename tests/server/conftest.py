"""Fixtures of the HTTP service's tests; ``serve`` and ``server`` (a real
server on each backend) are in tests/conftest.py, shared with tests/http."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from .live import LiveServer


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client
