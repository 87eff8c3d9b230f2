"""``df.write.format("chronoq")`` on a local[2] Spark: rows become jobs once,
bad rows fail the write or go to errors_path, bad options fail before any
task runs, and a streaming write replayed puts nothing twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import chronoq

from .conftest import SparkLog
from .helpers import log_events

pytestmark = pytest.mark.timeout(180)


def _orders(spark: Any, rows: int, partitions: int = 2) -> Any:
    return spark.range(rows, numPartitions=partitions).select(
        F.concat(F.lit("order-"), F.col("id").cast("string")).alias("id"),
        F.to_json(F.struct(F.col("id").alias("order"), F.lit("EUR").alias("currency"))).alias(
            "payload"
        ),
        (F.lit(60.0) + F.col("id")).alias("delay"),
    )


def _puts(q: chronoq.Queue, topic: str) -> list[Any]:
    return [e for e in log_events(q, topic).values() if e.event == "put"]


def test_a_dataframe_becomes_jobs_once_however_often_it_is_written(
    spark: Any, store_url: str, topic: str, spark_log: SparkLog
) -> None:
    orders = _orders(spark, 3000)
    for _ in range(2):
        orders.write.format("chronoq").option("store", store_url).option("topic", topic).option(
            "batch_size", "500"
        ).mode("append").save()
    with chronoq.connect(store_url) as q:
        assert q.stats(topic)["delayed"] == 3000
        assert len(_puts(q, topic)) == 3000
        job = q.get(topic, "order-42")
        assert job is not None and job.payload == {"order": 42, "currency": "EUR"}
        assert 101_000 <= job.due_at - job.created_at <= 103_000
    err = spark_log.new()
    assert "3000 job(s) created, 0 already present, 0 row(s) rejected" in err
    assert "0 job(s) created, 3000 already present, 0 row(s) rejected" in err


def test_every_column_kind_is_taken(spark: Any, sqlite_url: str) -> None:
    due = datetime(2031, 5, 17, 8, 30, 0, 123_000, tzinfo=UTC)
    due_ms = int(due.timestamp() * 1000) + 1  # an odd ms survives exactly
    rows = [
        ("a", '{"x": [1, 2]}', due_ms, 7, 2.5, 3, 60.0, "one"),
        ("b", '"text"', due_ms, -1000, 0.001, 1, 0.0, "two"),
    ]
    df = spark.createDataFrame(
        rows,
        "id string, payload string, due_at long, priority int, ttr double, "
        "max_attempts int, unique_for double, topic string",
    )
    df.write.format("chronoq").option("store", sqlite_url).mode("append").save()
    structs = spark.createDataFrame(
        [("s", 5, datetime(2030, 1, 1), due)], "id string, n int, at timestamp, run_at timestamp"
    ).select(
        "id",
        F.struct("n", "at", F.create_map(F.lit("k"), F.col("n")).alias("m")).alias("payload"),
        "run_at",
    )
    structs.write.format("chronoq").option("store", sqlite_url).option("topic", "one").mode(
        "append"
    ).save()
    raw = spark.createDataFrame(
        [("r", bytearray(b"\x00\xff"), 1.5)], "id string, payload binary, delay double"
    )
    raw.write.format("chronoq").option("store", sqlite_url).option("topic", "one").mode(
        "append"
    ).save()
    with chronoq.connect(sqlite_url) as q:
        a, b = q.get("one", "a"), q.get("two", "b")
        assert a is not None and b is not None
        assert (a.payload, a.due_at, a.priority, a.ttr, a.max_attempts, a.unique_for) == (
            {"x": [1, 2]},
            due_ms,
            7,
            2.5,
            3,
            60.0,
        )
        assert (b.payload, b.priority, b.ttr) == ("text", -1000, 0.001)
        s = q.get("one", "s")
        assert s is not None and s.due_at == due_ms - 1
        assert s.payload == {"n": 5, "at": "2030-01-01T00:00:00+00:00", "m": {"k": 5}}
        r = q.get("one", "r")
        assert r is not None and r.payload == b"\x00\xff"


def test_a_bad_row_fails_the_write_naming_it_and_its_batch_writes_nothing(
    spark: Any, sqlite_url: str, topic: str
) -> None:
    df = spark.range(30, numPartitions=1).select(
        F.concat(F.lit("j"), F.col("id").cast("string")).alias("id"),
        F.lit(1.0).alias("delay"),
        F.when(F.col("id") == 15, 5000).otherwise(0).alias("priority"),
    )
    writer = df.write.format("chronoq").option("store", sqlite_url).option("topic", topic)
    with pytest.raises(Exception) as failed:
        writer.option("batch_size", "10").mode("append").save()
    text = str(failed.value)
    assert "row 15 (id 'j15')" in text and "priority must be an integer from -1000 to 1000" in text
    with chronoq.connect(sqlite_url) as q:
        assert q.stats(topic)["total"] == 10  # rows 0-9; the batch of row 15 wrote nothing
    # fixed, the same write again puts only what is missing
    fixed = df.withColumn("priority", F.lit(1))
    fixed.write.format("chronoq").option("store", sqlite_url).option("topic", topic).mode(
        "append"
    ).save()
    with chronoq.connect(sqlite_url) as q:
        assert q.stats(topic)["total"] == 30
        first = q.get(topic, "j0")
        assert first is not None and first.priority == 0  # put by the first write


def test_skipped_rows_go_to_errors_path_with_their_reason(
    spark: Any, sqlite_url: str, topic: str, tmp_path: Path, spark_log: SparkLog
) -> None:
    rows = [("ok1", '{"a": 1}', 1.0), (None, "{}", 1.0), ("bad-json", "{oops", 1.0)]
    rows += [("far", "{}", 1e12), ("ok2", "null", 0.0)]
    df = spark.createDataFrame(rows, "id string, payload string, delay double").coalesce(1)
    errors = tmp_path / "errors"
    df.write.format("chronoq").option("store", sqlite_url).option("topic", topic).option(
        "on_error", "skip"
    ).option("errors_path", str(errors)).mode("append").save()
    with chronoq.connect(sqlite_url) as q:
        assert sorted(job.id for job in q.jobs(topic).jobs) == ["ok1", "ok2"]
    lines = [
        json.loads(line) for f in errors.glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    reasons = {doc["row"]: doc for doc in lines}
    assert sorted(reasons) == [1, 2, 3]
    assert "id is null" in reasons[1]["error"]
    assert "payload is not JSON text" in reasons[2]["error"]
    assert reasons[2]["data"]["payload"] == "{oops" and reasons[2]["id"] == "bad-json"
    assert "delay must be between 0 and" in reasons[3]["error"]
    assert not list(errors.glob(".*"))  # no temporary file left
    assert "2 job(s) created, 0 already present, 3 row(s) rejected" in spark_log.new()


@pytest.mark.parametrize(
    ("options", "columns", "message"),
    [
        ({"topic": "t"}, "id string, delay double", "option store is required"),
        ({"store": "S"}, "id string, delay double", "give the topic"),
        ({"store": "S", "topic": "t"}, "id string, delay double, run_at timestamp", "exactly one"),
        ({"store": "S", "topic": "t"}, "id string", "exactly one column"),
        ({"store": "S", "topic": "t", "bogus": "1"}, "id string, delay double", "unknown option"),
        ({"store": "S", "topic": "t"}, "id string, delay double, extra int", "not job fields"),
        ({"store": "S", "topic": "t"}, "delay double", "an id column is required"),
        ({"store": "S", "topic": "t"}, "id string, delay string", "delay is of type string"),
        ({"store": "S", "topic": "bad topic"}, "id string, delay double", "invalid topic"),
        (
            {"store": "S", "topic": "t", "on_error": "skip"},
            "id string, delay double",
            "errors_path",
        ),
        ({"store": "S", "topic": "t", "batch_size": "0"}, "id string, delay double", "batch_size"),
        ({"store": "nope://x", "topic": "t"}, "id string, delay double", "unsupported store URL"),
    ],
)
def test_bad_options_fail_before_any_task_runs(
    spark: Any, sqlite_url: str, options: dict[str, str], columns: str, message: str
) -> None:
    df = spark.createDataFrame([], columns)
    writer = df.write.format("chronoq").mode("append")
    for key, value in options.items():
        writer = writer.option(key, sqlite_url if value == "S" else value)
    with pytest.raises(Exception, match=message):
        writer.save()


def test_overwrite_is_refused_and_generated_ids_are_not_idempotent(
    spark: Any, sqlite_url: str, topic: str
) -> None:
    df = spark.range(5).select(F.lit(0.0).alias("delay"))
    writer = df.write.format("chronoq").option("store", sqlite_url).option("topic", topic)
    with pytest.raises(Exception, match="mode\\('append'\\)"):
        writer.mode("overwrite").save()
    for _ in range(2):
        writer.option("generate_ids", "true").mode("append").save()
    with chronoq.connect(sqlite_url) as q:
        assert q.stats(topic)["ready"] == 10


def test_a_stream_of_files_becomes_jobs_and_a_replayed_batch_puts_nothing_twice(
    spark: Any, store_url: str, topic: str, tmp_path: Path, spark_log: SparkLog
) -> None:
    incoming, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    errors = tmp_path / "errors"
    incoming.mkdir()

    def drop(name: str, ids: range) -> None:
        lines = [
            json.dumps({"id": f"o{n}", "payload": json.dumps({"n": n}), "delay": 30.0}) for n in ids
        ]
        lines.append(json.dumps({"id": f"bad-{name}", "payload": "{}", "delay": -1.0}))
        (incoming / name).write_text("\n".join(lines))

    def run() -> None:
        stream = spark.readStream.schema("id string, payload string, delay double").json(
            str(incoming)
        )
        query = (
            stream.writeStream.format("chronoq")
            .option("store", store_url)
            .option("topic", topic)
            .option("checkpointLocation", str(checkpoint))
            .option("on_error", "skip")
            .option("errors_path", str(errors))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    drop("a.json", range(0, 100))
    run()
    drop("b.json", range(100, 150))
    run()
    # forget that the last micro-batch was committed: Spark runs it again
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    run()
    with chronoq.connect(store_url) as q:
        assert q.stats(topic)["delayed"] == 150
        assert len(_puts(q, topic)) == 150
    assert "0 job(s) created, 50 already present, 1 row(s) rejected" in spark_log.new()
    # the replayed micro-batch wrote its refused row under the same name: one copy
    rows = [json.loads(line) for f in errors.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == ["bad-a.json", "bad-b.json"]
