"""Benchmark of the Spark pipeline (docs/pipeline.md), in one run:

1. bulk scheduling: a DataFrame of 1,000,000 rows written to Redis with
   ``df.write.format("chronoq")`` from Spark ``local[2]``, next to ``put_many``
   of the same jobs from one plain Python process (the baseline), each three
   times into an empty store; the first write of the run (which also starts
   Spark's Python workers) is timed on its own;
2. export: those jobs' 1,000,000 put events from Redis to Parquet
   (``chronoq export``'s Exporter), three times into new directories;
3. analyze: ``chronoq analyze`` over 10,000,000 made-up events (a day of four
   topics: puts, reserves, acks, retries, dead letters) on ``local[2]``.

    .venv/bin/python bench/spark.py [--quick] [--out FILE] [--pin split|same|none]

It starts a private redis-server on a free loopback port (never 6379), by
default on the other CPU than Spark (as on a cluster, where Redis runs on a
machine of its own); analyze runs on every CPU. Each part runs in a process
of its own (a JVM keeps the CPUs it started on). Results go to stdout as a
table and, with ``--out``, to a JSON file. See docs/benchmarks.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path, where ``import redis`` would
# find bench/redis.py instead of redis-py: move bench/ to the end.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.append(sys.path.pop(0))

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import redis
from common import PAYLOAD, REPEATS, command, console, machine, render_header
from rich.table import Table
from servers import placement, private_server

import chronoq
from chronoq.pipeline import local_session
from chronoq.pipeline.analyze import analyze
from chronoq.pipeline.export import Exporter, partition_path
from chronoq.pipeline.schema import FILE_SCHEMA

TARGETS = {"spark_write": 100_000.0, "export": 200_000.0, "analyze_s": 90.0}
SHARDS = 4
BATCH = 1000
DAY = 20_000  # days since the epoch of the made-up events (2024-10-04)


def session() -> Any:
    conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"}
    return local_session("chronoq bench", conf=conf)


def make_rows(spark: Any, rows: int, path: Path) -> None:
    """The rows to schedule, as Parquet (made once, not timed)."""
    from pyspark.sql import functions as F

    payload = json.dumps(PAYLOAD)
    spark.range(rows, numPartitions=2).select(
        F.concat(F.lit("order-"), F.col("id").cast("string")).alias("id"),
        F.lit(payload).alias("payload"),
        (F.lit(3600.0) + F.col("id") % 600).alias("delay"),
    ).write.mode("overwrite").parquet(str(path))


def bench_spark_write(spark: Any, url: str, path: Path) -> float:
    frame = spark.read.parquet(str(path))
    start = time.perf_counter()
    frame.write.format("chronoq").option("store", url).option("topic", "orders").mode(
        "append"
    ).save()
    return time.perf_counter() - start


def bench_put_many(url: str, path: Path) -> float:
    """The same jobs through put_many from this process (rows read before timing)."""
    table = pq.read_table(path)
    ids = table.column("id").to_pylist()
    delays = table.column("delay").to_pylist()
    jobs = [chronoq.Job(PAYLOAD, delay=d, id=i) for i, d in zip(ids, delays, strict=True)]
    with chronoq.connect(url) as q:
        start = time.perf_counter()
        for first in range(0, len(jobs), BATCH):
            q.put_many("orders", jobs[first : first + BATCH])
        return time.perf_counter() - start


def make_events(root: Path, total: int) -> None:
    """``total`` events of a made-up day in the export layout: jobs put, reserved
    with a lag, acked; 5% nacked once and retried, 0.5% dead."""
    rng = np.random.default_rng(7)
    jobs = total * 10 // 31  # about 3.1 events per job
    put = DAY * 86_400_000 + rng.integers(0, 86_400_000 - 120_000, jobs)
    due = put + rng.integers(0, 60_000, jobs)
    lag = rng.lognormal(0.5, 1.0, jobs).astype(np.int64)
    reserve = due + lag
    run = rng.lognormal(3.0, 1.0, jobs).astype(np.int64)
    retried = rng.random(jobs) < 0.05
    dead = rng.random(jobs) < 0.005
    ids = np.array([f"j{n}" for n in range(jobs)], dtype=object)
    topics = np.array(["orders.close", "mail", "sms", "reports"])[rng.integers(0, 4, jobs)]
    parts = [
        ("put", put, 0, due, None),
        ("reserve", reserve, 1, due, lag),
        ("nack", (reserve + run)[retried], 1, due[retried], None),
        ("reserve", (reserve + run + 1000)[retried], 2, due[retried], (lag + run + 1000)[retried]),
        ("dead", (reserve + run)[dead & ~retried], 1, due[dead & ~retried], None),
        ("ack", (reserve + run)[~dead & ~retried], 1, due[~dead & ~retried], None),
        ("ack", (reserve + 2 * run + 1000)[retried], 2, due[retried], None),
    ]
    masks = [None, None, retried, retried, dead & ~retried, ~dead & ~retried, retried]
    columns: dict[str, list[Any]] = {name: [] for name in ("ts", "id", "event", "attempt")}
    columns |= {"due_at": [], "lag_ms": [], "topic": []}
    for (kind, ts, attempt, due_at, lags), mask in zip(parts, masks, strict=True):
        pick = slice(None) if mask is None else mask
        columns["ts"].append(ts)
        columns["id"].append(ids[pick])
        columns["topic"].append(topics[pick])
        columns["event"].append(np.full(len(ts), kind, dtype=object))
        columns["attempt"].append(np.full(len(ts), attempt, dtype=np.int32))
        columns["due_at"].append(due_at)
        columns["lag_ms"].append(lags if lags is not None else np.full(len(ts), -1))
    flat = {name: np.concatenate(values)[:total] for name, values in columns.items()}
    for topic in np.unique(flat["topic"]):
        mine = flat["topic"] == topic
        count = int(mine.sum())
        lags = flat["lag_ms"][mine]
        table = pa.table(
            {
                "seq": pa.array(np.arange(1, count + 1), pa.int64()),
                "ts": pa.array(flat["ts"][mine] * 1000, pa.int64()).cast(pa.timestamp("us", "UTC")),
                "id": pa.array(flat["id"][mine], pa.string()),
                "event": pa.array(flat["event"][mine], pa.string()),
                "attempt": pa.array(flat["attempt"][mine], pa.int32()),
                "due_at": pa.array(flat["due_at"][mine] * 1000, pa.int64()).cast(
                    pa.timestamp("us", "UTC")
                ),
                "priority": pa.array(np.zeros(count, np.int32), pa.int32()),
                "lag_ms": pa.array(np.where(lags < 0, None, lags), pa.int64()),
                "error": pa.nulls(count, pa.string()),
                "shard": pa.array(np.zeros(count, np.int32), pa.int32()),
            },
            schema=FILE_SCHEMA,
        )
        directory = root / partition_path(str(topic), DAY)
        directory.mkdir(parents=True)
        for n, first in enumerate(range(0, count, 1_000_000)):
            part = table.slice(first, 1_000_000)
            pq.write_table(part, directory / f"part-{n:04d}.parquet", compression="zstd")


def run_redis(quick: bool, pin: str) -> dict[str, Any]:
    """Bulk scheduling and export, Spark and this process on one side of the
    ``--pin`` placement, redis-server on the other."""
    rows = 100_000 if quick else 1_000_000
    spark_s, plain_s, export_s = [], [], []
    server_cpu, my_cpu, pinned = placement(pin)
    if my_cpu is not None:
        os.sched_setaffinity(0, {my_cpu})  # before Spark starts: its JVM inherits it
    spark = session()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-") as tmp:
        work = Path(tmp)
        make_rows(spark, rows, work / "rows")
        with private_server(work, server_cpu) as base:
            url = f"{base}?shards={SHARDS}&events_max={2 * rows}"
            client = redis.Redis.from_url(base)
            cold_s = bench_spark_write(spark, url, work / "rows")
            for _ in range(REPEATS):  # taking turns, each into an empty store
                client.flushall()
                spark_s.append(bench_spark_write(spark, url, work / "rows"))
                client.flushall()
                plain_s.append(bench_put_many(url, work / "rows"))
            client.flushall()
            bench_spark_write(spark, url, work / "rows")  # the events to export
            with chronoq.connect(url) as q:
                for n in range(REPEATS):
                    start = time.perf_counter()
                    exported = Exporter(q, work / f"export-{n}").run()
                    export_s.append(time.perf_counter() - start)
            client.close()
    spark.stop()
    return {
        "placement": pinned,
        "rows": rows,
        "cold_spark_write_jobs_per_s": rows / cold_s,
        "spark_write_jobs_per_s": [rows / s for s in spark_s],
        "put_many_jobs_per_s": [rows / s for s in plain_s],
        "exported_events": exported.events,
        "export_events_per_s": [exported.events / s for s in export_s],
    }


def run_analyze(quick: bool) -> dict[str, Any]:
    """``chronoq analyze`` over made-up events, Spark on every CPU."""
    events = 1_000_000 if quick else 10_000_000
    spark = session()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-") as tmp:
        work = Path(tmp)
        make_events(work / "events", events)
        start = time.perf_counter()
        found = analyze(spark, str(work / "events"), str(work / "analysis"), bucket="1h")
        analyze_s = time.perf_counter() - start
    spark.stop()
    return {"analyze_seconds": analyze_s, "analyze_events": found.events}


def in_child(part: str, args: argparse.Namespace) -> dict[str, Any]:
    """One part in a process of its own: each gets a JVM of its own, pinned
    or not (a JVM keeps the CPUs it started on)."""
    command = [sys.executable, __file__, "--part", part, "--pin", args.pin]
    done = subprocess.run(
        command + (["--quick"] if args.quick else []), stdout=subprocess.PIPE, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def table(f: dict[str, Any]) -> Table:
    out = Table(title="Spark pipeline (one run)")
    for name in ("figure", "value", "target", "", "vs baseline"):
        out.add_column(name, justify="left" if name in ("figure", "target") else "right")

    def ok(met: bool) -> str:
        return "[green]met[/]" if met else "[red]MISSED[/]"

    spark = statistics.median(f["spark_write_jobs_per_s"])
    plain = statistics.median(f["put_many_jobs_per_s"])
    out.add_row(
        f"bulk scheduling, {f['rows']:,} rows, Spark local[2] -> Redis (median of {REPEATS})",
        f"{spark:,.0f} jobs/s",
        f"≥ {TARGETS['spark_write']:,.0f}",
        ok(spark >= TARGETS["spark_write"]),
        f"{spark / plain:.2f}x put_many",
    )
    out.add_row(
        "  the same, the run's first write (starts Spark's Python workers)",
        f"{f['cold_spark_write_jobs_per_s']:,.0f} jobs/s",
        "",
        "",
        "",
    )
    out.add_row(
        f"put_many from one Python process (baseline, median of {REPEATS})",
        f"{plain:,.0f} jobs/s",
        "",
        "",
        "",
    )
    rate = statistics.median(f["export_events_per_s"])
    out.add_row(
        f"export, {f['exported_events']:,} events, Redis -> Parquet (median of {REPEATS})",
        f"{rate:,.0f} events/s",
        f"≥ {TARGETS['export']:,.0f}",
        ok(rate >= TARGETS["export"]),
        "",
    )
    out.add_row(
        f"analyze, {f['analyze_events']:,} events, local[2]",
        f"{f['analyze_seconds']:.1f} s",
        f"≤ {TARGETS['analyze_s']:.0f} s",
        ok(f["analyze_seconds"] <= TARGETS["analyze_s"]),
        "",
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--pin",
        choices=("split", "same", "none"),
        default="split",
        help="bulk scheduling and export: redis-server on another CPU than Spark and this "
        "process (the default), on the same one, or not pinned",
    )
    parser.add_argument("--part", choices=("redis", "analyze"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part is not None:  # a child of the run below: its figures on stdout
        part = run_redis(args.quick, args.pin) if args.part == "redis" else run_analyze(args.quick)
        print(json.dumps(part))
        return
    started = time.monotonic()
    report: dict[str, Any] = {"command": command()}
    report["machine"] = machine(pyspark=pyspark.__version__, redis_py=redis.__version__)
    report["figures"] = in_child("redis", args) | in_child("analyze", args)
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["store"] = (
        f"private redis-server, {SHARDS} shards, Spark local[2]: "
        f"{report['figures']['placement']}; analyze not pinned"
    )
    report["seconds"] = time.monotonic() - started
    out = console()
    render_header(out, report, f"PySpark {pyspark.__version__}, redis-py {redis.__version__}")
    out.print(table(report["figures"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
