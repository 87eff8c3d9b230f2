"""How evenly a topic's work lands on the primaries of a cluster: records, FCALL calls and CPU
per primary after putting (and then draining) many jobs, for several shard counts; which
primary each shard's slot falls on; and, from the hash alone, how uneven a topic is on average
over many topic names and primary counts (used by the model)."""

from __future__ import annotations

import statistics
import time
import uuid
from collections import Counter
from typing import Any

from common import RUN
from phases import drain_by, fill
from stores import PREFIX, Meter, Store, Usage, node, primary_of_slot, shard_slots

import chronoq
from chronoq.backends.redis.keys import SLOTS, shard_keys

TOPIC_SAMPLES = 1000  # topic names drawn for the average unevenness


def deviations(values: dict[int, float]) -> dict[int, float]:
    """Each value's deviation from the mean, as a fraction (+0.1: 10% above)."""
    mean = statistics.fmean(values.values())
    return {key: (value / mean - 1 if mean else 0.0) for key, value in values.items()}


def records(store: Store, topic: str, shards: int) -> dict[int, int]:
    """HLEN of the ``jobs`` hash of every shard, summed per primary."""
    slot_map = store.slot_map()
    held = dict.fromkeys(store.primaries, 0)
    for shard, slot in enumerate(shard_slots(topic, shards)):
        port = primary_of_slot(slot_map, slot)
        with node(port) as client:
            held[port] += int(
                client.hlen(shard_keys(PREFIX, topic, shard, shards=shards, spread=True)[0])
            )
    return held


def per_primary(usage: Usage) -> dict[str, Any]:
    return {
        "calls": {str(p): c for p, c in usage.calls.items()},
        "calls_deviation": {str(p): d for p, d in deviations(dict(usage.calls.items())).items()},
        "cpu_s": {str(p): c for p, c in usage.cpu.items()},
        "cpu_deviation": {str(p): d for p, d in deviations(usage.cpu).items()},
    }


def measure_spread(store: Store, shards: int, n: int) -> dict[str, Any]:
    """Put ``n`` due jobs with put_many(1,000) on ``shards`` shards, then drain them with
    reserve(count=100) + ack_many: what each primary held and did."""
    topic = f"bench.{RUN}.spread.{shards}"
    slot_map = store.slot_map()
    owners = Counter(primary_of_slot(slot_map, s) for s in shard_slots(topic, shards))
    q = chronoq.connect(f"{store.url}?shards={shards}")
    meter = Meter(store)
    try:
        meter.start()
        fill(q, topic, n)
        put = meter.stop()
        held = records(store, topic, shards)
        meter.start()
        began = time.perf_counter()
        drain_by(100)(q, topic, n, None)
        seconds = time.perf_counter() - began
        drained = meter.stop()
    finally:
        meter.close()
        q.close()
        store.flush()
    return {
        "shards": shards,
        "jobs": n,
        "shards_per_primary": {str(p): owners.get(p, 0) for p in store.primaries},
        "records": {str(p): r for p, r in held.items()},
        "records_deviation": {str(p): d for p, d in deviations(dict(held.items())).items()},
        "put": per_primary(put),
        "drain": per_primary(drained),
        "drain_jobs_per_s": n / seconds,
    }


def even_ranges(primaries: int) -> list[tuple[int, int, int]]:
    """Slot ranges as ``redis-cli --cluster create`` splits them: equal and contiguous."""
    bounds = [round(i * SLOTS / primaries) for i in range(primaries + 1)]
    return [(bounds[i], bounds[i + 1] - 1, i) for i in range(primaries)]


def busiest_share(shards: int, primaries: int, samples: int = TOPIC_SAMPLES) -> dict[str, float]:
    """Over ``samples`` random topic names: the busiest primary's share of the shards, as a
    multiple of the mean share (1.0 = even), mean and worst; assuming jobs spread evenly over
    the shards, so that a primary's work follows the number of shards it holds."""
    ranges = even_ranges(primaries)
    ratios = []
    for _ in range(samples):
        topic = uuid.uuid4().hex[:12]
        held = Counter(primary_of_slot(ranges, slot) for slot in shard_slots(topic, shards))
        ratios.append(max(held.values()) / (shards / primaries))
    return {"mean": statistics.fmean(ratios), "worst": max(ratios)}
