"""Fixtures of the Redis-only tests: private redis-server processes (to kill,
restart, flush or reconfigure without disturbing the session server), raw
redis-py clients to look at what chronoq stored, and child Python processes."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import chronoq

from ..redis_server import RedisServer, redis_server_binary

if redis_server_binary() is None and os.environ.get("CI") != "true":
    # as tests/conftest.py: no redis-server, no Redis tests (in CI a missing one fails)
    collect_ignore_glob = ["test_*.py"]

ServerFactory = Callable[..., RedisServer]


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[ServerFactory]:
    """Start private redis-servers (``extra`` config lines); all stopped at teardown."""
    servers: list[RedisServer] = []

    def start(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(servers)}", *extra)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(kill=True)


@pytest.fixture
def server(make_server: ServerFactory) -> RedisServer:
    """A private redis-server for this test alone."""
    return make_server()


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own."""
    return f"cqt-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def raw_client() -> Iterator[Callable[..., Any]]:
    """Plain redis-py clients (closed at teardown): ``raw_client(server, db=0)``."""
    clients: list[Any] = []

    def connect(server: RedisServer, db: int = 0) -> Any:
        client = redis.Redis(host="127.0.0.1", port=server.port, db=db)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture
def open_queue() -> Iterator[Callable[[str], chronoq.Queue]]:
    """``chronoq.connect`` whose queues are closed at teardown."""
    queues: list[chronoq.Queue] = []

    def connect(url: str) -> chronoq.Queue:
        q = chronoq.connect(url)
        queues.append(q)
        return q

    yield connect
    for q in queues:
        q.close()


def wait_until(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` (a test helper, not the library) until it is true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.01)


def blocked_clients(client: Any) -> int:
    return int(client.info("clients")["blocked_clients"])
