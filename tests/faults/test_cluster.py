"""Scenario d: Redis Cluster (3 primaries, a replica each; every write waits for one replica).
A primary serving some of the topic's shards is killed mid-run: its replica is promoted and work
goes on (the old primary comes back as a replica, so that writes can wait for one again). Then
the slots of the topic's shards are moved between primaries while the run is busy."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot

from chronoq.backends.redis.keys import shard_tag

from ..topologies import RedisCluster
from .conftest import RunFactory, assert_clean, assert_few_duplicates
from .run import Run, Setup

SHARDS = 16


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    with RedisCluster(tmp_path / "cluster") as c:
        yield c


def topic_slots(run: Run) -> list[int]:
    """The slots of the topic's shards (their hash tags on a cluster: keys.py)."""
    return [
        key_slot(shard_tag(run.topic, shard, shards=SHARDS, spread=True).encode())
        for shard in range(SHARDS)
    ]


@pytest.mark.timeout(120)
def test_kill_9_of_a_primary_fails_over_and_loses_nothing(
    cluster: RedisCluster, fault_run: RunFactory
) -> None:
    run = fault_run(f"{cluster.url}?prefix=faults&replicas=1")
    busiest, _ = Counter(cluster.node_for_slot(s).port for s in topic_slots(run)).most_common(1)[0]
    run.start()
    run.wait_started()
    time.sleep(1.0)
    old = cluster.by_port(busiest)
    started = time.monotonic()
    cluster.kill(old)
    new = cluster.failover_wait(old)
    print(f"{old} killed, {new} promoted in {time.monotonic() - started:.1f} s")
    cluster.restart(old)
    report = run.finish(drain_timeout=40)
    assert_clean(run, report)
    assert_few_duplicates(run, report, faults=1)


@pytest.mark.timeout(120)
def test_reshard_of_the_busy_slots_mid_run(cluster: RedisCluster, fault_run: RunFactory) -> None:
    # 16 slot moves take 4-9 s here: puts for 15 s, so that every move lands on a busy run
    run = fault_run(f"{cluster.url}?prefix=faults&replicas=1", Setup(rate=100))
    run.start()
    run.wait_started()
    time.sleep(0.5)
    started = time.monotonic()
    slots = sorted(set(topic_slots(run)))
    for n, slot in enumerate(slots):
        assert all(p.alive() for p in run.producers), f"puts over before move {n + 1}"
        others = [p for p in cluster.primaries() if p is not cluster.node_for_slot(slot)]
        cluster.migrate_slot(slot, others[n % len(others)])
    print(f"moved the {len(slots)} slots of the topic in {time.monotonic() - started:.1f} s")
    report = run.finish(drain_timeout=40)
    assert_clean(run, report)
