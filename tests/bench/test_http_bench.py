"""A quick run of the HTTP benchmark (bench/http/run.py) on SQLite: it serves,
drives wrk and the long-poll clients, and writes every figure to its JSON;
the parts of its comparison with ouqiang (bench/http/versus*.py: the pushes,
the ratios, the targets, the tables) and a quick run of it on chronoq alone.
No speed is asserted: the figures only have to be there and be whole."""

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
from rich.console import Console

RUN = Path(__file__).resolve().parents[2] / "bench" / "http" / "run.py"
sys.path.append(str(RUN.parent))  # bench/http: versus_tables, versus_wire, scripts

from versus_tables import cpu_table, judge, rate_table, ratios, summarize, target_table  # noqa: E402
from versus_wire import KINDS, split_counts, wrk_script  # noqa: E402

needs_wrk = pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is missing: `make bench-http` installs it"
)


def positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


@needs_wrk
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


@needs_wrk
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


# -- bench/http/versus.py: chronoq against ouqiang's Go server ------------------------------


def test_each_push_is_the_same_job_in_its_protocol() -> None:
    push = json.loads(KINDS["push"].body("vs.t", "id-7") or b"")
    assert push == {"topic": "vs.t", "id": "id-7", "delay": 3600, "ttr": 30, "body": push["body"]}
    youzan = json.loads(KINDS["youzan"].body("vs.t", "id-7") or b"")
    assert youzan == {"command": "add", **push}
    native = json.loads(KINDS["native"].body("vs.t", "id-7") or b"")
    assert native == {"payload": push["body"], "delay": 3600, "ttr": 30}  # a generated id
    assert KINDS["hello"].body("vs.t", "id-7") is None
    assert KINDS["native"].path("vs.t") == "/v1/topics/vs.t/jobs"
    assert [KINDS[k].path("t") for k in ("push", "youzan", "hello")] == [
        "/push",
        "/v1/command",
        "/hello",
    ]


def test_an_answer_counts_only_when_the_job_was_taken() -> None:
    push = KINDS["push"]
    assert push.accepted(200, '{"code":0,"message":"添加成功","data":null}'.encode())
    assert not push.accepted(200, '{"code":1,"message":"job id不能为空","data":null}'.encode())
    youzan = KINDS["youzan"]
    assert youzan.accepted(200, b'{"success":true,"error":null,"id":"a","value":null}')
    assert not youzan.accepted(200, b'{"success":false,"error":"no","id":"a","value":null}')
    assert KINDS["native"].accepted(201, b"{}") and not KINDS["native"].accepted(200, b"{}")
    assert KINDS["hello"].accepted(200, b"{}") and not KINDS["hello"].accepted(500, b"")


def test_pushes_are_shared_out_over_connections() -> None:
    assert split_counts(5000, 16) == [313] * 8 + [312] * 8
    assert split_counts(3, 4) == [1, 1, 1, 0]
    assert sum(split_counts(5000, 1)) == 5000


def test_the_wrk_scripts_send_a_new_id_each_and_count_refusals() -> None:
    push = wrk_script(KINDS["push"], "vs.t", "r0-wrk-")
    assert '"/push"' in push and '"r0-wrk-"' in push and "prefix .. n .. tail" in push
    assert "body:find('\"code\":0', 1, true)" in push and "bad = bad + 1" in push
    assert "CHRONOQ" in push  # scripts.DONE: wrk() reads its figures back
    assert 'wrk.format("POST", path, headers, head)' in wrk_script(KINDS["native"], "t", "p")
    assert "status ~= 201" in wrk_script(KINDS["native"], "t", "p")
    assert 'wrk.format("GET", path)' in wrk_script(KINDS["hello"], "t", "p")


def rounds_of(ouqiang: bool) -> list[dict[str, dict[str, float]]]:
    """Three rounds of rates: chronoq's ratios to ouqiang differ from round to
    round, so a ratio of medians and a median of ratios differ."""
    out = []
    for n, base in enumerate((1000.0, 2000.0, 1500.0)):
        r = {
            "sqlite:push": {"c1": 1.6 * base, "c16": 1.4 * base + 100 * n, "wrk": base},
            "sqlite:native": {"c1": 2.5 * base, "c16": 2.5 * base, "wrk": 3 * base},
            "sqlite:youzan": {"c1": 2.4 * base, "c16": 2.0 * base, "wrk": 2.9 * base},
            "hello:hello": {"c1": 4 * base, "c16": 6 * base, "wrk": 5 * base},
        }
        if ouqiang:
            r["ouqiang:push"] = {"c1": base, "c16": base, "wrk": base}
        out.append(r)
    return out


def test_ratios_are_taken_in_each_round_then_their_median() -> None:
    rounds = rounds_of(ouqiang=True)
    vs = ratios(rounds, "ouqiang:push")
    assert vs["ouqiang:push"] == {"c1": 1.0, "c16": 1.0, "wrk": 1.0}
    assert vs["sqlite:native"] == {"c1": 2.5, "c16": 2.5, "wrk": 3.0}
    # c16 of /push: 1.4, 1.4 + 100/2000, 1.4 + 200/1500 -> median 1.45
    assert math.isclose(vs["sqlite:push"]["c16"], 1.45)
    assert ratios(rounds_of(ouqiang=False), "ouqiang:push") == {}


def test_the_targets_are_judged_on_their_columns() -> None:
    targets = {t["target"]: t for t in judge(rounds_of(ouqiang=True), ("sqlite",))}
    push = targets["/push ≥ 1.5× ouqiang"]
    assert push["columns"]["c1"]["met"] is True and push["columns"]["c16"]["met"] is False
    assert push["columns"]["wrk"]["met"] is None  # shown, not judged
    assert push["met"] is False
    assert targets["native put ≥ 2× ouqiang"]["met"] is True
    youzan = targets["Youzan add within 10% of native put (≥ 0.9×)"]["columns"]
    assert {c: cell["met"] for c, cell in youzan.items()} == {"c1": True, "c16": False, "wrk": True}
    hello = targets["native put ≥ 0.5 of hello-world"]["columns"]
    assert {c: cell["met"] for c, cell in hello.items()} == {"c1": True, "c16": False, "wrk": True}
    skipped = {t["target"]: t for t in judge(rounds_of(ouqiang=False), ("sqlite",))}
    assert skipped["/push ≥ 1.5× ouqiang"]["met"] is None
    assert skipped["/push ≥ 1.5× ouqiang"]["columns"] == {}
    assert skipped["native put ≥ 0.5 of hello-world"]["met"] is False


def report_of(ouqiang: bool) -> dict[str, Any]:
    settings = {"rounds": 3, "count": 5000, "connections": 16, "processes": 4}
    settings |= {"wrk_connections": 16, "seconds": 5, "stores": ["sqlite"]}
    raw = [
        {row: {c: {"rate": rate, "server_cpu_percent": 50.0, "client_cpu_percent": 99.0}
               for c, rate in cells.items()}
         for row, cells in r.items()}
        for r in rounds_of(ouqiang)
    ]  # fmt: skip
    report: dict[str, Any] = {"settings": settings}
    summarize(report, raw)
    return report


def rendered(report: dict[str, Any]) -> str:
    out = Console(record=True, width=240)
    for table in (rate_table(report), target_table(report), cpu_table(report)):
        out.print(table)
    return out.export_text()


def test_the_tables_show_rates_ratios_and_verdicts() -> None:
    report = report_of(ouqiang=True)
    assert report["rows"][0] == "ouqiang:push" and report["rows"][-1] == "hello:hello"
    assert report["median"]["sqlite:native"]["c1"] == 2.5 * 1500
    text = rendered(report)
    assert "ouqiang v0.4 (Go) + Redis" in text and "3,750" in text and "2.50" in text
    assert "MISSED" in text and "met" in text and "(1.00)" in text  # /push's wrk ratio
    assert "50 / 99 *" in text  # the server at half its core under 16 connections


def test_without_ouqiang_its_row_says_skipped() -> None:
    report = report_of(ouqiang=False)
    text = rendered(report)
    assert "│ skipped │" in text and "n/a" in text
    assert report["vs_ouqiang"] == {}


VERSUS_SKIP = "OUQIANG_BIN is not set: the ouqiang row is skipped"


@needs_wrk
@pytest.mark.timeout(90)
def test_a_quick_versus_run_on_sqlite_without_ouqiang(tmp_path: Path) -> None:
    """run.py --versus on chronoq alone: hello-world and the three pushes on
    SQLite measured with http.client and wrk; ouqiang's row skipped, saying how."""
    out = tmp_path / "versus.json"
    env = {k: v for k, v in os.environ.items() if k != "OUQIANG_BIN"}
    run = subprocess.run(
        [sys.executable, str(RUN), "--versus", "--quick", "--stores", "sqlite", "--out", str(out)],
        capture_output=True, text=True, timeout=80, env={**env, "COLUMNS": "200"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert VERSUS_SKIP in run.stderr and "OUQIANG_BIN=" in run.stderr
    assert VERSUS_SKIP in " ".join(run.stdout.split())  # rich wraps it
    assert "│ skipped │" in run.stdout
    report = json.loads(out.read_text())
    assert report["ouqiang_skipped"].startswith(VERSUS_SKIP)
    assert set(report["median"]) == {"sqlite:push", "sqlite:native", "sqlite:youzan", "hello:hello"}
    for row, cells in report["median"].items():
        assert set(cells) == {"c1", "c16", "wrk"}, row
        assert all(positive(rate) for rate in cells.values()), row
    cell = report["raw"][0]["sqlite:push"]["c16"]
    assert cell["requests"] == report["settings"]["count"] and positive(cell["seconds"])
    assert report["raw"][0]["sqlite:native"]["wrk"]["requests"] > 0
    targets = {(t["target"], t["store"]): t for t in report["targets"]}
    assert targets["/push ≥ 1.5× ouqiang", "sqlite"]["met"] is None
    assert isinstance(targets["native put ≥ 0.5 of hello-world", "sqlite"]["met"], bool)
