"""The orders example: "close every unpaid order 30 minutes after it was
created", scheduled from a table with Spark instead of a sweep every minute.

One command, ``make example-spark`` (or ``python examples/orders/run.py
[--store URL] [--orders N]``):

1. makes an orders table: 1,000,000 orders created over the last hour, about
   30% unpaid (Parquet, with Spark);
2. schedules a job per unpaid order, due 30 minutes after its creation, with
   one DataFrame write; then runs the same write again: nothing is scheduled
   twice (jobs are put by id);
3. runs a worker that closes the orders whose job is due (those created more
   than 30 minutes ago: about half), then stops;
4. exports the event log to Parquet and analyzes it: report.html.

Everything goes to examples/orders/out/ (a fresh SQLite store there by default).
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import chronoq
from chronoq.pipeline import local_session
from chronoq.pipeline.analyze import analyze, parameters, write_report
from chronoq.pipeline.export import Exporter

HERE = Path(__file__).resolve().parent
TOPIC = "orders.close"


def make_orders(spark: SparkSession, path: Path, count: int) -> None:
    """Orders created over the last hour, 30% of them unpaid."""
    now = int(time.time())
    spark.range(count, numPartitions=2).select(
        F.col("id").alias("order_id"),
        F.concat(F.lit("customer-"), (F.col("id") % 50_000).cast("string")).alias("customer"),
        F.round(F.rand(seed=1) * 200 + 5, 2).alias("amount"),
        F.timestamp_seconds(F.lit(now) - (F.rand(seed=2) * 3600).cast("long")).alias("created_at"),
        (F.rand(seed=3) >= 0.3).alias("paid"),
    ).write.mode("overwrite").parquet(str(path))


def schedule(spark: SparkSession, orders: Path, store: str) -> None:
    """The job that replaces "sweep the orders table every minute"."""
    unpaid = spark.read.parquet(str(orders)).where(~F.col("paid"))
    jobs = unpaid.select(
        F.concat(F.lit("order-"), F.col("order_id").cast("string")).alias("id"),
        F.to_json(F.struct("order_id", "customer", "amount")).alias("payload"),
        (F.col("created_at") + F.expr("INTERVAL 30 MINUTES")).alias("run_at"),
    )
    jobs.write.format("chronoq").option("store", store).option("topic", TOPIC).mode("append").save()


def close_due_orders(q: chronoq.Queue) -> int:
    """A worker closes every order whose job is due, then stops."""
    closed: list[int] = []

    def close(job: chronoq.Reservation) -> None:
        closed.append(job.payload["order_id"])  # a real handler would update the order

    worker = chronoq.Worker(q, {TOPIC: close}, concurrency=8)

    def stop_when_done() -> None:
        while True:
            time.sleep(0.5)
            stats = q.stats(TOPIC)
            if stats["ready"] == 0 and stats["reserved"] == 0:
                worker.stop()
                return

    threading.Thread(target=stop_when_done, daemon=True).start()
    worker.run()
    return len(closed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="store URL [a fresh SQLite file in out/]")
    parser.add_argument("--orders", type=int, default=1_000_000, help="orders to make [1000000]")
    args = parser.parse_args()
    out = HERE / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    store = args.store or f"sqlite:///{out / 'store.db'}"
    spark = local_session("chronoq orders example", master="local[*]")
    q = chronoq.connect(store)
    step = time.monotonic()

    def done(what: str) -> None:
        nonlocal step
        print(f"  {what} ({time.monotonic() - step:.1f} s)", flush=True)
        step = time.monotonic()

    print(f"chronoq orders example: store {q.url}, output in {out}", flush=True)
    make_orders(spark, out / "orders", args.orders)
    unpaid = spark.read.parquet(str(out / "orders")).where(~F.col("paid")).count()
    done(f"made {args.orders:,} orders, {unpaid:,} unpaid")
    schedule(spark, out / "orders", store)
    total = q.stats(TOPIC)["total"]
    done(f"scheduled {total:,} jobs, one per unpaid order, each due 30 minutes after creation")
    schedule(spark, out / "orders", store)
    again = q.stats(TOPIC)["total"] - total
    done(f"the same write again scheduled {again:,} more: nothing twice")
    closed = close_due_orders(q)
    left = q.stats(TOPIC)["delayed"]
    done(f"a worker closed {closed:,} orders that were due; {left:,} are due later")
    summary = Exporter(q, out / "events").run()
    done(f"exported {summary.events:,} events to {out / 'events'}")
    found = analyze(spark, str(out / "events"), str(out / "analysis"), bucket="10s")
    report = out / "analysis" / "report.html"
    params = parameters(str(out / "events"), "10s", None, spark.sparkContext.master)
    write_report(found, params, str(out / "events"), report)
    done(f"analyzed {found.events:,} events")
    print(f"report: {report}", flush=True)
    q.close()
    spark.stop()


if __name__ == "__main__":
    main()
