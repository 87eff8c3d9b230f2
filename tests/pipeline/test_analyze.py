"""``chronoq analyze`` on a local[2] Spark: exact figures over a made-up
export, the tables and the report it writes, the CLI, and one run through
``spark-submit --master local[2]``."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import chronoq
from chronoq.cli.main import cli
from chronoq.errors import InvalidInput
from chronoq.pipeline.analyze import analyze, parse_bucket
from chronoq.pipeline.export import Exporter, partition_path
from chronoq.pipeline.schema import FILE_SCHEMA

pytestmark = pytest.mark.timeout(180)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
DAY = int(T0.timestamp()) // 86_400


def _event(
    seq: int, at: datetime, job: str, kind: str, attempt: int, lag: int | None
) -> dict[str, Any]:
    """An event of ``job``; jobs j1..j60 are in group "a", the others in none."""
    number = int(job[1:])
    return {
        "seq": seq,
        "ts": at,
        "id": job,
        "event": kind,
        "attempt": attempt,
        "due_at": at - timedelta(milliseconds=lag or 0),
        "priority": 0,
        "lag_ms": lag,
        "error": "boom" if kind in ("nack", "dead") else None,
        "shard": 0,
        "group": "a" if job.startswith("j") and number <= 60 else None,
    }


# the files of an export made before events carried a group
OLD_SCHEMA = FILE_SCHEMA.remove(FILE_SCHEMA.get_field_index("group"))


def _write(
    root: Path, topic: str, events: list[dict[str, Any]], schema: pa.Schema = FILE_SCHEMA
) -> None:
    directory = root / partition_path(topic, DAY)
    directory.mkdir(parents=True, exist_ok=True)
    events = [{k: v for k, v in e.items() if k in schema.names} for e in events]
    table = pa.Table.from_pylist(events, schema=schema)
    pq.write_table(table, directory / f"part-{len(list(directory.iterdir()))}.parquet")


@pytest.fixture
def made_up(tmp_path: Path) -> Path:
    """Topic "mail": 100 jobs put in the 10:00 bucket, reserved in the 11:00
    one with lags 1..100 ms, acked 10*n ms later; job 100 is nacked once
    (retried, then acked) and job 99 dies; jobs 1..60 are in group "a", the
    others in none. Topic "sms": 3 puts only, exported before events carried
    a group (no such column)."""
    root = tmp_path / "events"
    events, seq = [], 0

    def add(at: datetime, job: str, kind: str, attempt: int = 0, lag: int | None = None) -> None:
        nonlocal seq
        seq += 1
        events.append(_event(seq, at, job, kind, attempt, lag))

    hour = T0 + timedelta(hours=1)
    for n in range(1, 101):
        add(T0 + timedelta(seconds=n), f"j{n}", "put")
    for n in range(1, 101):
        reserved = hour + timedelta(seconds=n)
        add(reserved, f"j{n}", "reserve", 1, n)
        if n == 100:
            add(reserved + timedelta(milliseconds=5), "j100", "nack", 1)
            add(reserved + timedelta(seconds=1), "j100", "reserve", 2, 1000)
            add(reserved + timedelta(seconds=1, milliseconds=7), "j100", "ack", 2)
        elif n == 99:
            add(reserved + timedelta(milliseconds=3), "j99", "dead", 1)
        else:
            add(reserved + timedelta(milliseconds=10 * n), f"j{n}", "ack", 1)
    _write(root, "mail", events[:150])
    _write(root, "mail", events[150:])
    sms = [_event(n, T0, f"s{n}", "put", 0, None) for n in range(1, 4)]
    _write(root, "sms", sms, OLD_SCHEMA)
    return root


def test_figures_by_topic_and_bucket(spark: Any, made_up: Path, tmp_path: Path) -> None:
    found = analyze(spark, str(made_up), str(tmp_path / "out"), bucket="1h")
    buckets = {(row["topic"], row["bucket"]): row for row in found.buckets}
    first, second = buckets["mail", T0], buckets["mail", T0 + timedelta(hours=1)]
    assert (first["puts"], first["reserves"], first["lag_p50_ms"]) == (100, 0, None)
    assert first["retry_rate"] is None and first["dead_rate"] is None
    assert (second["reserves"], second["acks"], second["nacks"], second["deads"]) == (101, 99, 1, 1)
    # percentile p of n sorted values: the smallest with at least p * n values at
    # or below it, the value at index ceil(p * n) - 1 (exact below ACCURACY values)
    lags = sorted([*range(1, 101), 1000])
    assert second["lag_p50_ms"] == lags[50] and second["lag_p99_ms"] == lags[99]
    assert second["lag_max_ms"] == 1000
    assert second["retry_rate"] == pytest.approx(1 / 101)
    assert second["dead_rate"] == pytest.approx(1 / 100)
    runs = sorted([10 * n for n in range(1, 99)] + [7])
    assert second["run_p50_ms"] == runs[49] and second["run_p99_ms"] == runs[98]
    topics = {row["topic"]: row for row in found.topics}
    assert topics["mail"]["events"] == 302 and topics["sms"]["events"] == 3
    assert topics["sms"]["lag_p99_ms"] is None
    attempts = {(r["topic"], r["outcome"], r["attempts"]): r["jobs"] for r in found.attempts}
    assert attempts == {("mail", "acked", 1): 98, ("mail", "acked", 2): 1, ("mail", "dead", 1): 1}
    assert found.events == 305
    only = analyze(spark, str(made_up), str(tmp_path / "sms"), bucket="1d", topic="sms")
    assert [row["topic"] for row in only.topics] == ["sms"]


def test_figures_by_group(spark: Any, made_up: Path, tmp_path: Path) -> None:
    found = analyze(spark, str(made_up), str(tmp_path / "out"), bucket="1h")
    # the most jobs first: "a" (60), mail's default group (40), sms's (3, of old files)
    keys = [(row["topic"], row["group"], row["jobs"]) for row in found.groups]
    assert keys == [("mail", "a", 60), ("mail", None, 40), ("sms", None, 3)]
    assert found.group_count == 3
    a, rest, sms = found.groups
    assert (a["puts"], a["reserves"], a["acks"], a["events"]) == (60, 60, 60, 180)
    assert (rest["reserves"], rest["acks"], rest["nacks"], rest["deads"]) == (41, 39, 1, 1)
    # percentile p of n sorted values: the one at index ceil(p * n) - 1
    assert (a["lag_p50_ms"], a["lag_p99_ms"], a["lag_max_ms"]) == (30, 60, 60)
    lags = sorted([*range(61, 101), 1000])
    assert (rest["lag_p50_ms"], rest["lag_max_ms"]) == (lags[20], 1000)
    assert a["run_p50_ms"] == 300 and rest["run_p50_ms"] is not None
    # throughput: acks over the buckets from the group's first event to its last
    assert a["acks_per_s"] == pytest.approx(60 / 7200)
    assert rest["acks_per_s"] == pytest.approx(39 / 7200)
    assert sms["acks_per_s"] == 0 and sms["lag_p99_ms"] is None
    assert rest["dead_rate"] == pytest.approx(1 / 40)
    by_bucket = {(r["topic"], r["group"], r["bucket"]): r for r in found.group_buckets}
    hour = T0 + timedelta(hours=1)
    assert set(by_bucket) == {
        ("mail", "a", T0),
        ("mail", "a", hour),
        ("mail", None, T0),
        ("mail", None, hour),
        ("sms", None, T0),
    }
    assert (by_bucket["mail", "a", T0]["puts"], by_bucket["mail", "a", hour]["acks"]) == (60, 60)
    assert by_bucket["mail", None, hour]["lag_max_ms"] == 1000
    written = spark.read.parquet(found.outputs["groups"]).collect()
    assert sorted((r["topic"], r["group"] or "") for r in written) == [
        ("mail", ""),
        ("mail", "a"),
        ("sms", ""),
    ]


def test_the_cli_writes_tables_csv_and_a_report(spark: Any, made_up: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["analyze", "--events", str(made_up), "--out", str(out), "--bucket", "30m", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["events"] == 305 and doc["report"] == str(out / "report.html")
    assert spark.read.parquet(str(out / "buckets")).count() == 3
    [csv_file] = (out / "buckets_csv").glob("*.csv")
    with open(csv_file) as f:
        rows = list(csv.DictReader(f))
    assert {row["topic"] for row in rows} == {"mail", "sms"}
    assert "lag_p99_ms" in rows[0] and "retry_rate" in rows[0]
    html = (out / "report.html").read_text()
    assert "mail" in html and "<svg" in html and "<script" not in html
    assert "<h2>Groups</h2>" in html and "acks per bucket by group" in html
    assert (out / "groups").is_dir() and (out / "group_buckets_csv").is_dir()
    human = CliRunner().invoke(cli, ["analyze", "--events", str(made_up), "--out", str(out)])
    assert human.exit_code == 0 and "delivery by topic" in human.stdout


def test_bad_input_is_refused_before_spark_runs(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="bucket must be"):
        parse_bucket("hourly")
    assert parse_bucket("90s") == 90 and parse_bucket("1d") == 86_400
    result = CliRunner().invoke(
        cli, ["analyze", "--events", str(tmp_path), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "holds no export" in result.stderr


def test_spark_submit_runs_it_unchanged(made_up: Path, tmp_path: Path) -> None:
    import chronoq.cli.spark_submit as script

    submit = Path(sys.executable).with_name("spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = tmp_path / "out"
    done = subprocess.run(
        [
            *(str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false"),
            *("--conf", "spark.driver.host=127.0.0.1"),
            *("--conf", "spark.driver.bindAddress=127.0.0.1"),
            *(script.__file__, "--events", str(made_up), "--out", str(out), "--json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["events"] == 305 and (out / "report.html").exists()


def test_from_a_store_through_export_to_a_report(
    spark: Any, store_url: str, topic: str, tmp_path: Path
) -> None:
    with chronoq.connect(store_url) as q:
        q.put_many(topic, [chronoq.Job(n, id=f"j{n}") for n in range(50)])
        for job in q.reserve(topic, count=50):
            q.ack(job)
        Exporter(q, tmp_path / "events").run()
    found = analyze(spark, str(tmp_path / "events"), str(tmp_path / "out"), bucket="1d")
    [row] = found.topics
    assert (row["puts"], row["reserves"], row["acks"], row["events"]) == (50, 50, 50, 150)
    assert row["lag_p50_ms"] is not None and row["lag_p50_ms"] >= 0
    assert row["run_p99_ms"] is not None and row["run_p99_ms"] >= 0
