"""The peers benchmark's own parts (bench/peers): how records become figures,
the table and its ratio row, and a quick run of the harness end to end on
chronoq's two stores (the peers need their venvs from PyPI: `make bench-peers`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PEERS = Path(__file__).resolve().parents[2] / "bench" / "peers"
sys.path.insert(0, str(PEERS))
sys.path.append(str(PEERS.parent))  # bench/common.py, after redis-py (bench/redis.py)

from measure import Phase, Records, percentile, spread  # noqa: E402
from report import markdown_table  # noqa: E402


def write(path: Path, lines: list[str]) -> None:
    with path.open("a") as f:
        f.write("".join(lines))


def test_records_are_read_as_the_file_grows(tmp_path: Path) -> None:
    records = Records(tmp_path / "r")
    assert records.refresh() == 0  # no file yet
    write(records.path, ["a-0 10.0 10.5\n", "a-1 11.0 11."])  # the last line half written
    assert records.refresh() == 1
    assert dict(records.starts) == {"a-0": [10.5]}
    write(records.path, ["25\n", "a-0 10.0 12.0\n"])
    assert records.refresh() == 2
    assert records.starts["a-1"] == [11.25] and records.starts["a-0"] == [10.5, 12.0]


def test_a_phase_counts_early_lost_and_duplicate_starts(tmp_path: Path) -> None:
    phase = Phase("p", [("p-0", 100.0), ("p-1", 101.0), ("p-2", 102.0), ("p-3", 103.0)])
    records = Records(tmp_path / "r")
    write(
        records.path,
        [
            "p-0 100.0 100.002\n",  # 2 ms late
            "p-1 101.0 100.9995\n",  # 0.5 ms early: within the 1 ms allowed
            "p-2 102.0 101.990\n",  # 10 ms early
            "p-2 102.0 102.5\n",  # and again: a duplicate
        ],
    )
    records.refresh()
    outcome = phase.outcome(records)
    assert (outcome["n"], outcome["early"], outcome["lost"], outcome["duplicates"]) == (4, 1, 1, 1)
    assert outcome["lags_ms"] == pytest.approx([2.0, -0.5, -10.0])  # each job's first start
    assert outcome["max"] == pytest.approx(2.0)
    assert phase.drain_rate(records) is None  # p-3 never started


def test_the_drain_rate_runs_from_when_all_were_due_and_in() -> None:
    phase = Phase("d", [(f"d-{k}", 50.0) for k in range(4)], enqueue_finished=49.0)
    records = Records(Path("/nonexistent"))
    for k, start in enumerate((50.1, 50.2, 50.3, 50.5)):
        records.starts[f"d-{k}"].append(start)
    assert phase.drain_rate(records) == pytest.approx(4 / 0.5)
    phase.enqueue_finished = 50.25  # the jobs were not all in by their due time
    assert phase.drain_rate(records) == pytest.approx(4 / 0.25)


def test_spread_due_times_and_percentiles() -> None:
    phase = spread("lag40", 1000.0, 40, 5)
    assert phase.jobs == [(f"lag40-{k}", 1000.0 + k * 0.025) for k in range(5)]
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50.0,
        99.0,
        100.0,
    )


def result(name: str, label: str, **figures: Any) -> dict[str, Any]:
    lag = {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0, "n": 1, "lags_ms": [1.0]}
    base: dict[str, Any] = {
        "name": name,
        "label": label,
        "version": f"{name} 1.0",
        "enqueue_single": 1000.0,
        "enqueue_bulk": None,
        "drain_per_s": 100.0,
        "phases": {"drain": {}, "lag40": dict(lag)},
        "early": 0,
        "lost": 0,
        "duplicates": 0,
        "bytes_per_job": 300.0,
        "bytes_kind": "redis",
    }
    base.update(figures)
    return base


def test_the_ratio_row_compares_chronoq_on_redis_with_the_best_peer() -> None:
    fast_lag = {"p50": 0.5, "p95": 1.0, "p99": 1.5, "max": 2.0, "n": 1, "lags_ms": [0.5]}
    results = [
        result(
            "chronoq-redis",
            "chronoq (Redis)",
            enqueue_single=1200.0,
            enqueue_bulk=50000.0,
            drain_per_s=1000.0,
            phases={"drain": {}, "lag40": fast_lag},
            bytes_per_job=400.0,
        ),
        result("chronoq-sqlite", "chronoq (SQLite)", drain_per_s=9999.0),  # not a peer
        result("rq", "RQ", enqueue_single=1500.0, drain_per_s=50.0, early=7),
        result("celery", "Celery", enqueue_bulk=4000.0, drain_per_s=200.0, bytes_per_job=200.0),
        {"name": "huey", "label": "huey", "error": "no venv"},
    ]
    table = markdown_table(results)
    ratio = table.splitlines()[-1].split(" | ")
    # single enqueue 1200 / 1500; bulk 50000 / 4000; drain 1000 / 200 (not SQLite's);
    # lag 0.5 / 1.0 ...; bytes 400 / 200 (lower is better: a ratio over 1 is worse)
    assert ratio[1:4] == ["0.80", "12", "5.00"]
    assert ratio[4] == "0.50 / 0.50 / 0.50 / 0.50"
    assert ratio[5].startswith("0 / 0 / 0 (best peer: 0 / 0 / 0)")
    assert ratio[6].rstrip(" |") == "2.00"
    assert "| huey | failed: no venv |" in table
    assert "| RQ 1.0 | 1,500 | — | 50 |" in table


@pytest.mark.timeout(300)
def test_a_quick_run_of_chronoq_on_both_stores(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            str(PEERS / "run.py"),
            "--quick",
            "--systems",
            "chronoq-redis,chronoq-sqlite",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((out / "results.json").read_text())
    names = [r["name"] for r in report["results"]]
    assert names == ["chronoq-redis", "chronoq-sqlite"]
    for r in report["results"]:
        assert (r["early"], r["lost"], r["duplicates"]) == (0, 0, 0), r["name"]
        assert r["drain_per_s"] > 0 and r["enqueue_single"] > 0 and r["enqueue_bulk"] > 0
        assert set(r["phases"]) == {"drain", "lag40", "lag400", "lag5000"}
        assert all(p["lost"] == 0 for p in r["phases"].values())
    assert report["machine"]["redis_server"]
    assert "chronoq (Redis) ÷ best peer" not in (out / "table.md").read_text()  # no peer ran
    for name in ("lag40", "lag400", "lag5000"):
        assert (out / f"peers-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
