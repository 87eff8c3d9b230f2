"""docs/contract.md §2.4 orders jobs within a shard (across shards: best effort), and
the event log is ordered per shard: an order is checked shard by shard. On a
store of one shard (SQLite, Redis by default) that is the whole order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def per_shard(queue: Any, ids: Iterable[str]) -> dict[int, list[str]]:
    """``ids`` in their order, split by the shard each is kept in."""
    shards: dict[int, list[str]] = {}
    for job_id in ids:
        shards.setdefault(queue.shard_of(job_id), []).append(job_id)
    return shards
