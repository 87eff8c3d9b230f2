"""Redis store URLs (docs/contract.md §3, §4): TCP, ACL users, unix sockets, db numbers,
options passed to redis-py, and the errors of bad or unreachable URLs."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

import chronoq
from chronoq.errors import BackendUnavailable, InvalidInput

from ..redis_server import RedisServer, free_port
from .conftest import ServerFactory


def round_trip(q: chronoq.Queue, topic: str = "t") -> None:
    """Put, wait for, ack: every path a queue uses (scripts, the wake-up, the topic set)."""
    assert q.put(topic, {"x": 1}, id="j1").created
    q.put(topic, {"x": 2}, id="j2", delay=0.05)
    [first] = q.reserve(topic)
    assert (first.id, first.payload) == ("j1", {"x": 1})
    q.ack(first)
    [second] = q.reserve(topic, wait=5)  # waits in BLPOP, woken on time by the client
    assert second.id == "j2"
    q.ack(second)
    assert q.topics() == [topic]
    assert q.stats(topic)["total"] == 0
    assert [e.event.value for e in q.events(topic).events].count("ack") == 2


def keys(client: Any, pattern: str = "*") -> set[str]:
    return {key.decode() for key in client.scan_iter(match=pattern, count=1000)}


def test_plain_url(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    prefix: str,
) -> None:
    q = open_queue(f"redis://127.0.0.1:{server.port}/0?prefix={prefix}")
    assert q.url == f"redis://127.0.0.1:{server.port}/0"
    round_trip(q)
    raw = raw_client(server)
    assert keys(raw) == keys(raw, f"{prefix}:*")  # nothing outside the prefix
    assert f"{prefix}:topics" in keys(raw)


def test_default_prefix_and_db(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Any
) -> None:
    round_trip(open_queue(f"redis://127.0.0.1:{server.port}"))
    assert "chronoq:{t:0}:events" in keys(raw_client(server), "chronoq:*")


def test_acl_user(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    prefix: str,
) -> None:
    raw = raw_client(server)
    # a user that may touch only the keys under chronoq's prefix
    raw.acl_setuser(
        "worker",
        enabled=True,
        passwords=["+s3cret-pw"],
        keys=[f"{prefix}:*"],
        channels=["*"],
        commands=["+@all"],
    )
    q = open_queue(f"redis://worker:s3cret-pw@127.0.0.1:{server.port}/0?prefix={prefix}")
    assert "s3cret-pw" not in q.url + repr(q)
    assert q.url == f"redis://worker:***@127.0.0.1:{server.port}/0"
    round_trip(q)
    users = {client["user"] for client in raw.client_list()}
    assert "worker" in users
    assert raw.acl_log() == []  # no command refused


def test_acl_wrong_password(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
) -> None:
    raw_client(server).acl_setuser(
        "worker", enabled=True, passwords=["+right"], keys=["*"], commands=["+@all"]
    )
    q = open_queue(f"redis://worker:wrong-pw@127.0.0.1:{server.port}/0")
    with pytest.raises(chronoq.errors.ChronoqError) as caught:
        q.put("t", 1)
    rendered = "".join(traceback.format_exception(caught.value))
    assert "wrong-pw" not in rendered
    assert "redis.exceptions" not in rendered
    assert f"127.0.0.1:{server.port}" in str(caught.value)


def test_unix_socket(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    tmp_path: Path,
    prefix: str,
) -> None:
    sock = tmp_path / "redis.sock"
    assert len(str(sock)) < 100  # sun_path limit
    server = make_server("--unixsocket", str(sock), "--unixsocketperm", "700")
    q = open_queue(f"unix://{sock}?prefix={prefix}")
    assert q.url == f"unix://{sock}"
    round_trip(q)
    raw = raw_client(server)
    assert {f"{prefix}:topics", f"{prefix}:{{t:0}}:events"} <= keys(raw)
    # chronoq's own connections are on the socket (flag U), the raw client's on TCP
    flags = [client["flags"] for client in raw.client_list()]
    assert any("U" in f for f in flags), flags


def test_unix_socket_with_db(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    tmp_path: Path,
    prefix: str,
) -> None:
    sock = tmp_path / "redis.sock"
    server = make_server("--unixsocket", str(sock), "--unixsocketperm", "700")
    round_trip(open_queue(f"unix://{sock}?db=5&prefix={prefix}"))
    assert keys(raw_client(server, db=5), f"{prefix}:*")
    assert not keys(raw_client(server, db=0))


@pytest.mark.parametrize("db", [3, 15])
def test_db_number_in_path(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    prefix: str,
    db: int,
) -> None:
    q = open_queue(f"redis://127.0.0.1:{server.port}/{db}?prefix={prefix}")
    round_trip(q)
    q.put("t", "stays", id="kept")
    stored = keys(raw_client(server, db=db))
    assert f"{prefix}:topics" in stored
    assert f"{prefix}:{{t:0}}:jobs" in stored
    assert raw_client(server, db=db).hexists(f"{prefix}:{{t:0}}:jobs", "kept")
    assert not keys(raw_client(server, db=0))  # nothing in the default db


def test_driver_options_reach_redis_py(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Any
) -> None:
    q = open_queue(f"{server.url}?client_name=cq-test&socket_timeout=5&prefix=opt")
    round_trip(q)
    names = {client["name"] for client in raw_client(server).client_list()}
    assert "cq-test" in names


@pytest.mark.parametrize(
    "query",
    [
        "bogus=1",
        "shard=4",  # a typo of shards
        "shards=0",
        "shards=-1",
        "shards=two",
        "shards=",
        "events_max=0",
        "events_max=many",
        "socket_timeout=soon",
        "retry_on_timeout=true",  # redis-py would send a call again: never
        "retry_on_error=ConnectionError",
    ],
)
def test_bad_option_is_invalid_input(query: str) -> None:
    # nothing listens there: the URL must be refused before any connection
    with pytest.raises(InvalidInput):
        chronoq.connect(f"redis://127.0.0.1:{free_port()}/0?{query}")


def test_a_cluster_takes_at_most_1024_shards() -> None:
    # a cluster's shard tags are searched one by one (keys.shard_tag); one server has no cap
    with pytest.raises(InvalidInput, match="at most 1024"):
        chronoq.connect(f"redis+cluster://127.0.0.1:{free_port()}?shards=1025")


@pytest.mark.parametrize(
    "path",
    ["/notanumber", "/1/2"],
)
def test_bad_db_is_invalid_input(path: str) -> None:
    with pytest.raises(InvalidInput):
        chronoq.connect(f"redis://127.0.0.1:{free_port()}{path}")


def test_bad_port_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        chronoq.connect("redis://127.0.0.1:99999/0")
    with pytest.raises(InvalidInput):
        chronoq.connect("redis://:pw@127.0.0.1:99999/0")


@pytest.mark.timeout(20)
def test_unreachable_port_is_backend_unavailable_on_first_use() -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    q = chronoq.connect(f"{url}?shards=2")  # lazy: no connection yet
    try:
        for call in (
            lambda: q.put("t", 1),
            lambda: q.reserve("t", wait=1),
            lambda: q.get("t", "x"),
            q.topics,
        ):
            with pytest.raises(BackendUnavailable) as caught:
                call()
            exc = caught.value
            assert str(exc).startswith(url)
            assert not isinstance(exc, redis.RedisError)
            rendered = "".join(traceback.format_exception(exc))
            assert "redis.exceptions" not in rendered
    finally:
        q.close()


def test_unreachable_unix_socket_is_backend_unavailable(tmp_path: Path) -> None:
    q = chronoq.connect(f"unix://{tmp_path / 'nobody.sock'}")
    try:
        with pytest.raises(BackendUnavailable, match=r"nobody\.sock"):
            q.put("t", 1)
    finally:
        q.close()
