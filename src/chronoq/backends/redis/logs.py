"""Reading the Redis store in bulk: the event log of each topic and shard (a
stream whose entries are named by the seq of their last event, see
lua/lib/3_events.lua, flush_events) for export and the Spark pipeline, and a
shard's jobs page by page. Written once, without I/O, as core.py is."""

from __future__ import annotations

from typing import Any

from chronoq.backends.redis.codec import decode_entry, entry_last_seq, info_from_record, key_id
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.keys import logs_key, topics_key
from chronoq.backends.redis.steps import Pipeline, Steps
from chronoq.errors import InvalidInput
from chronoq.job import JobInfo, JobPage, LogRead, LogShard

__all__ = ["jobs", "log_read", "log_shards", "log_trim"]

_FAR_PAGES = 16  # a far bucket's lists (lua/lib/7_far.lua)
_EVENTS_PER_ENTRY = 64  # a guess for XRANGE's COUNT: entries pack 22-4,000 bytes of events


def _raised(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def log_shards(core: RedisCore, topic: str | None) -> Steps[list[LogShard]]:
    """Every shard of ``topic``, or of every topic that ever had a job put
    (the log set; the topic set as well, for stores written before it)."""
    if topic is not None:
        topics = [topic]
    else:
        replies = yield Pipeline(
            [("SMEMBERS", logs_key(core.prefix)), ("SMEMBERS", topics_key(core.prefix))]
        )
        topics = sorted({name.decode() for names in _raised(replies) for name in names})
    return [LogShard(core.keys(name, n)[6], name, n) for name in topics for n in range(core.shards)]


def _stream(core: RedisCore, shard: LogShard) -> str:
    """The stream's key, which is also the shard's name."""
    if shard.topic is None or not 0 <= shard.shard < core.shards:
        raise InvalidInput(f"{core.url}: no event log {shard.name!r} (see log_shards)")
    return core.keys(shard.topic, shard.shard)[6]


def _head(info: Any) -> int:
    """The seq of the stream's newest event from XINFO STREAM (0: no stream).
    Its last generated id outlives the entries: trimming keeps it."""
    if isinstance(info, Exception):
        if "no such key" in str(info).lower():
            return 0
        raise info
    fields = dict(zip(info[::2], info[1::2], strict=True))
    return entry_last_seq(fields[b"last-generated-id"])


def log_read(core: RedisCore, shard: LogShard, after: int, limit: int) -> Steps[LogRead]:
    key = _stream(core, shard)
    count = max(1, limit // _EVENTS_PER_ENTRY)
    # the head first: an entry added between the two commands is then one
    # the range may show, never one counted as trimmed
    info, entries = yield Pipeline(
        [("XINFO", "STREAM", key), ("XRANGE", key, f"{after + 1}-0", "+", "COUNT", count)]
    )
    head = _head(info)
    if isinstance(entries, Exception):
        raise entries
    topic = shard.topic
    assert topic is not None
    events = [
        event
        for entry_id, fields in entries
        for event in decode_entry(
            topic, entry_id, dict(zip(fields[::2], fields[1::2], strict=True))
        )
        if event.seq > after
    ]
    if events:
        # entries are trimmed whole and from the oldest: a hole is only ever
        # at the start. The head read first may be older than the range.
        last = events[-1].seq
        return LogRead(events, events[0].seq - after - 1, max(head, last), last)
    if head <= after:
        return LogRead([], 0, head, after)
    return LogRead([], head - after, head, head)  # every event after ``after`` is gone


def log_trim(core: RedisCore, shard: LogShard, upto: int) -> Steps[None]:
    """Remove the entries whose events all have a seq up to ``upto``."""
    [reply] = yield Pipeline([("XTRIM", _stream(core, shard), "MINID", f"{upto + 1}-0")])
    _raised([reply])


def jobs(core: RedisCore, topic: str, shard: int, cursor: str | None, limit: int) -> Steps[JobPage]:
    """A page of the shard's jobs, read at the server's time: the far tier's
    first (cursor ``f<start>.<page>.<index>``; a page may come back short, even
    empty, where many far jobs were deleted), then one HSCAN of the job records
    (an HSCAN cursor: digits). Far first, as promotion moves jobs from far to
    near: one promoted while a listing runs is met in the records. A job moved
    the other way meanwhile (rescheduled or retried beyond the horizon) may be
    missed, as HSCAN may miss a record not there for the whole scan."""
    if not 0 <= shard < core.shards:
        raise InvalidInput(f"{core.url}: shard {shard} is not one of 0..{core.shards - 1}")
    if cursor is None or cursor.startswith("f"):
        far = _far_cursor(cursor)
        reply = yield from core.run("far_jobs", topic, shard, *far, limit)
        now, after, flat = int(reply[0]), reply[1], reply[2:]
        found = _infos(topic, flat, now)
        if after:
            return JobPage(found, "f{}.{}.{}".format(*after))
        if found:
            return JobPage(found, "0")
        cursor = "0"  # the far tier is empty: the records at once
    # HSCAN's cursor: an unsigned 64-bit number in ASCII digits (isdigit alone takes "²")
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 20) or int(cursor) >= 1 << 64:
        raise InvalidInput(f"bad job cursor {cursor!r}: pass the cursor of a previous page")
    key = core.keys(topic, shard)[0]
    clock, (after_scan, flat) = _raised(
        (yield Pipeline([("TIME",), ("HSCAN", key, cursor, "COUNT", limit)]))
    )
    now = int(clock[0]) * 1000 + int(clock[1]) // 1000
    return JobPage(_infos(topic, flat, now), None if after_scan == b"0" else after_scan.decode())


def _far_cursor(cursor: str | None) -> tuple[int, int, int]:
    if cursor is None:
        return 0, 0, 0
    parts = cursor[1:].split(".")
    if len(parts) == 3 and all(p.isascii() and p.isdigit() and len(p) <= 16 for p in parts):
        start, page, index = (int(p) for p in parts)
        if page < _FAR_PAGES:
            return start, page, index
    raise InvalidInput(f"bad job cursor {cursor!r}: pass the cursor of a previous page")


def _infos(topic: str, flat: list[Any], now: int) -> list[JobInfo]:
    jobs = []
    for n in range(0, len(flat), 2):
        info = info_from_record(topic, key_id(flat[n]), flat[n + 1], now)
        if info is not None:  # a remembered id is not a job
            jobs.append(info)
    return jobs
