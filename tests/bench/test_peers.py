"""The peers benchmark's own parts (bench/peers): how records become figures,
the table with its best-peer and ratio rows, the catalogue of systems, the
Node job body's record line, and a quick run of the harness end to end on
chronoq's two stores (the peers need their venvs from PyPI and npm:
`make bench-peers`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

PEERS = Path(__file__).resolve().parents[2] / "bench" / "peers"
sys.path.insert(0, str(PEERS))
sys.path.append(str(PEERS.parent))  # bench/common.py, after redis-py (bench/redis.py)

from catalogue import BY_NAME, NODE, REQUIREMENTS, SYSTEMS, interpreter_for  # noqa: E402
from measure import Phase, Records, percentile, spread  # noqa: E402
from report import console_table, markdown_table  # noqa: E402
from rich.console import Console  # noqa: E402


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


def cells(table: str, title: str) -> list[str]:
    """The cells of the Markdown row whose first cell is ``title``."""
    for line in table.splitlines():
        row = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if row[0] == title:
            return row
    raise AssertionError(f"no row {title!r} in\n{table}")


def lag(p50: float, p95: float, p99: float, top: float) -> dict[str, Any]:
    return {"p50": p50, "p95": p95, "p99": p99, "max": top, "n": 1, "lags_ms": [p50]}


def test_the_ratio_rows_compare_chronoq_with_the_best_peer_of_each_column() -> None:
    results = [
        result(
            "chronoq-redis",
            "chronoq (Redis)",
            enqueue_single=1200.0,
            enqueue_bulk=50000.0,
            drain_per_s=1000.0,
            phases={"drain": {}, "lag40": lag(0.5, 1.0, 1.5, 2.0)},
            bytes_per_job=400.0,
        ),
        result(
            "chronoq-sqlite",
            "chronoq (SQLite)",
            enqueue_bulk=2000.0,
            drain_per_s=9999.0,  # not a peer: no ratio divides by it
            bytes_per_job=250.0,
            bytes_kind="disk",
        ),
        result("rq", "RQ", enqueue_single=1500.0, drain_per_s=50.0, early=7),
        result("celery", "Celery", enqueue_bulk=4000.0, drain_per_s=200.0, bytes_per_job=200.0),
        {"name": "huey", "label": "huey", "error": "no venv"},
    ]
    table = markdown_table(results)
    redis = cells(table, "**chronoq (Redis) ÷ best peer**")
    # single enqueue 1200 / RQ's 1500; bulk 50000 / Celery's 4000; drain 1000 / Celery's 200;
    # lag 0.5 / 1.0 ...; bytes 400 / 200 (lower is better: a ratio over 1 is worse)
    assert redis[1:4] == ["0.80", "12", "5.00"]
    assert redis[4] == "0.50 / 0.50 / 0.50 / 0.50"
    assert redis[5] == "0 / 0 / 0 (best peer: 0 / 0 / 0)"
    assert redis[6] == "2.00"
    # chronoq on SQLite against the same peers; its bytes are on disk: no ratio
    sqlite = cells(table, "**chronoq (SQLite) ÷ best peer**")
    assert sqlite[1:4] == ["0.67", "0.50", "50"]
    assert sqlite[4] == "1.00 / 1.00 / 1.00 / 1.00"
    assert sqlite[6] == "—"
    # which peer each ratio divides by; RQ and Celery lag alike: the first, and the tie
    best = cells(table, "best peer of this run")
    assert best[1:4] == ["RQ", "Celery", "Celery"]
    assert best[4] == "RQ (+1 tied)"
    assert best[5:] == ["Celery", "Celery"]
    assert table.index("best peer of this run") < table.index("chronoq (Redis) ÷")
    assert "| huey | failed: no venv |" in table
    assert "| RQ 1.0 | 1,500 | — | 50 |" in table


def test_a_lag_is_judged_by_its_distance_from_the_due_time() -> None:
    # RQ starts early (whole seconds): a p50 of -60 ms is not better than Celery's +2 ms
    results = [
        result("chronoq-redis", "chronoq (Redis)", phases={"lag40": lag(0.8, 1.2, 1.6, 2.4)}),
        result("rq", "RQ", phases={"lag40": lag(-60.0, 500.0, 600.0, 700.0)}, early=90),
        result("celery", "Celery", phases={"lag40": lag(2.0, 3.0, 4.0, 1200.0)}),
        result("saq", "SAQ", phases={"lag40": lag(400.0, 900.0, 990.0, 1000.0)}),
    ]
    table = markdown_table(results)
    assert cells(table, "**chronoq (Redis) ÷ best peer**")[4] == "0.40 / 0.40 / 0.40 / 0.00"
    assert cells(table, "best peer of this run")[4] == "Celery / Celery / Celery / RQ"
    assert cells(table, "best peer of this run")[5] == "Celery (+1 tied)"  # 0 early, lost, dup


def test_the_console_table_names_the_best_peers_and_both_ratios() -> None:
    results = [
        result("chronoq-redis", "chronoq (Redis)", enqueue_single=3000.0),
        result("chronoq-sqlite", "chronoq (SQLite)", enqueue_single=500.0, bytes_kind="disk"),
        result("saq", "SAQ", enqueue_single=2000.0),
        result("bullmq", "BullMQ", enqueue_single=2500.0, enqueue_bulk=20000.0),
    ]
    console = Console(record=True, width=400)
    console.print(console_table(results))
    text = console.export_text()
    assert "best peer of this run" in text and "BullMQ" in text
    redis_row = next(line for line in text.splitlines() if "chronoq (Redis) ÷ best peer" in line)
    sqlite_row = next(line for line in text.splitlines() if "chronoq (SQLite) ÷ best" in line)
    assert "1.20" in redis_row and "**" not in redis_row  # 3000 / BullMQ's 2500
    assert "0.20" in sqlite_row  # 500 / 2500


def test_no_ratio_rows_without_a_peer_or_without_chronoq() -> None:
    alone = [result("chronoq-redis", "chronoq (Redis)")]
    assert "best peer" not in markdown_table(alone)
    peers = [result("saq", "SAQ"), result("bullmq", "BullMQ")]
    assert "best peer" not in markdown_table(peers)


def test_the_catalogue_pins_every_peer_and_says_what_runs_it() -> None:
    names = [system.name for system in SYSTEMS]
    assert names[:2] == ["chronoq-redis", "chronoq-sqlite"]
    assert {"rq", "arq", "huey", "dramatiq", "celery", "saq", "bullmq"} <= set(names)
    for system in SYSTEMS:
        if system.runtime == "python":
            assert system.driver == PEERS / "driver.py"
            assert (PEERS / "systems" / f"peer_{system.adapter}.py").exists()
            if system.own_venv:
                first = (REQUIREMENTS / f"{system.adapter}.txt").read_text().splitlines()[0]
                assert "==" in first, first
        else:
            assert system.runtime == "node"
            assert system.driver == NODE / "driver.js"
            assert (NODE / f"peer_{system.adapter}.js").exists()
    assert interpreter_for(BY_NAME["chronoq-redis"], Path("/nonexistent")) == Path(sys.executable)
    # the Node packages: exact versions, and the lock file holds the same
    package = json.loads((NODE / "package.json").read_text())
    lock = json.loads((NODE / "package-lock.json").read_text())
    for name, wanted in package["dependencies"].items():
        assert wanted[0].isdigit(), f"{name} {wanted} is not an exact version"
        assert lock["packages"][f"node_modules/{name}"]["version"] == wanted


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_node_job_body_writes_the_python_record_line(tmp_path: Path) -> None:
    record = tmp_path / "records"
    code = "const j = require(process.argv[1]); j.record('lag40-3', 1000.5); j.record('x-1', 7)"
    env = {**os.environ, "BENCH_RECORD": str(record)}
    subprocess.run(["node", "-e", code, str(NODE / "jobbody.js")], env=env, check=True)
    records = Records(record)
    assert records.refresh() == 2
    assert set(records.starts) == {"lag40-3", "x-1"}
    assert record.read_text().split()[:2] == ["lag40-3", "1000.5"]
    start = records.starts["lag40-3"][0]
    assert abs(start - time.time()) < 60 and start != int(start)  # epoch seconds, sub-second


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
