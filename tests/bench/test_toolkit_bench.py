"""Quick runs of the web toolkit benchmarks of issue 26: bench/http/toolkit.py
(the server with each toolkit under wrk, on SQLite) writes every figure and
ratio of both sides, and bench/http/toolkit_dispatch.py drives every
toolkit's app in process. No speed is asserted: the figures only have to
be there and be whole."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HTTP = Path(__file__).resolve().parents[2] / "bench" / "http"


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is missing: `make bench-http`")
@pytest.mark.timeout(180)
def test_a_quick_ab_run_writes_both_sides(tmp_path: Path) -> None:
    out = tmp_path / "toolkit.json"
    command = [sys.executable, str(HTTP / "toolkit.py"), "--rounds", "1", "--seconds", "1"]
    command += ["--backends", "sqlite", "--toolkits", "own,starlette", "--out", str(out)]
    run = subprocess.run(
        command, capture_output=True, text=True, timeout=170, env={**os.environ, "COLUMNS": "200"}
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["uptime_before"] and report["machine"]["starlette"]
    rows = {(row["figure"], row["toolkit"]): row for row in report["rows"]}
    assert set(rows) == {
        (figure, toolkit) for figure in ("put", "reserve_ack") for toolkit in ("own", "starlette")
    }
    for row in rows.values():
        assert row["store"] == "sqlite"
        assert math.isfinite(row["rate"]) and row["rate"] > 0
        assert row["cpu_us"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0
        assert row["empty"] == 0  # the prefilled topic never ran dry
        assert len(row["rate_ratios"]) == 1
    for figure in ("put", "reserve_ack"):
        assert rows[figure, "own"]["rate_ratio"] == 1.0
        starlette = rows[figure, "starlette"]
        assert starlette["rate_ratio"] == starlette["rate"] / rows[figure, "own"]["rate"]


@pytest.mark.timeout(120)
def test_the_dispatch_bench_drives_every_toolkit() -> None:
    command = [sys.executable, str(HTTP / "toolkit_dispatch.py"), "--requests", "200"]
    run = subprocess.run(
        [*command, "--rounds", "1"], capture_output=True, text=True, timeout=110,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [[cell.strip() for cell in line.split("│")] for line in run.stdout.splitlines()]
    figures = {(row[1], row[2]): float(row[3]) for row in rows if len(row) > 4}
    for route in ("put", "reserve", "ack"):
        for toolkit in ("own", "starlette", "starlette-router"):
            assert figures[route, toolkit] > 0, (route, toolkit, run.stdout)
