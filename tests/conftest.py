"""Shared fixtures. ``store_url`` runs a test once per backend in ``BACKENDS``;
a new backend adds itself there and every conformance test runs on it unchanged."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chronoq
import chronoq.aio

from .aio_bridge import BridgedQueue
from .children import Child
from .redis_server import RedisServer, redis_server_binary


def _redis_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    server: RedisServer = request.getfixturevalue("redis_server")
    # a key prefix of its own per test: tests share one server without flushing it
    return f"{server.url}?prefix=cq-{uuid.uuid4().hex[:12]}"


#: backend name -> a function that returns a fresh store URL for one test
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {
    "sqlite": lambda request, tmp_path: f"sqlite:///{tmp_path / 'chronoq.db'}",
}
if redis_server_binary() is not None or os.environ.get("CI") == "true":
    BACKENDS["redis"] = _redis_url  # in CI a missing redis-server fails, never skips

#: the far tier forced on (lua/lib/7_far.lua): every delayed job is put in a far
#: bucket of its own (1 ms wide) and promoted only when due, so that every
#: operation meets it there; the conformance suite runs on these too
FORCED_FAR = "horizon_ms=0&far_bucket_ms=1"


def _far(url: Callable[[pytest.FixtureRequest, Path], str]) -> Callable[..., str]:
    return lambda request, tmp_path: f"{url(request, tmp_path)}&{FORCED_FAR}"


if "redis" in BACKENDS:
    BACKENDS["redis-far"] = _far(_redis_url)


def _topology_url(fixture: str) -> Callable[[pytest.FixtureRequest, Path], str]:
    def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
        topology = request.getfixturevalue(fixture)
        return f"{topology.url}?prefix=cq-{uuid.uuid4().hex[:12]}"

    return url


#: CHRONOQ_TOPOLOGIES=cluster,sentinel (make test-topologies) runs every test
#: of ``store_url`` on a real Redis Cluster (3 primaries, 3 replicas) and on a
#: Sentinel-managed primary as well
TOPOLOGIES = {"cluster": "redis_cluster", "sentinel": "redis_sentinel"}
for _name in filter(None, os.environ.get("CHRONOQ_TOPOLOGIES", "").split(",")):
    if _name not in TOPOLOGIES:
        raise ValueError(f"CHRONOQ_TOPOLOGIES: unknown topology {_name!r} (cluster, sentinel)")
    BACKENDS[f"redis-{_name}"] = _topology_url(TOPOLOGIES[_name])
    BACKENDS[f"redis-{_name}-far"] = _far(_topology_url(TOPOLOGIES[_name]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The forced far tier runs the conformance suite only: elsewhere it would
    repeat what the plain Redis run checks."""
    conformance = Path(__file__).parent / "conformance"
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        far = params is not None and str(params.params.get("store_url", "")).endswith("-far")
        (drop if far and conformance not in item.path.parents else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One private redis-server for the session, on a free port."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Redis Cluster for the session: 3 primaries, a replica each."""
    from .topologies import RedisCluster

    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def redis_sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A primary, its replica and a sentinel for the session."""
    from .topologies import SentinelSetup

    setup = SentinelSetup(tmp_path_factory.mktemp("redis-sentinel"))
    yield setup
    setup.stop()


@pytest.fixture(params=sorted(BACKENDS))
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL on a fresh store of each backend in turn."""
    return BACKENDS[request.param](request, tmp_path)


@pytest.fixture
def queue(store_url: str) -> Iterator[chronoq.Queue]:
    q = chronoq.connect(store_url)
    yield q
    q.close()


@pytest.fixture(params=["sync", "aio"])
def api_queue(request: pytest.FixtureRequest, store_url: str) -> Iterator[Any]:
    """A queue through each API in turn: ``chronoq.connect``, and
    ``chronoq.aio.connect`` behind a synchronous bridge."""
    if request.param == "sync":
        q: Any = chronoq.connect(store_url)
    else:
        q = BridgedQueue(lambda: chronoq.aio.connect(store_url))
    yield q
    q.close()


@pytest.fixture
def topic() -> str:
    """A topic no other test uses, so tests can share a store without flushing it."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A store URL on a fresh SQLite file, for SQLite-only tests."""
    return f"sqlite:///{tmp_path / 'chronoq.db'}"


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    """Start child processes (killed at teardown if still running)."""
    children: list[Child] = []

    def start(code: str, **args: Any) -> Child:
        child = Child(code, args, tmp_path / f"child-{len(children)}.stderr")
        children.append(child)
        return child

    yield start
    for child in children:
        child.cleanup()


@pytest.fixture
def serve(store_url: str) -> Iterator[Callable[..., Any]]:
    """Start chronoq servers (uvicorn in a thread, tests/server/live.py) on
    this test's store, each backend in turn, or on ``store``; all are
    stopped at the end. Imported here, not at collection: the server extra
    is only needed by the tests that use it."""
    from .server.live import start_server

    started: list[Any] = []

    def start(settings: Any = None, store: str | None = None) -> Any:
        server = start_server(store or store_url, settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(serve: Callable[..., Any]) -> Any:
    return serve()
