"""chronoq on a real Redis Cluster (3 primaries, a replica each; the
``redis_cluster`` fixture): routing by slot, the library on every primary,
redirects, WAIT on the writing node, waiting across shards with one blocked
connection per topic shard, fair reserve across shards, per-shard stats."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import chronoq
import chronoq.aio
from chronoq import Job
from chronoq.errors import DurabilityError

from ..aio_bridge import BridgedQueue


@pytest.fixture
def url(redis_cluster: Any) -> str:
    return f"{redis_cluster.url}?prefix=cq-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queue(url: str) -> Iterator[chronoq.Queue]:
    q = chronoq.connect(url)
    yield q
    q.close()


def primaries(cluster_url: str) -> list[redis.Redis]:
    """A client per primary, found the way chronoq finds them (CLUSTER SLOTS)."""
    host, port = cluster_url.split("://", 1)[1].split("?")[0].split(",")[0].split(":")
    seed = redis.Redis(host=host, port=int(port))
    slots = seed.execute_command("CLUSTER", "SLOTS")
    addresses = sorted({(entry[2][0].decode(), int(entry[2][1])) for entry in slots})
    seed.close()
    return [redis.Redis(host=h, port=p) for h, p in addresses]


def ids_by_shard(queue: chronoq.Queue, per_shard: int) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {shard: [] for shard in range(queue.shards)}
    n = 0
    while any(len(ids) < per_shard for ids in found.values()):
        job_id = f"id{n}"
        n += 1
        if len(found[queue.shard_of(job_id)]) < per_shard:
            found[queue.shard_of(job_id)].append(job_id)
    return found


def test_a_topic_spreads_over_every_primary(queue: chronoq.Queue, url: str) -> None:
    assert queue.shards == 16  # the cluster default
    queue.put_many("spread", [Job(n, id=f"j{n}") for n in range(1600)])
    prefix = url.split("prefix=")[1]
    jobs_per_primary = []
    for client in primaries(url):
        keys = list(client.scan_iter(match=f"{prefix}:*:jobs", count=1000))
        jobs_per_primary.append(sum(client.hlen(key) for key in keys))
        client.close()
    assert len(jobs_per_primary) == 3
    assert sum(jobs_per_primary) == 1600
    assert all(count > 0 for count in jobs_per_primary), jobs_per_primary
    stats = queue.stats("spread", per_shard=True)
    assert stats["ready"] == 1600
    assert len(stats["shards"]) == 16
    assert sum(shard["ready"] for shard in stats["shards"]) == 1600


def test_every_topics_shards_split_evenly_over_the_primaries(
    queue: chronoq.Queue, url: str
) -> None:
    """16 shards over 3 primaries of equal slot ranges: 5 or 6 shards each
    (within ±15% of the mean 5.33), whatever the topic's name."""
    prefix = url.split("prefix=")[1]
    clients = primaries(url)
    ids = ids_by_shard(queue, 1)
    try:
        for topic in ("orders", "emails", "a", "topic.with.dots", "x:y", "bench.7.spread.16"):
            queue.put_many(topic, [Job(s, id=ids[s][0]) for s in range(16)])
            shards_per_primary = [
                len(list(client.scan_iter(match=f"{prefix}:{{{topic}:*}}:jobs", count=1000)))
                for client in clients
            ]
            assert sorted(shards_per_primary) == [5, 5, 6], (topic, shards_per_primary)
    finally:
        for client in clients:
            client.close()


def test_the_library_is_loaded_again_where_it_is_missing(queue: chronoq.Queue, url: str) -> None:
    queue.put("lib", 1, id="a")
    clients = primaries(url)
    for client in clients:
        client.execute_command("FUNCTION", "FLUSH")
    ids = ids_by_shard(queue, 1)
    queue.put_many("lib", [Job(shard, id=ids[shard][0]) for shard in range(16)])
    assert len(queue.reserve("lib", count=20)) == 17
    for client in clients:
        assert client.execute_command("FUNCTION", "LIST"), "a primary without the library"
        client.close()


def test_a_moved_slot_is_followed(redis_cluster: Any, url: str) -> None:
    q = chronoq.connect(url.replace("prefix=", "shards=1&prefix="))
    try:
        q.put("mv", "x", id="a")
        key_slot = redis.crc.key_slot(f"{url.split('prefix=')[1]}:{{mv:0}}:jobs".encode())
        source, target, ids = _begin_migration(url, key_slot)
        _migrate(source, target, source.execute_command("CLUSTER", "GETKEYSINSLOT", key_slot, 1000))
        for client in ids:
            client.execute_command("CLUSTER", "SETSLOT", key_slot, "NODE", ids[target])
        info = q.get("mv", "a")  # the old map sends it to the source: MOVED
        assert info is not None and info.payload == "x"
        [job] = q.reserve("mv")
        q.ack(job)
        for client in ids:
            client.close()
    finally:
        q.close()


def _slots_of(client: redis.Redis, node_id: str) -> set[int]:
    slots: set[int] = set()
    for first, last, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
        if primary[2].decode() == node_id:
            slots.update(range(first, last + 1))
    return slots


def test_replicas_are_confirmed_on_the_node_that_took_the_write(url: str) -> None:
    q = chronoq.connect(url + "&replicas=1")
    try:
        results = q.put_many("w", [Job(n, id=f"j{n}") for n in range(64)])
        assert all(r.created for r in results)
    finally:
        q.close()
    q = chronoq.connect(url + "&replicas=2&replica_timeout_ms=50")  # one replica each
    try:
        with pytest.raises(DurabilityError, match="only 1 of 2 replicas"):
            q.put("w", "x", id="more")
    finally:
        q.close()


def _blocked_pops(url: str) -> int:
    count = 0
    for client in primaries(url):
        count += sum(1 for c in client.client_list() if c.get("cmd") == "blpop")
        client.close()
    return count


def test_waiters_share_one_blocked_connection_per_shard_and_wake_on_any(
    queue: chronoq.Queue, url: str
) -> None:
    got: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        jobs = queue.reserve("wait", wait=20)
        with lock:
            got.extend(j.id for j in jobs)

    threads = [threading.Thread(target=consume) for _ in range(24)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    assert 0 < _blocked_pops(url) <= 16  # not one per waiting thread
    ids = ids_by_shard(queue, 2)
    queue.put_many("wait", [Job(None, id=i) for shard in ids.values() for i in shard[:1]])
    queue.put_many("wait", [Job(None, id=ids[s][1], delay=0.2) for s in range(8)])
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert len(got) == 24 and len(set(got)) == 24


def test_a_backlog_on_one_shard_does_not_starve_the_others(queue: chronoq.Queue) -> None:
    ids = ids_by_shard(queue, 1)
    backlog_shard = 3
    # the backlog: jobs whose ids are all in one shard
    backlog = []
    n = 0
    while len(backlog) < 1500:
        job_id = f"bk{n}"
        n += 1
        if queue.shard_of(job_id) == backlog_shard:
            backlog.append(Job(n, id=job_id))
    queue.put_many("fair", backlog)
    trickle = {ids[s][0] for s in range(16) if s != backlog_shard}
    queue.put_many("fair", [Job(None, id=i, delay=0.3) for i in sorted(trickle)])
    started_after_due: dict[str, int] = {}
    backlog_after_due = 0
    due_at = time.time() + 0.3
    while trickle - set(started_after_due):
        jobs = queue.reserve("fair", count=10, wait=2)
        assert jobs, "the trickle jobs were never reserved"
        for job in jobs:
            if job.id in trickle:
                started_after_due[job.id] = backlog_after_due
            elif time.time() >= due_at:
                backlog_after_due += 1
        queue.ack_many(jobs)
    # every trickle job was started within a few calls of its due time, while
    # the backlog still had more than a thousand jobs to go
    assert max(started_after_due.values()) <= 50, started_after_due


def test_the_asyncio_api_on_a_cluster(url: str) -> None:
    q = BridgedQueue(lambda: chronoq.aio.connect(url))
    try:
        q.put("aio", {"x": 1}, id="a", delay=0.1)
        [job] = q.reserve("aio", wait=5)
        assert job.payload == {"x": 1}
        q.ack(job)
        assert q.stats("aio")["total"] == 0
    finally:
        q.close()


def _begin_migration(url: str, key_slot: int) -> tuple[redis.Redis, redis.Redis, dict[Any, str]]:
    clients = primaries(url)
    ids = {c: c.execute_command("CLUSTER", "MYID").decode() for c in clients}
    source = next(c for c in clients if key_slot in _slots_of(c, ids[c]))
    target = next(c for c in clients if c is not source)
    target.execute_command("CLUSTER", "SETSLOT", key_slot, "IMPORTING", ids[source])
    source.execute_command("CLUSTER", "SETSLOT", key_slot, "MIGRATING", ids[target])
    return source, target, ids


def _migrate(source: redis.Redis, target: redis.Redis, keys: list[bytes]) -> None:
    port = target.connection_pool.connection_kwargs["port"]
    source.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", *keys)


def test_a_call_during_a_migration_waits_for_it_and_never_runs_half_way(url: str) -> None:
    q = chronoq.connect(url.replace("prefix=", "shards=1&prefix="))
    quick = chronoq.connect(url.replace("prefix=", "shards=1&redirect_budget_ms=300&prefix="))
    try:
        q.put_many("mig", [Job(n, id=f"j{n}") for n in range(20)])
        quick.stats("mig")  # its slot map is read before the migration
        key_slot = redis.crc.key_slot(f"{url.split('prefix=')[1]}:{{mig:0}}:jobs".encode())
        source, target, ids = _begin_migration(url, key_slot)
        keys = source.execute_command("CLUSTER", "GETKEYSINSLOT", key_slot, 1000)
        _migrate(source, target, keys[:1])  # the shard is split between two nodes
        with pytest.raises(chronoq.errors.BackendUnavailable, match="nothing was run"):
            quick.put("mig", "x", id="refused")
        done: list[Any] = []
        putter = threading.Thread(target=lambda: done.append(q.put("mig", "y", id="during")))
        putter.start()
        time.sleep(0.3)
        assert not done  # refused before it ran, and sent again
        _migrate(source, target, keys[1:])
        for client in ids:
            client.execute_command("CLUSTER", "SETSLOT", key_slot, "NODE", ids[target])
        putter.join(10)
        assert done and done[0].created
        stats = q.stats("mig")
        assert stats["ready"] == 21  # "refused" never ran; "during" ran once
        assert q.get("mig", "refused") is None
        assert len([e for e in q.events("mig").events if e.event.value == "put"]) == 21
        for client in ids:
            client.close()
    finally:
        q.close()
        quick.close()
