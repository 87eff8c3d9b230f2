"""The far tier under faults: a far tier of 12,000 jobs whose buckets are promoted
(lua/lib/7_far.lua) while redis-server is killed with ``kill -9`` (AOF, fsync
always) and restarted, and while a cluster primary fails over. Nothing
acknowledged is lost, nothing starts early, no job has two live leases."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ..topologies import RedisCluster
from .conftest import RunFactory, ServerFactory, assert_clean, assert_few_duplicates
from .far import FAR_OPTIONS, preload_far
from .run import Setup
from .test_cluster import topic_slots

FAR_JOBS = 12_000
FIRST_S, SPREAD_S = 4.0, 8.0  # due 4-12 s on: promoted from 2 s on, during the faults
SETUP = Setup(producers=1, jobs=1000, concurrency=8)


@pytest.mark.timeout(180)
def test_kill_9_of_redis_during_promotion_loses_nothing(
    redis_servers: ServerFactory, fault_run: RunFactory
) -> None:
    server = redis_servers("--appendonly", "yes", "--appendfsync", "always")
    run = fault_run(f"{server.url}?prefix=faults&{FAR_OPTIONS}", SETUP)
    preload_far(run, FAR_JOBS, FIRST_S, SPREAD_S)
    loaded = time.monotonic()
    run.start()
    run.wait_started()
    raw = redis.Redis(host="127.0.0.1", port=server.port)
    for at in (3.0, 7.0):  # seconds after the preload: promotions run from 2 s to 10 s
        time.sleep(max(0.0, loaded + at - time.monotonic()))
        buckets = raw.zcard(f"faults:{{{run.topic}:0}}:far")
        assert buckets > 0, "the far tier was promoted before the kill"
        server.stop(kill=True)
        print(f"killed at {at} s with {buckets} far bucket(s) left")
        time.sleep(1.0)
        server.start()
    raw.close()
    report = run.finish(drain_timeout=90)
    assert_clean(run, report)
    assert report.acknowledged >= FAR_JOBS


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    with RedisCluster(tmp_path / "cluster") as c:
        yield c


@pytest.mark.timeout(180)
def test_a_primary_fails_over_during_promotion(
    cluster: RedisCluster, fault_run: RunFactory
) -> None:
    run = fault_run(f"{cluster.url}?prefix=faults&replicas=1&{FAR_OPTIONS}", SETUP)
    busiest, _ = Counter(cluster.node_for_slot(s).port for s in topic_slots(run)).most_common(1)[0]
    preload_far(run, FAR_JOBS, FIRST_S, SPREAD_S)
    loaded = time.monotonic()
    run.start()
    run.wait_started()
    time.sleep(max(0.0, loaded + 3.0 - time.monotonic()))
    old = cluster.by_port(busiest)
    cluster.kill(old)
    new = cluster.failover_wait(old)
    print(f"{old} killed during promotion, {new} promoted")
    cluster.restart(old)
    report = run.finish(drain_timeout=90)
    assert_clean(run, report)
    assert_few_duplicates(run, report, faults=1)
    assert report.acknowledged >= FAR_JOBS
