"""``spark.read`` and ``spark.readStream`` of ``format("chronoq")`` on a
local[2] Spark: snapshots of events and jobs, the event log as a stream with
read limits, Trigger.AvailableNow, resumable offsets and gaps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import chronoq

from .helpers import log_cap, log_events, make_events

pytestmark = pytest.mark.timeout(180)


def _key(row: Any) -> tuple[str, int, int]:
    return row["topic"], row["shard"], row["seq"]


def test_a_batch_read_of_events_is_the_log(spark: Any, store_url: str, topic: str) -> None:
    with chronoq.connect(store_url) as q:
        make_events(q, topic, 200)
        make_events(q, topic + "-b", 30, group="tenant-42")
        logged = log_events(q)
    rows = spark.read.format("chronoq").option("store", store_url).load().collect()
    assert sorted(map(_key, rows)) == sorted(logged)
    for row in rows:
        event = logged[_key(row)]
        assert (row["id"], row["event"], row["attempt"], row["lag_ms"], row["group"]) == (
            event.id,
            event.event.value,
            event.attempt,
            event.lag_ms,
            event.group,
        )
        assert row["ts"].timestamp() * 1000 == pytest.approx(event.ts_ms)
    one = spark.read.format("chronoq").option("store", store_url).option("topic", topic + "-b")
    assert one.load().count() == 90
    # `group` quoted in SQL: a reserved word in ANSI mode
    one.load().createOrReplaceTempView("grouped")
    [(group, events)] = spark.sql("SELECT `group`, count(*) FROM grouped GROUP BY 1").collect()
    assert (group, events) == ("tenant-42", 90)


def test_a_batch_read_of_jobs_by_state(spark: Any, store_url: str, topic: str) -> None:
    with chronoq.connect(store_url) as q:
        trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        q.put_many(
            topic,
            [
                chronoq.Job({"n": n}, id=f"r{n}", traceparent=trace if n == 7 else None)
                for n in range(40)
            ],
        )
        q.put_many(topic, [chronoq.Job(b"\x01", id=f"d{n}", delay=600) for n in range(25)])
        # due in two hours: on Redis in the far tier, with ids of their own and generated
        q.put_many(topic, [chronoq.Job(b"\x01", id=f"f{n}", delay=7200) for n in range(10)])
        far = {r.id for r in q.put_many(topic, [chronoq.Job(b"\x01", delay=7200)] * 10)}
        leased = q.reserve(topic, count=5)
    reader = spark.read.format("chronoq").option("store", store_url).option("what", "jobs")
    jobs = reader.option("topic", topic).load()
    assert jobs.count() == 85
    counts = {row["state"]: row["count"] for row in jobs.groupBy("state").count().collect()}
    assert counts == {"ready": 35, "reserved": 5, "delayed": 45}
    traced = jobs.where("traceparent is not null").collect()
    assert [(row["id"], row["traceparent"]) for row in traced] == [("r7", trace)]
    delayed = reader.option("topic", topic).option("state", "delayed").load().collect()
    ids = {f"d{n}" for n in range(25)} | {f"f{n}" for n in range(10)} | far
    assert {row["id"] for row in delayed} == ids
    assert all(row["payload"] is None and row["payload_bytes"] == b"\x01" for row in delayed)
    held = reader.option("topic", topic).option("state", "reserved").load().collect()
    assert {row["id"] for row in held} == {job.id for job in leased}
    assert all(row["deadline"] is not None and row["attempts"] == 1 for row in held)
    ready = reader.option("topic", topic).option("state", "ready").load().first()
    assert ready is not None and ready["payload"].startswith('{"n":')


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"what": "jobs"}, "reading jobs takes a topic"),
        ({"what": "rows"}, "option what must be events or jobs"),
        ({"state": "ready"}, "option state is for what=jobs"),
        ({"what": "jobs", "topic": "t", "state": "gone"}, "option state must be one of"),
        ({"maxEventsPerTrigger": "0"}, "maxeventspertrigger"),
        ({"startingOffsets": "middle"}, "startingOffsets must be earliest or latest"),
    ],
)
def test_bad_read_options_are_refused(
    spark: Any, sqlite_url: str, options: dict[str, str], message: str
) -> None:
    reader = spark.read.format("chronoq").option("store", sqlite_url)
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=message):
        reader.load().collect()


def _stream_to_files(
    spark: Any, url: str, out: Path, checkpoint: Path, **options: str
) -> list[dict[str, Any]]:
    """Run a query over the event log to Parquet until it has read what there
    is (Trigger.AvailableNow); the progress of each micro-batch."""
    reader = spark.readStream.format("chronoq").option("store", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(150)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return [p for p in query.recentProgress if p["numInputRows"]]


def test_a_stream_reads_every_event_once_across_runs_within_its_limits(
    spark: Any, store_url: str, topic: str, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with chronoq.connect(store_url) as q:
        make_events(q, topic, 300)
        batches = _stream_to_files(spark, store_url, out, checkpoint, maxEventsPerTrigger="250")
        assert [b["numInputRows"] for b in batches] == [250, 250, 250, 150]
        make_events(q, topic, 100, start=300)
        make_events(q, topic + "-new", 10)  # a topic that did not exist: read from its start
        more = _stream_to_files(spark, store_url, out, checkpoint)
        assert sum(b["numInputRows"] for b in more) == 330
        logged = log_events(q)
    rows = spark.read.parquet(str(out)).collect()
    keys = [_key(row) for row in rows]
    assert len(keys) == len(set(keys)) and set(keys) == set(logged)


def test_available_now_stops_at_the_log_it_found(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    with chronoq.connect(sqlite_url) as q:
        make_events(q, "t", 50)
    reader = spark.readStream.format("chronoq").option("store", sqlite_url)
    reader = reader.option("startingOffsets", "latest")
    query = (
        reader.load()
        .writeStream.format("memory")
        .queryName("latest_only")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(60)
    assert spark.table("latest_only").count() == 0


def test_a_stream_fails_on_a_gap_unless_gaps_are_allowed(
    spark: Any, store_url: str, topic: str, tmp_path: Path
) -> None:
    url = log_cap(store_url, 2000)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with chronoq.connect(url) as q:
        make_events(q, topic, 100)
        _stream_to_files(spark, url, out, checkpoint)
        make_events(q, topic, 4000, start=100)  # past the cap: the oldest are trimmed
    with pytest.raises(Exception, match="trimmed from the store before Spark read them"):
        _stream_to_files(spark, url, out, checkpoint)
    _stream_to_files(spark, url, out, checkpoint, allow_gaps="true")
    with chronoq.connect(url) as q:
        kept = log_events(q)
    rows = spark.read.parquet(str(out)).collect()
    keys = {_key(row) for row in rows}
    assert len(keys) == len(rows) and set(kept) <= keys
