"""A streaming query over the event log, killed with SIGKILL mid-run and
started again from its checkpoint: its file sink holds every event exactly
once. The query's process never calls ``chronoq.pipeline.register``: PySpark
finds the source by itself (``pyspark_chronoq``)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import chronoq

from ..redis_server import RedisServer
from .helpers import log_events, make_events

pytestmark = pytest.mark.timeout(240)

QUERY = """
import json, os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
args = json.loads(sys.argv[1])
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .getOrCreate()
)
stream = (
    spark.readStream.format("chronoq")
    .option("store", args["store"])
    .option("maxEventsPerTrigger", "2000")
    .load()
    .writeStream.format("parquet")
    .option("path", args["out"])
    .option("checkpointLocation", args["checkpoint"])
)
if args["finish"]:
    query = stream.trigger(availableNow=True).start()
else:
    query = stream.trigger(processingTime="50 milliseconds").start()
query.awaitTermination()
"""


def _query(tmp_path: Path, store: str, finish: bool) -> subprocess.Popen[bytes]:
    args = {
        "store": store,
        "out": str(tmp_path / "out"),
        "checkpoint": str(tmp_path / "checkpoint"),
        "finish": finish,
    }
    with open(tmp_path / "query.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", QUERY, json.dumps(args)], stdout=log, stderr=log
        )


def _committed(tmp_path: Path) -> int:
    metadata = tmp_path / "out" / "_spark_metadata"
    return len([p for p in metadata.iterdir() if p.name.isdigit()]) if metadata.exists() else 0


def test_a_query_killed_and_restarted_yields_every_event_once(
    spark: Any, redis_server: RedisServer, topic: str, tmp_path: Path
) -> None:
    # Redis, the store a cluster's executors share (SQLite restarts from a
    # checkpoint in test_spark_read.py; a JVM start per run makes this slow)
    store_url = f"{redis_server.url}?prefix=cq-{uuid.uuid4().hex[:12]}&shards=3"
    rng = random.Random()
    with chronoq.connect(store_url) as q:
        make_events(q, topic, 4000)  # 12,000 events: 6 micro-batches of 2,000
        running = _query(tmp_path, store_url, finish=False)
        deadline = time.monotonic() + 120
        while _committed(tmp_path) < 2 and running.poll() is None:
            assert time.monotonic() < deadline, (tmp_path / "query.log").read_text()[-3000:]
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.5))
        running.kill()
        assert running.wait(30) == -9, (tmp_path / "query.log").read_text()[-3000:]
        killed_at = _committed(tmp_path)
        make_events(q, topic, 500, start=4000)  # more while it was down
        finished = _query(tmp_path, store_url, finish=True)
        assert finished.wait(150) == 0, (tmp_path / "query.log").read_text()[-3000:]
        logged = log_events(q)
    assert 2 <= killed_at < 6, "the query was not killed in the middle of its work"
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    keys = [(row["topic"], row["shard"], row["seq"]) for row in rows]
    assert len(keys) == len(set(keys)), "an event reached the sink twice"
    assert set(keys) == set(logged) and len(keys) == 13_500
