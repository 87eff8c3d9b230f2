"""The one schema of exported events (docs/contract.md §7), shared by ``chronoq export``,
the Spark data source and ``chronoq analyze``, and events as Arrow columns."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from chronoq.job import Event

__all__ = [
    "EVENT_DDL",
    "EVENT_SCHEMA",
    "EXPORT_DDL",
    "FILE_SCHEMA",
    "events_batch",
]

_TS = pa.timestamp("us", tz="UTC")

#: an event as Spark sees it: the columns of docs/contract.md §7, in its order
EVENT_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("ts", _TS),
        ("topic", pa.string()),
        ("id", pa.string()),
        ("event", pa.string()),
        ("attempt", pa.int32()),
        ("due_at", _TS),
        ("priority", pa.int32()),
        ("lag_ms", pa.int64()),
        ("error", pa.string()),
        ("shard", pa.int32()),
        ("group", pa.string()),  # the job's group; after shard, added after it
    ]
)
# `group` quoted: a reserved word in ANSI mode
EVENT_DDL = (
    "seq bigint, ts timestamp, topic string, id string, event string, attempt int, "
    "due_at timestamp, priority int, lag_ms bigint, error string, shard int, `group` string"
)
#: an exported file: ``topic`` and ``date`` are in its path (topic=…/date=…/)
FILE_SCHEMA = pa.schema([field for field in EVENT_SCHEMA if field.name != "topic"])
#: an export directory read whole (partition columns last, as Spark puts them);
#: files exported before ``group`` read it as null
EXPORT_DDL = (
    "seq bigint, ts timestamp, id string, event string, attempt int, due_at timestamp, "
    "priority int, lag_ms bigint, error string, shard int, `group` string, topic string, "
    "date date"
)


def events_batch(
    events: Sequence[Event], shards: Sequence[int], *, topic: bool = True
) -> pa.RecordBatch:
    """``events`` as one record batch of ``EVENT_SCHEMA`` (``FILE_SCHEMA``
    without ``topic``); ``shards[i]`` is the log shard of ``events[i]``."""
    ts = pa.array([e.ts_ms * 1000 for e in events], pa.int64()).cast(_TS)
    due = pa.array([e.due_at * 1000 for e in events], pa.int64()).cast(_TS)
    columns = [
        pa.array([e.seq for e in events], pa.int64()),
        ts,
        pa.array([e.topic for e in events], pa.string()),
        pa.array([e.id for e in events], pa.string()),
        pa.array([e.event.value for e in events], pa.string()),
        pa.array([e.attempt for e in events], pa.int32()),
        due,
        pa.array([e.priority for e in events], pa.int32()),
        pa.array([e.lag_ms for e in events], pa.int64()),
        pa.array([e.error for e in events], pa.string()),
        pa.array(shards, pa.int32()),
        pa.array([e.group for e in events], pa.string()),
    ]
    if not topic:
        del columns[2]
        return pa.RecordBatch.from_arrays(columns, schema=FILE_SCHEMA)
    return pa.RecordBatch.from_arrays(columns, schema=EVENT_SCHEMA)
