"""A quick run of the HTTP benchmark (bench/http/run.py) on SQLite: it serves,
drives wrk and the long-poll clients, and writes every figure to its JSON.
No speed is asserted: the figures only have to be there and be whole."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "bench" / "http" / "run.py"

pytestmark = pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is missing: `make bench-http` installs it"
)


def positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


@pytest.mark.timeout(180)
def test_a_quick_run_on_sqlite_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "http.json"
    run = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--backends", "sqlite", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=170,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Hand-over lag" in run.stdout
    report = json.loads(out.read_text())
    assert report["command"] and report["machine"]["wrk"]
    assert positive(report["hello"]["median"])
    assert list(report["backends"]) == ["sqlite"]
    figures = report["backends"]["sqlite"]
    for name in ("put", "reserve_ack", "put_batch"):
        assert positive(figures[name]["median"]), name
        assert isinstance(figures[name]["met"], bool), name
    for name in ("put", "reserve_ack"):
        assert positive(figures[name]["share_median"]), name
    assert figures["reserve_ack"]["empty_reserves"] == [0]  # the queue never ran dry
    assert set(figures["lag"]) == {"40", "400"}
    for lag in figures["lag"].values():
        assert lag["delivered"] == lag["expected"] == lag["distinct"] > 0
        assert lag["early"] == 0
        for side in ("client_ms", "server_ms"):
            assert set(lag[side]) == {"p50", "p99", "max", "min"}
            assert all(math.isfinite(v) for v in lag[side].values())
    idle = figures["idle_polls"]
    assert idle["polls"] == idle["answered"] == 1000
    for window in ("cpu_percent", "cpu_percent_one_poll", "cpu_percent_no_polls"):
        assert idle[window]["server"] >= 0, window
    assert idle["redis_clients"] is None


AB = RUN.parent / "ab.py"


@pytest.mark.timeout(120)
def test_the_ab_run_compares_two_checkouts(tmp_path: Path) -> None:
    """bench/http/ab.py on this checkout against itself: both sides served,
    measured and put in the table (a ratio near 1 is not asserted: noise)."""
    src = RUN.parents[2] / "src"
    run = subprocess.run(
        [sys.executable, str(AB), "--a", str(src), "--b", str(src), "--rounds", "1",
         "--seconds", "1", "--backends", "sqlite"],
        capture_output=True, text=True, timeout=110, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    measured = [line for line in run.stdout.splitlines() if line.startswith("round 1")]
    assert len(measured) == 2 and all("µs/request" in line for line in measured)
    assert "b / a" in run.stdout
