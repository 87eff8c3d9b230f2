"""The operations on a whole topic of the Redis backend: counts, the
forecast, the dead jobs, requeue, purge, pause and the merged event log. Written once, without
I/O, as core.py's are (operations.py finds them here)."""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Sequence
from typing import Any

from chronoq.backends.redis.codec import decode_entry, id_key, info_from_record, key_id
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.flow import group_counts
from chronoq.backends.redis.keys import topics_key
from chronoq.backends.redis.steps import Command, Steps
from chronoq.errors import InvalidInput
from chronoq.job import MAX_FORECAST_STEPS, Event, EventPage, Forecast, JobInfo, forecast_steps

__all__ = ["dead", "events", "forecast", "purge", "requeue", "set_paused", "stats", "topics"]

_PURGE_BATCH = 1000


def stats(
    core: RedisCore, topic: str, per_shard: bool = False, groups: bool = False
) -> Steps[dict[str, Any]]:
    totals = {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0}
    paused = False
    next_due: int | None = None
    shards = []
    replies = yield from core.run_many("stats", topic, ((n, []) for n in range(core.shards)))
    for reply in replies:
        delayed, ready, reserved, dead, is_paused, first = (int(v) for v in reply)
        counts = dict(zip(totals, (delayed, ready, reserved, dead), strict=True))
        for name, value in counts.items():
            totals[name] += value
        paused = paused or bool(is_paused)
        if first >= 0:
            next_due = first if next_due is None else min(next_due, first)
        if per_shard:
            shards.append({**counts, "next_due_at": first if first >= 0 else None})
    stats: dict[str, Any] = {
        **totals,
        "total": sum(totals.values()),
        "paused": paused,
        "next_due_at": next_due,
    }
    if per_shard:
        stats["shards"] = shards
    if groups:
        stats["groups"] = yield from group_counts(core, topic)
    return stats


def forecast(core: RedisCore, topic: str, until_ms: int, step_ms: int) -> Steps[Forecast]:
    """The first shard's call picks the start by its server's clock, and the
    others count from it, so that the steps of every shard line up; each
    shard is read as it is when its call runs (lua/forecast.lua)."""
    args: list[Any] = [until_ms, step_ms, MAX_FORECAST_STEPS]
    first = yield from core.run("forecast", topic, 0, *args, -1)
    start = int(first[0])
    steps = forecast_steps(start, until_ms, step_ms)  # the script counted nothing if it raises
    replies = [first]
    if core.shards > 1:
        rest = ((shard, [*args, start]) for shard in range(1, core.shards))
        replies += yield from core.run_many("forecast", topic, rest)
    counts = [0] * steps
    later = 0
    for reply in replies:
        later += int(reply[1])
        for i, n in enumerate(reply[2:]):
            counts[i] += int(n)
    return Forecast(topic, start, step_ms / 1000, tuple(counts), later)


def topics(core: RedisCore) -> Steps[list[str]]:
    names: set[bytes] = yield Command(("SMEMBERS", topics_key(core.prefix)))
    return sorted(name.decode() for name in names)


def dead(core: RedisCore, topic: str, limit: int) -> Steps[list[JobInfo]]:
    found: list[tuple[float, JobInfo]] = []
    replies = yield from core.run_many("dead", topic, ((n, [limit]) for n in range(core.shards)))
    for reply in replies:
        now = int(reply[0])
        for b in range(1, len(reply), 3):
            info = info_from_record(topic, key_id(reply[b]), reply[b + 1], now)
            if info is not None:
                found.append((float(reply[b + 2]), info))
    found.sort(key=lambda death: death[0])  # oldest death first, across shards
    return [info for _, info in found[:limit]]


def requeue(core: RedisCore, topic: str, ids: Sequence[str] | None) -> Steps[int]:
    moved = 0
    if ids is not None:
        for shard, indexes in core.by_shard(ids).items():
            named = (id_key(ids[i]) for i in indexes)
            moved += int((yield from core.run("requeue", topic, shard, 0, *named)))
        return moved
    for shard in range(core.shards):
        while (n := int((yield from core.run("requeue", topic, shard, _PURGE_BATCH)))) > 0:
            moved += n
    return moved


def purge(core: RedisCore, topic: str) -> Steps[int]:
    deleted = 0
    for shard in range(core.shards):
        while (n := int((yield from core.run("purge", topic, shard, _PURGE_BATCH)))) >= 0:
            deleted += n
    if not (yield from stats(core, topic))["paused"]:
        yield Command(("SREM", topics_key(core.prefix), topic))
        core.known_topics.discard(topic)
    return deleted


def set_paused(core: RedisCore, topic: str, paused: bool) -> Steps[None]:
    if paused:
        yield from core.register(topic)
    for shard in range(core.shards):
        yield from core.run("pause", topic, shard, "1" if paused else "0")


def events(core: RedisCore, topic: str | None, cursor: str | None, limit: int) -> Steps[EventPage]:
    # the cursor maps each stream to the seq of the last event read from it
    positions = _parse_cursor(cursor)
    names = [topic] if topic is not None else (yield from topics(core))
    streams: list[list[tuple[str, Event]]] = []
    for name in names:
        for shard in range(core.shards):
            key = core.keys(name, shard)[6]
            after = positions.get(key, 0)
            # an entry's id is its last event's seq: from the entry holding after + 1
            entries: list[tuple[bytes, dict[bytes, bytes]]] = yield Command(
                ("XRANGE", key, f"{after + 1}-0", "+", "COUNT", limit)
            )
            streams.append(
                [
                    (key, event)
                    for entry_id, fields in entries
                    for event in decode_entry(name, entry_id, fields)
                    if event.seq > after
                ]
            )
    # oldest first across streams; each stream stays in its own order, so a
    # page is a prefix of every stream and the cursor loses nothing
    merged = heapq.merge(*streams, key=lambda item: (item[1].ts_ms, item[1].seq))
    page = list(itertools.islice(merged, limit))
    for key, event in page:
        positions[key] = event.seq
    return EventPage([event for _, event in page], json.dumps(positions, sort_keys=True))


def _parse_cursor(cursor: str | None) -> dict[str, int]:
    if cursor is None:
        return {}
    try:
        positions = json.loads(cursor)
    except (TypeError, ValueError):
        positions = None
    if not isinstance(positions, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 0 for k, v in positions.items()
    ):
        raise InvalidInput(
            f"bad event cursor {cursor!r}: pass the cursor of a previous page, or None"
        )
    return positions
