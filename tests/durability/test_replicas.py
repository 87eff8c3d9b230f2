"""``?replicas=N&replica_timeout_ms=M``: writes wait for N replicas (WAIT) and
raise DurabilityError when fewer confirmed, against a real replica."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import chronoq
from chronoq.errors import DurabilityError

from ..redis_server import RedisServer


@pytest.fixture
def primary_and_replica(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    # no 5 s diskless-sync delay: the replica syncs at once
    primary = RedisServer(tmp_path / "primary", "--repl-diskless-sync-delay", "0")
    replica = RedisServer(tmp_path / "replica", "--replicaof", "127.0.0.1", str(primary.port))
    client = redis.Redis(port=primary.port)
    deadline = time.monotonic() + 20
    # synced when the primary sees the replica online and it acknowledges a write
    client.set("probe", "1")  # WAIT with no write of its own would not wait for the sync
    while client.wait(1, 100) < 1:
        assert time.monotonic() < deadline, "the replica did not sync"
    client.delete("probe")
    client.close()
    yield primary, replica
    replica.stop()
    primary.stop()


def test_writes_wait_for_the_replica(primary_and_replica: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = primary_and_replica
    with chronoq.connect(f"{primary.url}?replicas=1&replica_timeout_ms=2000") as q:
        r = q.put("t", {"n": 1}, id="a")
        job = q.reserve("t")[0]
        q.ack(job)
        assert r.created and q.get("t", "a") is None
    # the replica has what was confirmed: the put, the reserve and the ack events
    with chronoq.connect(replica.url) as on_replica:
        kinds = [e.event for e in on_replica.events("t").events]
        assert kinds == ["put", "reserve", "ack"]


def test_too_few_replicas_raise_durability_error(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, _replica = primary_and_replica
    with chronoq.connect(f"{primary.url}?replicas=2&replica_timeout_ms=200") as q:
        with pytest.raises(DurabilityError, match="only 1 of 2 replicas"):
            q.put("t", 1, id="x")
        # applied on the primary all the same; a retry with the same id creates nothing
        info = q.get("t", "x")
        assert info is not None
        with pytest.raises(DurabilityError):
            assert not q.put("t", 1, id="x").created


def test_a_lost_replica_is_reported(primary_and_replica: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = primary_and_replica
    with chronoq.connect(f"{primary.url}?replicas=1&replica_timeout_ms=300") as q:
        q.put("t", 1, id="before")
        replica.stop(kill=True)
        with pytest.raises(DurabilityError, match="only 0 of 1"):
            q.put("t", 1, id="after")
        assert q.get("t", "after") is not None  # reads need no replica


def test_without_the_option_no_wait_happens(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = primary_and_replica
    replica.stop(kill=True)
    with chronoq.connect(primary.url) as q:  # replicas=0: the default
        assert q.put("t", 1, id="x").created
