"""Flow control's state in a Redis shard (lua/lib/6_flow.lua): groups that came and went
leave nothing behind, and a purge takes the groups' state with the jobs."""

from __future__ import annotations

import uuid
from typing import Any

import redis

import chronoq
from chronoq import Job

from ..redis_server import RedisServer


def _flow_keys(raw: redis.Redis, prefix: str) -> dict[str, int]:
    sizes = {}
    for key in raw.scan_iter(f"{prefix}*ready>*"):
        name = key.decode().rsplit(">", 1)[1]
        kind = raw.type(key).decode()
        sizes[name] = {"hash": raw.hlen, "zset": raw.zcard, "set": raw.scard}[kind](key)
    return sizes


def test_groups_that_came_and_went_leave_nothing(redis_server: RedisServer) -> None:
    prefix = f"cq-{uuid.uuid4().hex[:12]}"
    raw = redis.Redis.from_url(redis_server.url)
    with chronoq.connect(f"{redis_server.url}?prefix={prefix}") as q:
        q.put_many("t", [Job(i, group=f"g{i}") for i in range(500)])
        q.set_limits("t", group_rate=1000, group_per=0.001)
        while jobs := q.reserve("t", 50):
            q.ack_many(jobs)
        for _ in range(60):  # the buckets, a few a call
            q.reserve("t")
        sizes: dict[str, Any] = _flow_keys(raw, prefix)
        assert set(sizes) <= {"f", "r"}, sizes  # the shard's own state and rules only
        q.put_many("t", [Job(i, group=f"g{i}") for i in range(50)])
        q.pause("t", group="g1")
        assert q.purge("t") == 50
        sizes = _flow_keys(raw, prefix)
        assert set(sizes) <= {"f", "r", "p"}, sizes  # limits and paused groups stay
    raw.close()
