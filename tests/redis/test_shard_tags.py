"""The hash tags of a topic's shards (keys.py): plain on one server; on a
cluster, spread over equal arcs of the slot ring, so that a topic's shards
split evenly over primaries of equal slot ranges whatever its name."""

from __future__ import annotations

import random
import string
from collections import Counter

from redis.crc import key_slot

from chronoq.backends.redis.keys import NEAR, SLOTS, shard_keys, shard_tag


def slot(tag: str) -> int:
    return int(key_slot(tag.encode()))


def test_one_server_keeps_the_plain_tags() -> None:
    assert shard_tag("orders", 3, shards=16, spread=False) == "orders:3"
    assert shard_tag("orders", 0, shards=1, spread=True) == "orders:0"
    assert shard_keys("chronoq", "orders", 3, shards=16, spread=False)[0] == (
        "chronoq:{orders:3}:jobs"
    )


def test_each_shard_lands_near_its_own_point_of_the_ring() -> None:
    for shards in (2, 3, 16, 64):
        tags = [shard_tag("orders", s, shards=shards, spread=True) for s in range(shards)]
        assert tags[0] == "orders:0"  # shard 0 is always plain
        assert len(set(tags)) == shards
        base = slot(tags[0])
        for s, tag in enumerate(tags):
            assert tag == f"orders:{s}" or tag.startswith(f"orders:{s}.")
            offset = (slot(tag) - base) % SLOTS
            assert 0 <= offset - s * SLOTS // shards < NEAR, (shards, s, tag)


def test_any_topic_splits_within_15_percent_over_three_equal_primaries() -> None:
    ranges = [(0, 5460), (5461, 10922), (10923, 16383)]  # as redis-cli --cluster create
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + ".:-_"
    for _ in range(500):
        topic = rng.choice(string.ascii_letters) + "".join(rng.choices(alphabet, k=12))
        owners = Counter(
            next(i for i, (lo, hi) in enumerate(ranges) if lo <= slot(tag) <= hi)
            for tag in (shard_tag(topic, s, shards=16, spread=True) for s in range(16))
        )
        assert sorted(owners.values()) == [5, 5, 6], (topic, owners)
