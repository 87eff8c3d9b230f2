"""``chronoq analyze --events DIR --out DIR``: the Spark job of
chronoq.pipeline.analyze on a local Spark, with a summary on the console.

On a cluster, ``spark-submit`` runs chronoq/cli/spark_submit.py with the
same options: the session, its master and its configuration then come from
spark-submit (docs/pipeline.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from chronoq.cli.app import App, Command, pass_app
from chronoq.cli.output import message
from chronoq.errors import InvalidInput

__all__ = ["analyze"]

EPILOG = """\b
Writes under OUT: buckets/, topics/ and attempts/ (Parquet) with
buckets_csv/, topics_csv/ and attempts_csv/ (one CSV file each, with a
header), and report.html (or --report): charts and tables that open offline.
\b
On a cluster (PYSPARK_PYTHON: a Python with chronoq[spark] installed):
  spark-submit --master yarn \\
    $(python -c 'import chronoq.cli.spark_submit as s; print(s.__file__)') \\
    --events hdfs:///chronoq/events --out hdfs:///chronoq/analysis --report report.html
"""


def _spark(master: str | None) -> Any:
    """The session: spark-submit's when it started this process, else a local one."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # PySpark is optional: the spark extra
        raise InvalidInput(
            f"chronoq analyze runs on Spark: pip install 'chronoq[spark]' ({exc})"
        ) from None
    builder = SparkSession.builder.appName("chronoq analyze")
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is not None or not under_submit:
        builder = builder.master(master or "local[*]")
    return builder.getOrCreate()


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.2%}"


def _summary(topics: list[dict[str, Any]]) -> Table:
    table = Table(title="delivery by topic", title_justify="left")
    for name in ("topic", "events", "puts", "acks", "dead", "lag p50 ms", "lag p99 ms"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for name in ("lag max ms", "retries", "dead letters"):
        table.add_column(name, justify="right")
    for row in topics:
        table.add_row(
            row["topic"],
            f"{row['events']:,}",
            f"{row['puts']:,}",
            f"{row['acks']:,}",
            f"{row['deads'] + row['buries']:,}",
            _ms(row["lag_p50_ms"]),
            _ms(row["lag_p99_ms"]),
            _ms(row["lag_max_ms"]),
            _rate(row["retry_rate"]),
            _rate(row["dead_rate"]),
        )
    return table


@click.command(cls=Command, epilog=EPILOG)
@click.option(
    "--events", required=True, metavar="DIR", help="The directory chronoq export writes to."
)
@click.option("--out", required=True, metavar="DIR", help="Where the tables go.")
@click.option("--bucket", default="1h", show_default=True, help="Time bucket: 30s, 5m, 1h, 1d.")
@click.option("--topic", help="Analyze this topic only.")
@click.option("--master", help="Spark master [local[*]; under spark-submit, its own].")
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where report.html goes on this machine [OUT/report.html].",
)
@pass_app
def analyze(
    app: App,
    events: str,
    out: str,
    bucket: str,
    topic: str | None,
    master: str | None,
    report: Path | None,
) -> None:
    """Measure delivery from exported events, per topic and time bucket, and per group.

    Counts of each event kind, hand-over lag p50/p95/p99/max, reserve-to-ack
    time, attempts, retry and dead-letter rates, and each group's jobs and
    acks per second; as Parquet and CSV tables and a self-contained HTML report.
    """
    from chronoq.pipeline import analyze as job  # PySpark: the spark extra

    job.parse_bucket(bucket)  # a bad bucket fails before Spark starts
    local = "://" not in events
    if local and not Path(events, "_chronoq").is_dir() and not any(Path(events).glob("topic=*")):
        raise InvalidInput(f"{events} holds no export: run `chronoq export --to {events}`")
    spark = _spark(master)
    found = job.analyze(spark, events, out, bucket=bucket, topic=topic)
    path = report or Path(out, "report.html")
    params = job.parameters(events, bucket, topic, spark.sparkContext.master)
    job.write_report(found, params, events, path)
    doc = {
        "events": found.events,
        "topics": len(found.topics),
        "groups": found.group_count,
        "seconds": round(found.seconds, 3),
        "tables": found.outputs,
        "report": str(path),
    }
    app.out.emit(doc, lambda: _summary(found.topics))
    if not app.out.as_json:
        app.out.stdout.print(
            message(
                f"{found.events:,} events in {found.seconds:.1f} s; tables in {out}, "
                f"report in {path}"
            )
        )
