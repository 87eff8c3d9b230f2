"""A quick run of the Redis Cluster benchmark (bench/cluster/run.py): it starts a redis-server
and two local clusters, measures every phase on every store, and writes every figure to its
JSON. No speed is asserted: the figures only have to be there and be whole."""

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

RUN = Path(__file__).resolve().parents[2] / "bench" / "cluster" / "run.py"
PHASES = ("put_one", "put_many_100", "put_many_1000", "reserve_1", "reserve_100", "lag")
STORES = ("node1", "node16", "cluster0", "cluster")
CLUSTERS = ("cluster0", "cluster")

pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(
    os.environ.get("CI") != "true"
    and (shutil.which("redis-server") is None or shutil.which("redis-cli") is None),
    reason="redis-server and redis-cli are needed to start a local cluster",
)


def positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def check_phase(name: str, figure: dict[str, Any]) -> None:
    for store in STORES:
        mine = figure[store]
        for key in ("jobs_per_s", "server_cpu_us_per_job", "fcalls_per_job"):
            assert positive(mine[key]["median"]), (name, store, key)
            assert len(mine[key]["runs"]) == 2, (name, store, key)  # --quick: 2 rounds
        assert mine["replica_cpu_us_per_job"]["median"] >= 0
    assert positive(figure["cluster"]["replica_cpu_us_per_job"]["median"]), name
    for ratio in figure["ratios"].values():
        assert positive(ratio["server_cpu_per_job"]["median"]), name
        assert isinstance(ratio["server_cpu_per_job"]["met"], bool), name
        assert positive(ratio["jobs_per_s"]["median"]), name


def check_spread(spread: dict[str, Any]) -> None:
    shards = spread["shards"]
    assert sum(spread["shards_per_primary"].values()) == shards
    assert sum(spread["records"].values()) == spread["jobs"]
    assert len(spread["records"]) == 3
    for side in ("put", "drain"):
        assert sum(spread[side]["calls"].values()) > 0, (shards, side)
        assert all(math.isfinite(d) for d in spread[side]["calls_deviation"].values())
    assert positive(spread["drain_jobs_per_s"])


@pytest.mark.timeout(300)
def test_a_quick_run_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "cluster.json"
    run = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Server CPU per job" in run.stdout
    report = json.loads(out.read_text())
    assert report["command"] and report["machine"]["redis_server"]
    figures = report["figures"]
    assert set(figures) == set(PHASES)
    for name in PHASES:
        check_phase(name, figures[name])
    for store in STORES:
        lag = figures["lag"][store]["lag_ms"]
        assert lag["delivered"] == lag["expected"] > 0, store
        assert lag["early"] == 0, store
        assert all(math.isfinite(lag[p]) for p in ("p50", "p99", "max")), store
    assert [s["shards"] for s in report["spread"]] == [16, 48, 64]
    for spread in report["spread"]:
        check_spread(spread)
    model = report["model"]["jobs_per_s"]
    for phase in model.values():
        assert set(phase) == {"1", "3", "6", "12"}
        assert all(positive(v) for row in phase.values() for v in row.values())
    assert set(report["idle_cpu_ms_per_s"]) == {"node16", *CLUSTERS}
