"""A quick run of the scale benchmark (bench/scale.py --quick): every phase on small
counts (private redis-servers, one with AOF that is rewritten and restarted; a SQLite
file), and every figure in its JSON present and whole. No speed is asserted; early
deliveries are: guarantee 1 holds at any speed."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

RUN = Path(__file__).resolve().parents[2] / "bench" / "scale.py"

pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(
    os.environ.get("CI") != "true" and shutil.which("redis-server") is None,
    reason="redis-server is needed for the benchmark's private servers",
)


def whole(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def positive(value: Any) -> bool:
    return whole(value) and value > 0


def check_memory(report: dict[str, Any]) -> None:
    harness = report["harness"]
    for tier in ("near", "far"):
        assert positive(harness[tier]["bytes_per_job"]), tier
        assert len(harness[tier]["runs"]) == harness["rounds"]
        assert positive(harness[tier]["puts_per_s"]), tier
    assert isinstance(harness["near"]["met"], bool)
    volume = report["volume"]
    for tier, jobs in (("near", 20_000), ("far", 100_000)):
        fill = volume[tier]
        assert fill["jobs"] == jobs
        assert positive(fill["bytes_per_job"]) and positive(fill["put"]["jobs_per_s"]), tier
        assert fill["put"]["producers"] == 2
        assert fill["put_calls"]["by_function"]["put"]["calls"] > 0, tier
        assert fill["tiers"]["far"] + fill["tiers"]["jobs_hash"] == jobs, tier
    assert volume["near"]["tiers"]["far"] == 0
    assert volume["far"]["tiers"]["far"] > 0.99 * 100_000  # due over 30 days: nearly all far
    assert isinstance(volume["far"]["met"], bool)


def check_persistence(report: dict[str, Any]) -> None:
    kept = report["volume"]["persistence"]
    assert any(".base.rdb" in name for name in kept["aof_files"]), kept["aof_files"]
    assert positive(kept["aof_bytes_per_job"]) and positive(kept["rewrite_seconds"])
    assert positive(kept["restart"]["start_s"])
    assert kept["jobs_after_restart"] == report["volume"]["far"]["tiers"]
    model = report["model"]
    for place in ("one_node", "per_primary_of_3"):
        for key in ("memory_far_gb", "memory_near_gb", "aof_gb", "restart_s"):
            assert positive(model[place][key]), (place, key)
    assert model["one_node"]["aof_gb"] == pytest.approx(3 * model["per_primary_of_3"]["aof_gb"])


def check_round(rnd: dict[str, Any]) -> None:
    jobs = rnd["jobs"]
    assert rnd["put"]["far_after_put"] == jobs, "the puts ran into the promotion"
    assert rnd["put"]["ended_before_promotion_ms"] > 0
    for timing in (rnd["promotion"], *rnd["promotion_per_shard"]):
        assert positive(timing["jobs_per_s"]) and whole(timing["started_late_ms"])
        assert whole(timing["done_before_bucket_ms"])
    assert sum(t["jobs"] for t in rnd["promotion_per_shard"]) == jobs
    delivery = rnd["delivery"]
    assert delivery["delivered"] == jobs and delivery["leases_lost"] == 0
    assert delivery["early_store_clock"] == 0 and delivery["early_client_clock"] == 0
    assert len(delivery["first_lag_ms_per_shard"]) == rnd["shards"]
    assert all(whole(lag) and lag >= 0 for lag in delivery["first_lag_ms_per_shard"])
    # the last job may be handed over sooner after its due time than the first,
    # when the consumers keep up with a small bucket: each only not early
    assert delivery["last_lag_ms"] >= 0 and delivery["first_lag_ms"] >= 0
    assert not rnd["slowlog_overflowed"]
    assert rnd["calls_during_promotion"]["by_function"]["reserve"]["calls"] > 0
    assert rnd["calls_during_delivery"]["by_function"]["ack"]["calls"] > 0


def check_promotion(report: dict[str, Any]) -> None:
    promotion = report["promotion"]
    assert "horizon_ms=5000" in promotion["why_short_horizon"]
    assert [r["shards"] for r in promotion["rounds"]] == [1, 4]
    for rnd in promotion["rounds"]:
        check_round(rnd)
    for summary, shards in zip(promotion["summary"], (1, 4), strict=True):
        assert summary["shards"] == shards and summary["early"] == 0
        assert summary["delivered"] == summary["expected"] == 20_000
        first = summary["first_lag_ms"]
        assert len(first["samples"]) == shards
        assert all(whole(first[p]) for p in ("p50", "p99", "max"))
        assert isinstance(first["met"], bool)
        assert positive(summary["promotion_jobs_per_s"]["median"])
        for key in ("longest_fcall_during_promotion", "longest_fcall_during_delivery"):
            assert positive(summary[key]["ms"]) and summary[key]["function"], key


@pytest.mark.timeout(600)
def test_a_quick_run_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    run = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out", str(out), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=580,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Promotion of a bucket" in run.stdout and "Model: 100,000,000 jobs" in run.stdout
    report = json.loads(out.read_text())
    assert report["command"] and report["machine"]["redis_server"]
    assert report["phases"] == ["harness", "volume", "promotion", "sqlite"]
    check_memory(report)
    check_persistence(report)
    check_promotion(report)
    sqlite = report["sqlite"]
    assert sqlite["rows"]["jobs"] == sqlite["jobs"] == 20_000
    assert positive(sqlite["bytes_per_job"]) and sqlite["wal_bytes"] == 0  # checkpointed
    assert positive(sqlite["put"]["jobs_per_s"]) and "jobs" in sqlite["bytes_by_table_or_index"]
    assert not list(tmp_path.glob("chronoq-bench-scale-*")), "the work directory is left behind"
