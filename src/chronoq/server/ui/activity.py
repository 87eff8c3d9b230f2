"""What the event log says happened lately, per topic: jobs put and acked per
few seconds (the sparklines) and the hand-over lag of recent reserves (the
histogram). The log is tailed, not re-read: each log shard is read from
where the last look stopped, so a page refreshed every 2 s reads only the
events of those 2 s. Nothing is read while nobody looks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from chronoq.aio import AsyncQueue
from chronoq.job import Event, LogShard
from chronoq.states import EventKind

__all__ = ["BUCKETS", "BUCKET_S", "Activity", "TopicView"]

log = logging.getLogger("chronoq")

BUCKET_S = 5  # seconds per sparkline step
BUCKETS = 36  # whole steps shown: three minutes (and the step under way)
LAG_KEEP = 1000  # reserves per topic whose lag the histogram counts
BACKFILL = 5000  # events read back from the newest when a log is first looked at
_PAGE = 2000  # events per read
_PAGES = 5  # reads per shard per refresh; beyond that the tail skips ahead
_REFRESH_S = 1.0  # one refresh serves the fragments of one poll
_FORGET_MS = 15 * 60 * 1000  # a topic quiet this long is dropped from memory
_BUCKET_MS = BUCKET_S * 1000


@dataclass
class _Topic:
    puts: dict[int, int] = field(default_factory=dict)  # bucket number -> jobs
    acks: dict[int, int] = field(default_factory=dict)
    lags: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=LAG_KEEP))
    last_ms: int = 0


@dataclass(frozen=True)
class TopicView:
    """One topic's recent activity: counts per step, oldest first, the last
    for the step under way; and the lags (ms) of its latest reserves with
    the time of the oldest of them."""

    puts: list[int]
    acks: list[int]
    lags: list[int]
    lags_since_ms: int | None


_EMPTY = TopicView([0] * (BUCKETS + 1), [0] * (BUCKETS + 1), [], None)


class Activity:
    """The tail of the event log, shared by the requests of one server process."""

    def __init__(self, queue: AsyncQueue) -> None:
        self._queue = queue
        self._lock = asyncio.Lock()
        self._after: dict[LogShard, int] = {}
        self._shards: dict[str, list[LogShard]] = {}
        self._topics: dict[str, _Topic] = {}
        self._refreshed = -_REFRESH_S

    async def views(self, topics: Sequence[str]) -> dict[str, TopicView]:
        """The activity of ``topics``, after reading what the log gained."""
        async with self._lock:  # one read of the log at a time
            stale = time.monotonic() - self._refreshed >= _REFRESH_S
            if stale or not set(topics) <= self._shards.keys():
                await self._read(list(topics))
                self._refreshed = time.monotonic()
            now_bucket = int(time.time() * 1000) // _BUCKET_MS
            return {topic: self._view(topic, now_bucket) for topic in topics}

    def _view(self, topic: str, now_bucket: int) -> TopicView:
        seen = self._topics.get(topic)
        if seen is None:
            return _EMPTY
        steps = range(now_bucket - BUCKETS, now_bucket + 1)
        return TopicView(
            [seen.puts.get(step, 0) for step in steps],
            [seen.acks.get(step, 0) for step in steps],
            [lag for _, lag in seen.lags],
            seen.lags[0][0] if seen.lags else None,
        )

    async def _read(self, topics: list[str]) -> None:
        queue = self._queue
        shards: set[LogShard] = set()
        for topic in topics:
            if topic not in self._shards:
                # SQLite keeps one log for all topics: read it once, for every
                # topic, rather than once per topic with a filter
                self._shards[topic] = [
                    replace(s, topic=None) if s.shared else s for s in await queue.log_shards(topic)
                ]
            shards.update(self._shards[topic])
        for shard in sorted(shards, key=lambda s: (s.name, s.shard)):
            await self._tail(queue, shard)
        self._forget(int(time.time() * 1000))

    async def _tail(self, queue: AsyncQueue, shard: LogShard) -> None:
        after = self._after.get(shard)
        if after is None:
            after = max(0, await queue.log_head(shard) - BACKFILL)
        head = after
        for _ in range(_PAGES):
            read = await queue.log_read(shard, after, limit=_PAGE)
            head = read.head
            if head < after:  # the store lost or replaced its log: start again
                after = max(0, head - BACKFILL)
                continue
            for event in read.events:
                self._count(event)
            after = read.upto
            if after >= head:
                break
        if head - after > BACKFILL:
            log.info("dashboard: %s is %d events ahead; skipping to its tail", shard.name, head)
            after = head - BACKFILL
        self._after[shard] = after

    def _count(self, event: Event) -> None:
        kind = event.event
        if kind not in (EventKind.PUT, EventKind.ACK, EventKind.RESERVE):
            return
        seen = self._topics.get(event.topic)
        if seen is None:
            seen = self._topics[event.topic] = _Topic()
        seen.last_ms = max(seen.last_ms, event.ts_ms)
        step = event.ts_ms // _BUCKET_MS
        if kind == EventKind.PUT:
            seen.puts[step] = seen.puts.get(step, 0) + 1
        elif kind == EventKind.ACK:
            seen.acks[step] = seen.acks.get(step, 0) + 1
        elif event.lag_ms is not None:
            seen.lags.append((event.ts_ms, max(event.lag_ms, 0)))

    def _forget(self, now_ms: int) -> None:
        quiet = now_ms - _FORGET_MS
        for topic in [t for t, seen in self._topics.items() if seen.last_ms < quiet]:
            del self._topics[topic]
        oldest_step = now_ms // _BUCKET_MS - BUCKETS
        for seen in self._topics.values():
            for counts in (seen.puts, seen.acks):
                for step in [s for s in counts if s < oldest_step]:
                    del counts[step]
