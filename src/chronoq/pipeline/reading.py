"""Reading a store for Spark, without Spark: event log ranges as Arrow
batches, the offsets a stream moves between, and job snapshots.

A range is ``(after, upto]`` of one log shard: reading it again gives the same
events as long as the store keeps them, which is what makes a streaming
micro-batch replayable. Events the store trimmed before they were read are
never skipped in silence: ``EventsLost`` unless gaps are allowed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from chronoq.errors import ChronoqError
from chronoq.job import JobInfo, LogShard
from chronoq.pipeline.schema import events_batch
from chronoq.queue import Queue
from chronoq.states import State

__all__ = [
    "JOBS_DDL",
    "EventsLost",
    "LogRange",
    "capped",
    "heads",
    "jobs_batches",
    "plan_ranges",
    "range_batches",
    "spans",
    "starts",
]

JOBS_DDL = (
    "topic string, id string, state string, payload string, payload_bytes binary, "
    "due_at timestamp, priority int, ttr double, max_attempts int, attempts int, "
    "created_at timestamp, last_error string, deadline timestamp, unique_for double, "
    "traceparent string, `group` string"  # group: a reserved word in ANSI mode
)
_TS = pa.timestamp("us", tz="UTC")
_JOBS_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("id", pa.string()),
        ("state", pa.string()),
        ("payload", pa.string()),
        ("payload_bytes", pa.binary()),
        ("due_at", _TS),
        ("priority", pa.int32()),
        ("ttr", pa.float64()),
        ("max_attempts", pa.int32()),
        ("attempts", pa.int32()),
        ("created_at", _TS),
        ("last_error", pa.string()),
        ("deadline", _TS),
        ("unique_for", pa.float64()),
        ("traceparent", pa.string()),
        ("group", pa.string()),
    ]
)
PAGE = 10_000
GAP_HINT = (
    "size the store's log (events_max, events_keep) for how far behind readers may be, "
    "or set option allow_gaps=true to go on without those events"
)


class EventsLost(ChronoqError):
    """Events were trimmed from the store before they could be read."""


@dataclass(frozen=True)
class LogRange:
    """The events of ``shard`` with a seq in ``(after, upto]``."""

    shard: LogShard
    after: int
    upto: int


def heads(queue: Queue, topic: str | None) -> dict[str, tuple[LogShard, int]]:
    """Each log shard, by name, with the seq of its newest event."""
    return {shard.name: (shard, queue.log_head(shard)) for shard in queue.log_shards(topic)}


def spans(queue: Queue, topic: str | None) -> dict[str, tuple[LogShard, int, int]]:
    """Each log shard, by name, with the seq just before its oldest kept
    event and the seq of its newest, from one read of it."""
    found = {}
    for shard in queue.log_shards(topic):
        page = queue.log_read(shard, 0, limit=1)
        first = page.events[0].seq - 1 if page.events else page.head
        found[shard.name] = (shard, first, page.head)
    return found


def starts(queue: Queue, topic: str | None, where: str) -> dict[str, int]:
    """Offsets (the seq read last) of every shard: just before its oldest
    kept event ("earliest"), or at its newest ("latest")."""
    if where == "latest":
        return {name: head for name, (_, head) in heads(queue, topic).items()}
    return {name: first for name, (_, first, _) in spans(queue, topic).items()}


def capped(start: dict[str, int], end: dict[str, int], limit: int | None) -> dict[str, int]:
    """``end`` moved back so that at most ``limit`` events lie past ``start``
    in all, shared evenly among the shards with events to read. When the
    limit is smaller than their number, which ones get an event turns with
    ``start``, so that none starves."""
    backlog = {name: max(end[name] - start.get(name, 0), 0) for name in end}
    if limit is None or sum(backlog.values()) <= limit:
        return dict(end)
    share = dict.fromkeys(backlog, 0)
    waiting = sorted(name for name, n in backlog.items() if n)
    turn = sum(start.values()) % len(waiting)
    waiting = waiting[turn:] + waiting[:turn]
    left = limit
    while left and waiting:
        each = max(left // len(waiting), 1)
        for name in list(waiting):
            take = min(each, backlog[name] - share[name], left)
            share[name] += take
            left -= take
            if share[name] == backlog[name]:
                waiting.remove(name)
            if not left:
                break
    return {name: start.get(name, 0) + share[name] for name in end}


def plan_ranges(
    shards: dict[str, LogShard], start: dict[str, int], end: dict[str, int], chunk: int
) -> list[LogRange]:
    """The ranges between two offsets, at most ``chunk`` seqs each (SQLite
    keeps one log: chunks let Spark read it in parallel too)."""
    ranges = []
    for name, upto in sorted(end.items()):
        after = start.get(name, 0)
        while after < upto:
            ranges.append(LogRange(shards[name], after, min(after + chunk, upto)))
            after += chunk
    return ranges


def range_batches(queue: Queue, part: LogRange, allow_gaps: bool) -> Iterator[pa.RecordBatch]:
    """The events of ``part`` as record batches of the event schema."""
    after = part.after
    while after < part.upto:
        page = queue.log_read(part.shard, after, limit=PAGE)
        if page.head < after:
            raise EventsLost(
                f"the event log {part.shard.name} ends at seq {page.head}, before the {after} "
                "this read resumes from: the store lost or replaced its log; read it again "
                "from the start (a new checkpoint)"
            )
        if page.lost and not allow_gaps:
            raise EventsLost(
                f"{page.lost} event(s) of {part.shard.name} after seq {after} were trimmed from "
                f"the store before Spark read them: {GAP_HINT}"
            )
        events = [event for event in page.events if event.seq <= part.upto]
        if events:
            yield events_batch(events, [part.shard.shard] * len(events))
        if page.upto <= after:
            return
        after = page.upto


def _payload_columns(info: JobInfo) -> tuple[str | None, bytes | None]:
    if isinstance(info.payload, bytes):
        return None, info.payload
    return json.dumps(info.payload, ensure_ascii=False, separators=(",", ":")), None


def _jobs_batch(jobs: list[JobInfo]) -> pa.RecordBatch:
    payloads = [_payload_columns(job) for job in jobs]

    def ts(values: list[int | None]) -> pa.Array:
        return pa.array([None if v is None else v * 1000 for v in values], pa.int64()).cast(_TS)

    columns = [
        pa.array([job.topic for job in jobs], pa.string()),
        pa.array([job.id for job in jobs], pa.string()),
        pa.array([job.state.value for job in jobs], pa.string()),
        pa.array([text for text, _ in payloads], pa.string()),
        pa.array([raw for _, raw in payloads], pa.binary()),
        ts([job.due_at for job in jobs]),
        pa.array([job.priority for job in jobs], pa.int32()),
        pa.array([job.ttr for job in jobs], pa.float64()),
        pa.array([job.max_attempts for job in jobs], pa.int32()),
        pa.array([job.attempts for job in jobs], pa.int32()),
        ts([job.created_at for job in jobs]),
        pa.array([job.last_error for job in jobs], pa.string()),
        ts([job.deadline for job in jobs]),
        pa.array([job.unique_for for job in jobs], pa.float64()),
        pa.array([job.traceparent for job in jobs], pa.string()),
        pa.array([job.group for job in jobs], pa.string()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=_JOBS_SCHEMA)


def jobs_batches(
    queue: Queue, topic: str, shard: int, state: State | None
) -> Iterator[pa.RecordBatch]:
    """The jobs of one shard of the topic (each once), in batches."""
    seen: set[str] = set()  # a Redis scan may return a job twice
    cursor = None
    while True:
        page = queue.jobs(topic, shard=shard, cursor=cursor, limit=PAGE)
        jobs = [
            job for job in page.jobs if job.id not in seen and (state is None or job.state is state)
        ]
        seen.update(job.id for job in page.jobs)
        if jobs:
            yield _jobs_batch(jobs)
        if (cursor := page.cursor) is None:
            return
