"""The forecast on Redis (lua/forecast.lua, topicwide.forecast): it reads the
shards' ``delayed`` sets and far bucket counts and nothing else, writes nothing (so it waits for no
replica), and a shard given the first shard's start counts from it, a job
that fell due since then but is not promoted yet included."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import chronoq
from chronoq import Job
from chronoq.backends.redis.keys import PARTS, shard_keys
from chronoq.backends.redis.scripts import Scripts
from chronoq.errors import DurabilityError

from ..redis_server import RedisServer

H = 3600.0
SHARDS = 4


def _snapshot(client: Any, prefix: str) -> dict[bytes, bytes]:
    return {key: client.dump(key) for key in client.scan_iter(match=f"{prefix}:*", count=1000)}


def _put_spread(q: chronoq.Queue, topic: str) -> None:
    """Jobs on every shard: 20 due in the first hour, 10 in the third, 10 after."""
    hours = [0.5] * 20 + [2.5] * 10 + [30.0] * 10
    q.put_many(topic, [Job(n, id=f"j{n}", delay=h * H) for n, h in enumerate(hours)])
    q.put_many(topic, [Job("ready", id=f"r{n}") for n in range(5)])


def test_it_reads_only_the_delayed_sets_and_far_counts_and_writes_nothing(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    prefix: str,
) -> None:
    q = open_queue(f"{server.url}?prefix={prefix}&shards={SHARDS}")
    client = raw_client(server)
    _put_spread(q, "mail")
    assert {q.shard_of(f"j{n}") for n in range(40)} == set(range(SHARDS))
    before = _snapshot(client, prefix)
    found = q.forecast("mail", until=time.time() + 3 * H)
    assert (found.counts, found.later) == ((20, 0, 10), 10)
    assert _snapshot(client, prefix) == before  # not a key changed, no event appended
    # without the records, near or far (and every other part of the shards) it
    # answers the same: the delayed sets and the far buckets' counts are enough
    counted = {PARTS.index(part) for part in ("delayed", "far", "farn")}
    for shard in range(SHARDS):
        keys = shard_keys(prefix, "mail", shard, shards=SHARDS, spread=False)
        client.delete(*(key for n, key in enumerate(keys) if n not in counted))
    pages = list(client.scan_iter(match=f"{prefix}:*:far:*"))
    assert pages  # the jobs due in 2.5 and 30 hours are far
    client.delete(*pages)
    again = q.forecast("mail", until=time.time() + 3 * H)
    assert (again.counts, again.later) == ((20, 0, 10), 10)


def test_it_waits_for_no_replica(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], prefix: str
) -> None:
    """With ``replicas=1`` and no replica, every write raises DurabilityError
    once its WAIT times out; the forecast, listed as read-only, sends none."""
    plain = open_queue(f"{server.url}?prefix={prefix}&shards={SHARDS}")
    _put_spread(plain, "mail")
    q = open_queue(f"{server.url}?prefix={prefix}&shards={SHARDS}&replicas=1&replica_timeout_ms=50")
    assert q.forecast("mail", until=time.time() + 3 * H).counts == (20, 0, 10)
    with pytest.raises(DurabilityError):
        q.stats("mail")  # its upkeep may write: it waits


def test_a_shard_counts_from_the_start_it_is_given(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    prefix: str,
) -> None:
    q = open_queue(f"{server.url}?prefix={prefix}")
    q.put("mail", None, id="soon", delay=0.05)
    q.put("mail", None, id="later", delay=1.5 * H)
    time.sleep(0.2)  # "soon" fell due; nothing has promoted it
    client = raw_client(server)
    keys = shard_keys(prefix, "mail", 0, shards=1, spread=False)
    function = Scripts().functions["forecast"]
    start = int(client.time()[0]) * 1000 - 60_000  # a minute ago: before "soon" fell due
    step = int(H * 1000)

    def call(*args: int) -> list[int]:
        reply = client.fcall(function, len(keys), *keys, 1000, *args)
        return [int(v) for v in reply]

    # {start, later, counts...}: "soon" in the first step, trailing zeros left out
    assert call(start + 3 * step, step, 10_000, start) == [start, 0, 1, 1]
    now = call(start + 3 * step, step, 10_000, -1)  # its own now: "soon" is ready then
    assert now[0] > start and now[1:] == [0, 0, 1]
    assert call(start + 3 * step, step, 2, start) == [start]  # three steps, two allowed
    assert call(start, step, 10_000, start) == [start]  # until not after start
    assert call(start + 1, step, 10_000, start) == [start, 1, 1]  # one step, "later" after it
