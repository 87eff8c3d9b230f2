"""``chronoq analyze``: a Spark job over exported events (``chronoq export``)
that measures delivery per topic and time bucket, and per group of a topic
(docs/contract.md §10: lag and throughput, over time for the groups with the
most jobs), and writes the tables as Parquet and CSV with a self-contained
``report.html``.

It uses the DataFrame API only (no Python UDF), so executors need no
chronoq; ``chronoq.cli.analyze`` is also the script ``spark-submit`` runs on a
cluster (docs/pipeline.md).

Percentiles are ``percentile_approx`` with accuracy ``ACCURACY``: the value
returned is within 1/ACCURACY of the true percentile in rank (Spark's
definition), exact for fewer values than ACCURACY."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from chronoq.errors import InvalidInput
from chronoq.job import validate_topic
from chronoq.pipeline import read_events
from chronoq.pipeline.report import ReportData, render_report

__all__ = [
    "ACCURACY",
    "TOP_GROUPS",
    "Analysis",
    "analyze",
    "parameters",
    "parse_bucket",
    "write_report",
]

ACCURACY = 10_000
#: the groups with the most jobs, whose rows are collected (and reported, and
#: measured per bucket); the ``groups`` table keeps every group: a topic may
#: have a million
TOP_GROUPS = 10
KINDS = (
    ("puts", "put"),
    ("reserves", "reserve"),
    ("acks", "ack"),
    ("nacks", "nack"),
    ("expires", "expire"),
    ("deads", "dead"),
    ("buries", "bury"),
    ("deletes", "delete"),
    ("reschedules", "reschedule"),
    ("requeues", "requeue"),
    ("touches", "touch"),
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_bucket(text: str) -> int:
    """``30s``, ``5m``, ``1h``, ``1d`` to seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text.lower())
    if not match or int(match[1]) == 0:
        raise InvalidInput(
            f"bucket must be a number and a unit (s, m, h, d), like 1h: got {text!r}"
        )
    return int(match[1]) * _UNITS[match[2]]


@dataclass(frozen=True)
class Analysis:
    """What ``analyze`` found and wrote. ``groups``: the ``TOP_GROUPS`` groups
    with the most jobs, of ``group_count``; ``group_buckets``: theirs by bucket."""

    buckets: list[dict[str, Any]]
    topics: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    events: int
    seconds: float
    outputs: dict[str, str]
    groups: list[dict[str, Any]] = field(default_factory=list)
    group_buckets: list[dict[str, Any]] = field(default_factory=list)
    group_count: int = 0


def _measures() -> list[Column]:
    """Counts by kind, hand-over lag percentiles, and the two rates."""
    event = F.col("event")
    counts = [F.sum(F.when(event == kind, 1).otherwise(0)).alias(name) for name, kind in KINDS]
    lag = F.when(event == "reserve", F.col("lag_ms"))
    quantiles = F.percentile_approx(lag, F.array(F.lit(0.5), F.lit(0.95), F.lit(0.99)), ACCURACY)
    return [*counts, quantiles.alias("lag"), F.max(lag).alias("lag_max_ms")]


def _finish(frame: DataFrame) -> DataFrame:
    """Lag percentiles as columns, and the rates (null when nothing to divide by)."""
    retry = (F.col("nacks") + F.col("expires")) / F.col("reserves")
    ends = F.col("acks") + F.col("deads") + F.col("buries")
    return frame.select(
        *[c for c in frame.columns if c not in ("lag", "runs")],
        *[F.col("lag")[i].cast("double").alias(f"lag_p{p}_ms") for i, p in enumerate((50, 95, 99))],
        F.col("runs")[0].cast("double").alias("run_p50_ms"),
        F.col("runs")[1].cast("double").alias("run_p99_ms"),
        F.when(F.col("reserves") > 0, retry).alias("retry_rate"),
        F.when(ends > 0, (F.col("deads") + F.col("buries")) / ends).alias("dead_rate"),
    )


def _runs(events: DataFrame) -> DataFrame:
    """Reserve-to-ack time (``took``, ms) of each ack, with the latest reserve
    of the same attempt before it, in the ack's bucket."""
    reserved = events.where(F.col("event") == "reserve").select(
        "topic", "id", "attempt", F.col("ts").alias("reserved")
    )
    acked = events.where(F.col("event") == "ack").select(
        "topic", "id", "attempt", "bucket", "group", F.col("ts").alias("acked")
    )
    pairs = (
        acked.join(reserved, ["topic", "id", "attempt"])
        .where(F.col("reserved") <= F.col("acked"))
        .groupBy("topic", "id", "attempt", "bucket", "group", "acked")
        .agg(F.max("reserved").alias("reserved"))
    )
    took = (F.unix_micros("acked") - F.unix_micros("reserved")) / 1000
    return pairs.select("topic", "bucket", "group", took.alias("took"))


def _run_quantiles(runs: DataFrame, keys: list[str]) -> DataFrame:
    quantiles = F.percentile_approx("took", F.array(F.lit(0.5), F.lit(0.99)), ACCURACY)
    return runs.groupBy(*keys).agg(quantiles.alias("runs"))


def _join(left: DataFrame, right: DataFrame, keys: list[str], how: str = "left") -> DataFrame:
    """``left`` joined with ``right`` on ``keys``, a null key matching a null
    one: the default group's ``group`` is null."""
    renamed = right.select(
        *[F.col(f"`{k}`").alias(f"_{k}") for k in keys],
        *[F.col(f"`{c}`") for c in right.columns if c not in keys],
    )
    on = reduce(lambda a, b: a & b, [left[f"`{k}`"].eqNullSafe(renamed[f"_{k}"]) for k in keys])
    return left.join(renamed, on, how).drop(*[f"_{k}" for k in keys])


def _by_group(frame: DataFrame, runs: DataFrame, seconds: int) -> DataFrame:
    """A row per topic and group: the measures of a topic, ``jobs`` (distinct
    ids) and ``acks_per_s``, its acks over the buckets from its first event's
    to its last's (throughput while it was active; never a division by 0)."""
    keys = ["topic", "group"]
    first, last = F.unix_seconds(F.min("bucket")), F.unix_seconds(F.max("bucket"))
    measured = frame.groupBy(*keys).agg(
        *_measures(),
        F.count(F.lit(1)).alias("events"),
        F.countDistinct("id").alias("jobs"),
        (last - first + seconds).alias("active_s"),
    )
    measured = _join(measured, _run_quantiles(runs, keys), keys)
    throughput = (F.col("acks") / F.col("active_s")).alias("acks_per_s")
    return _finish(measured.select("*", throughput).drop("active_s"))


def _group_buckets(frame: DataFrame, runs: DataFrame, top: DataFrame) -> DataFrame:
    """The measures by bucket of the groups of ``top`` (topic, group)."""
    keys = ["topic", "group", "bucket"]
    chosen = _join(frame, top, ["topic", "group"], "left_semi")
    measured = chosen.groupBy(*keys).agg(*_measures())
    return _finish(_join(measured, _run_quantiles(runs, keys), keys))


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    """The rows, times as aware UTC datetimes (PySpark gives naive local ones)."""
    return [
        {
            key: value.astimezone(UTC) if isinstance(value, datetime) else value
            for key, value in row.asDict().items()
        }
        for row in frame.collect()
    ]


def analyze(
    spark: SparkSession, events: str, out: str, *, bucket: str = "1h", topic: str | None = None
) -> Analysis:
    """Measure the events exported under ``events``; write the tables under ``out``."""
    started = time.monotonic()
    seconds = parse_bucket(bucket)
    frame = read_events(spark, events)
    if topic is not None:
        frame = frame.where(F.col("topic") == validate_topic(topic))
    frame = frame.withColumn(
        "bucket", F.timestamp_seconds(F.floor(F.unix_seconds("ts") / seconds) * seconds)
    ).cache()
    runs = _runs(frame).cache()  # one join, two aggregations
    try:
        by_bucket = frame.groupBy("topic", "bucket").agg(*_measures())
        by_bucket = by_bucket.join(
            _run_quantiles(runs, ["topic", "bucket"]), ["topic", "bucket"], "left"
        )
        by_topic = frame.groupBy("topic").agg(*_measures(), F.count(F.lit(1)).alias("events"))
        by_topic = by_topic.join(_run_quantiles(runs, ["topic"]), ["topic"], "left")
        attempts = (
            frame.where(F.col("event").isin("ack", "dead", "bury"))
            .select(
                "topic",
                F.when(F.col("event") == "ack", "acked").otherwise("dead").alias("outcome"),
                F.col("attempt").alias("attempts"),
            )
            .groupBy("topic", "outcome", "attempts")
            .agg(F.count(F.lit(1)).alias("jobs"))
        )
        # the most jobs first; ties by name, the default group (null) first
        groups = _by_group(frame, runs, seconds).orderBy(F.desc("jobs"), "topic", "group")
        top = groups.limit(TOP_GROUPS).select("topic", "group")
        tables = {
            "buckets": _finish(by_bucket).orderBy("topic", "bucket"),
            "topics": _finish(by_topic).orderBy("topic"),
            "attempts": attempts.orderBy("topic", "outcome", "attempts"),
            "groups": groups,
            "group_buckets": _group_buckets(frame, runs, top).orderBy("topic", "group", "bucket"),
        }
        outputs = _write(tables, out)
        found = {name: _rows(table) for name, table in tables.items() if name != "groups"}
        found["groups"] = _rows(groups.limit(TOP_GROUPS))
        group_count = spark.read.parquet(outputs["groups"]).count()
    finally:
        runs.unpersist()
        frame.unpersist()
    total = sum(row["events"] for row in found["topics"])
    return Analysis(
        found["buckets"],
        found["topics"],
        found["attempts"],
        total,
        time.monotonic() - started,
        outputs,
        found["groups"],
        found["group_buckets"],
        group_count,
    )


def _write(tables: dict[str, DataFrame], out: str) -> dict[str, str]:
    """Each table as Parquet and as one CSV file with a header (small: one
    row per topic and bucket), under ``out``."""
    outputs = {}
    base = out.rstrip("/")
    for name, table in tables.items():
        table.coalesce(1).write.mode("overwrite").parquet(f"{base}/{name}")
        table.coalesce(1).write.mode("overwrite").option("header", True).csv(f"{base}/{name}_csv")
        outputs[name] = f"{base}/{name}"
    return outputs


def input_size(events: str) -> dict[str, str]:
    """Files and bytes under a local export directory (empty for other file systems)."""
    root = Path(events)
    if not root.is_dir():
        return {}
    files = [p for p in root.rglob("*.parquet") if not p.name.startswith((".", "_"))]
    size = sum(p.stat().st_size for p in files)
    return {"files": f"{len(files):,}", "bytes": f"{size / 1e6:,.1f} MB"}


def report_data(analysis: Analysis, parameters: dict[str, str], events: str) -> ReportData:
    first = min((row["bucket"] for row in analysis.buckets), default=None)
    last = max((row["bucket"] for row in analysis.buckets), default=None)
    span = {}
    if first is not None and last is not None:
        span = {
            "first bucket": f"{first:%Y-%m-%d %H:%M:%S}Z",
            "last bucket": f"{last:%Y-%m-%d %H:%M:%S}Z",
        }
    return ReportData(
        generated_at=datetime.now(UTC),
        parameters=parameters,
        input={**input_size(events), "events": f"{analysis.events:,}", **span},
        buckets=analysis.buckets,
        topics=analysis.topics,
        attempts=analysis.attempts,
        groups=analysis.groups,
        group_buckets=analysis.group_buckets,
        group_count=analysis.group_count,
    )


def write_report(analysis: Analysis, parameters: dict[str, str], events: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(report_data(analysis, parameters, events)), encoding="utf-8")


def parameters(events: str, bucket: str, topic: str | None, master: str) -> dict[str, str]:
    return {
        "events": events,
        "bucket": bucket,
        "topic": topic or "every topic",
        "master": master,
        "percentiles": f"percentile_approx, accuracy {ACCURACY} (rank error ≤ {1 / ACCURACY:g})",
    }
