"""The data source's reader and writer without Spark: columns checked, Arrow
batches turned into jobs, ranges and offsets of the event log, and the
stream reader's offsets called directly."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

import chronoq
from chronoq.errors import InvalidInput
from chronoq.pipeline.datasource import EventStream
from chronoq.pipeline.options import read_options, write_options
from chronoq.pipeline.reading import (
    JOBS_DDL,
    capped,
    heads,
    jobs_batches,
    plan_ranges,
    range_batches,
    starts,
)
from chronoq.pipeline.rows import RowError, plan_columns, rows_to_jobs
from chronoq.pipeline.writing import write_batches

from .helpers import log_cap, make_events


def test_columns_are_checked_with_a_reason() -> None:
    columns = plan_columns([("ID", "string"), ("delay", "double")], "t")
    assert columns.when == "delay" and columns.topic == "t"
    with pytest.raises(InvalidInput, match="exactly one column"):
        plan_columns([("id", "string"), ("delay", "double"), ("due_at", "long")], "t")
    with pytest.raises(InvalidInput, match="column priority is of type double"):
        plan_columns([("id", "string"), ("delay", "double"), ("priority", "double")], "t")
    assert plan_columns([("delay", "integer")], "t", generate_ids=True).names == ("delay",)


def test_a_batch_of_rows_becomes_jobs_and_reasons() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    batch = pa.RecordBatch.from_pylist(
        [
            {"id": "a", "payload": '{"k": 1}', "run_at": at, "priority": 3},
            {"id": None, "payload": "1", "run_at": at, "priority": None},
            {"id": "c", "payload": "not json", "run_at": at, "priority": None},
            {"id": "d", "payload": None, "run_at": None, "priority": None},
        ],
        schema=pa.schema(
            [
                ("id", pa.string()),
                ("payload", pa.string()),
                ("run_at", pa.timestamp("us", "UTC")),
                ("priority", pa.int32()),
            ]
        ),
    )
    columns = plan_columns(
        [("id", "string"), ("payload", "string"), ("run_at", "timestamp"), ("priority", "integer")],
        "t",
    )
    out = list(rows_to_jobs(batch, columns, generate_ids=False, first=10))
    assert [position for _, position, *_ in out] == [10, 11, 12, 13]
    job = out[0][2]
    assert not isinstance(job, RowError)
    assert (job.id, job.payload, job.run_at, job.priority) == ("a", {"k": 1}, at, 3)
    reasons = [item.reason for _, _, item, *_ in out[1:] if isinstance(item, RowError)]
    assert "id is null" in reasons[0]
    assert "payload is not JSON text" in reasons[1]
    assert reasons[2] == "run_at is null"


def test_write_batches_puts_in_batches_and_counts(sqlite_url: str, tmp_path: Path) -> None:
    options = write_options(
        {"store": sqlite_url, "topic": "t", "batch_size": "4", "on_error": "skip"}
        | {"errors_path": str(tmp_path / "errors")}
    )
    columns = plan_columns([("id", "string"), ("delay", "double"), ("priority", "long")], "t")
    batch = pa.RecordBatch.from_pydict(
        {"id": [f"j{n}" for n in range(10)], "delay": [1.0] * 10, "priority": [0] * 9 + [9999]}
    )
    counts = write_batches([batch, batch], options, columns, "task-1")
    assert (counts.created, counts.present, counts.rejected) == (9, 9, 2)
    [rejects] = (tmp_path / "errors").glob("*.jsonl")
    assert rejects.name == "task-1.jsonl" and "priority must be" in rejects.read_text()
    with chronoq.connect(sqlite_url) as q:
        assert q.stats("t")["delayed"] == 9


def test_capped_shares_a_limit_among_shards() -> None:
    start = {"a": 0, "b": 10, "c": 5}
    end = {"a": 1000, "b": 12, "c": 5, "d": 7}
    assert capped(start, end, None) == end
    got = capped(start, end, 20)
    assert sum(got[k] - start.get(k, 0) for k in got) == 20
    assert got == {"a": 11, "b": 12, "c": 5, "d": 7}  # b and d whole, a the rest
    assert capped(start, end, 10_000) == end
    assert capped({}, {"x": 1000, "y": 1000}, 10) == {"x": 5, "y": 5}  # no shard starves


def test_ranges_and_their_events(queue: chronoq.Queue, topic: str) -> None:
    make_events(queue, topic, 100)
    found = heads(queue, topic)
    shards = {name: shard for name, (shard, _) in found.items()}
    end = {name: head for name, (_, head) in found.items()}
    begin = starts(queue, topic, "earliest")
    parts = plan_ranges(shards, begin, end, 70)
    assert len(parts) >= 5  # at most 70 seqs each
    keys = [
        key
        for part in parts
        for batch in range_batches(queue, part, allow_gaps=False)
        for key in zip(
            batch.column("shard").to_pylist(), batch.column("seq").to_pylist(), strict=True
        )
    ]
    assert len(keys) == len(set(keys)) == 300
    assert starts(queue, topic, "latest") == end


def test_the_stream_reader_offsets_without_spark(store_url: str, topic: str) -> None:
    url = log_cap(store_url, 100_000)
    with chronoq.connect(url) as q:
        make_events(q, topic, 40)
        stream = EventStream(read_options({"store": url, "topic": topic}))
        start = stream.initialOffset()
        assert set(start.values()) == {0}
        end = stream.latestOffset(start, stream.getDefaultReadLimit())
        assert sum(end.values()) == 120
        stream.prepareForTriggerAvailableNow()
        make_events(q, topic, 10, start=40)
        # AvailableNow: what came after it began is not read
        assert stream.latestOffset(start, stream.getDefaultReadLimit()) == end
        limited = EventStream(
            read_options({"store": url, "topic": topic, "maxEventsPerTrigger": "7"})
        )
        first = limited.latestOffset(start, limited.getDefaultReadLimit())
        assert sum(first.values()) == 7
        rows = sum(
            batch.num_rows
            for part in limited.partitions(start, first)
            for batch in limited.read(part)
        )
        assert rows == 7


def test_a_small_limit_turns_among_the_shards() -> None:
    start, end = {"a": 0, "b": 0, "c": 0}, {"a": 100, "b": 100, "c": 100}
    served = set()
    for _ in range(3):
        got = capped(start, end, 2)
        assert sum(got[k] - start[k] for k in got) == 2
        served |= {k for k in got if got[k] > start[k]}
        start = got
    assert served == {"a", "b", "c"}


def test_payloads_follow_their_arrow_types(sqlite_url: str, tmp_path: Path) -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    kind = pa.struct(
        [("at", pa.timestamp("us", "UTC")), ("tags", pa.map_(pa.string(), pa.int64()))]
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "id": ["a", "b"],
            "payload": pa.array([{"at": at, "tags": []}, {"at": at, "tags": [("x", 1)]}], kind),
            "delay": pa.array([1.0, None]),
        }
    )
    columns = plan_columns([("id", "string"), ("payload", "struct"), ("delay", "double")], "t")
    out = list(rows_to_jobs(batch, columns, generate_ids=False))
    job = out[0][2]
    assert not isinstance(job, RowError)
    assert job.payload == {"at": "2030-01-01T00:00:00+00:00", "tags": {}}  # an empty map
    # a refused row's values are written out as text where JSON has no type for them
    options = write_options(
        {"store": sqlite_url, "topic": "t", "on_error": "skip", "errors_path": str(tmp_path)}
    )
    counts = write_batches([batch], options, columns, "task")
    assert (counts.created, counts.rejected) == (1, 1)
    [line] = (tmp_path / "task.jsonl").read_text().splitlines()
    assert "2030-01-01T00:00:00+00:00" in line and "delay is null" in line


def test_a_traceparent_column_goes_with_its_jobs_and_the_jobs_read_shows_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    options = write_options(
        {"store": sqlite_url, "topic": "t", "on_error": "skip"}
        | {"errors_path": str(tmp_path / "errors")}
    )
    columns = plan_columns([("id", "string"), ("delay", "double"), ("traceparent", "string")], "t")
    batch = pa.RecordBatch.from_pydict(
        {"id": ["a", "b", "c"], "delay": [60.0] * 3, "traceparent": [trace, None, "00-bad"]}
    )
    counts = write_batches([batch], options, columns, "task-1")
    assert (counts.created, counts.rejected) == (2, 1)
    [rejects] = (tmp_path / "errors").glob("*.jsonl")
    assert "traceparent must be" in rejects.read_text()
    with chronoq.connect(sqlite_url) as q:
        [read] = list(jobs_batches(q, "t", 0, None))
    assert "traceparent string" in JOBS_DDL
    rows = {row["id"]: row["traceparent"] for row in read.to_pylist()}
    assert rows == {"a": trace, "b": None}


def test_a_group_column_goes_with_its_jobs_and_the_jobs_read_shows_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    options = write_options(
        {"store": sqlite_url, "topic": "t", "on_error": "skip"}
        | {"errors_path": str(tmp_path / "errors")}
    )
    columns = plan_columns([("id", "string"), ("delay", "double"), ("group", "string")], "t")
    batch = pa.RecordBatch.from_pydict(
        {"id": ["a", "b", "c"], "delay": [60.0] * 3, "group": ["tenant-1", None, "no spaces"]}
    )
    counts = write_batches([batch], options, columns, "task-1")
    assert (counts.created, counts.rejected) == (2, 1)
    [rejects] = (tmp_path / "errors").glob("*.jsonl")
    assert "invalid group" in rejects.read_text()
    with chronoq.connect(sqlite_url) as q:
        [read] = list(jobs_batches(q, "t", 0, None))
    assert "`group` string" in JOBS_DDL
    rows = {row["id"]: row["group"] for row in read.to_pylist()}
    assert rows == {"a": "tenant-1", "b": None}
