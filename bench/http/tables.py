"""The HTTP benchmark's figures: medians and targets of the raw runs, and the
tables printed at the end."""

from __future__ import annotations

import statistics
from typing import Any

from common import command_and_machine
from rich.console import Console
from rich.table import Table

PUT_SHARE = 0.40  # single put rate / hello-world rate
PAIR_SHARE = 0.30  # reserve+ack pairs/s / hello-world req/s
BATCH_JOBS = 50_000.0  # jobs/s in jobs:batch requests of 1,000
LAG_P99_MS = {400.0: 5.0}  # client-side p99 at this many due jobs/s
IDLE_CPU_PERCENT = 1.0  # "near 0": the server's CPU with 1,000 idle long polls
LABELS = {"sqlite": "SQLite", "redis": "Redis"}


def rate_figure(
    unit: str, runs: list[float], hello: list[float] | None, share_min: float | None
) -> dict[str, Any]:
    """Runs of one figure, and (when ``hello`` is given) each as a share of the
    hello-world rate of the same round."""
    figure: dict[str, Any] = {"unit": unit, "runs": runs, "median": statistics.median(runs)}
    if hello is not None:
        shares = [rate / base for rate, base in zip(runs, hello, strict=True)]
        figure |= {"share_runs": shares, "share_median": statistics.median(shares)}
    if share_min is not None:
        figure |= {"target_share_min": share_min, "met": figure["share_median"] >= share_min}
    return figure


def judge_lag(lag: dict[str, Any]) -> dict[str, Any]:
    limit = LAG_P99_MS.get(lag["rate"])
    whole = lag["delivered"] == lag["expected"] == lag["distinct"] and lag["early"] == 0
    met = whole and (limit is None or lag["client_ms"]["p99"] <= limit)
    return {**lag, "target_p99_max_ms": limit, "met": met}


def judge_idle(idle: dict[str, Any]) -> dict[str, Any]:
    met = idle["cpu_percent"]["server"] <= IDLE_CPU_PERCENT and idle["answered"] == idle["polls"]
    if idle["redis_clients"] is not None:
        met = met and idle["redis_clients"]["blocked_clients"] == 1
    return {**idle, "target_cpu_percent_max": IDLE_CPU_PERCENT, "met": met}


def _status(ok: bool | None) -> str:
    return "" if ok is None else ("[green]met[/]" if ok else "[red]MISSED[/]")


def _runs(runs: list[float]) -> str:
    return " ".join(f"{r:,.0f}" for r in runs)


def throughput_table(report: dict[str, Any]) -> Table:
    rounds = len(report["hello"]["runs"])
    table = Table(
        title=f"Throughput: medians of {rounds} round(s); share = the figure ÷ hello-world "
        "req/s of the same round (median of the rounds' shares)"
    )
    for name in ("store", "figure", "median", "runs", "share", "target", ""):
        table.add_column(name, justify="left" if name in ("store", "figure", "target") else "right")
    hello = report["hello"]
    table.add_row("—", "hello-world, req/s", f"{hello['median']:,.0f}", _runs(hello["runs"]), "1")
    for backend, figures in report["backends"].items():
        rows = [
            ("single put, req/s", figures["put"], f"share ≥ {PUT_SHARE:.0%}"),
            ("reserve+ack, pairs/s", figures["reserve_ack"], f"share ≥ {PAIR_SHARE:.0%}"),
            ("jobs:batch of 1,000, jobs/s", figures["put_batch"], f"≥ {BATCH_JOBS:,.0f}"),
        ]
        for label, figure, target in rows:
            share = f"{figure['share_median']:.2f}" if "share_median" in figure else ""
            table.add_row(
                LABELS[backend],
                label,
                f"{figure['median']:,.0f}",
                _runs(figure["runs"]),
                share,
                target,
                _status(figure.get("met")),
            )
    return table


def lag_table(report: dict[str, Any]) -> Table:
    table = Table(
        title="Hand-over lag, ms: client = time.time() at the answer - due_at; "
        "server = reserve time - due_at (whole ms)"
    )
    names = ["store", "due/s", "client p50", "p99", "max", "server p50", "p99 ", "max "]
    for name in [*names, "delivered", "early", "target", ""]:
        table.add_column(name, justify="left" if name in ("store", "target") else "right")
    for backend, figures in report["backends"].items():
        for lag in figures["lag"].values():
            c, s = lag["client_ms"], lag["server_ms"]
            limit = lag["target_p99_max_ms"]
            table.add_row(
                LABELS[backend],
                f"{lag['rate']:g}",
                *(f"{c[p]:.2f}" for p in ("p50", "p99", "max")),
                *(f"{s[p]:.0f}" for p in ("p50", "p99", "max")),
                f"{lag['delivered']}/{lag['expected']}",
                str(lag["early"]),
                ("" if limit is None else f"p99 ≤ {limit:g}, ") + "all in",
                _status(lag["met"]),
            )
    return table


def idle_table(report: dict[str, Any]) -> Table:
    polls = next(iter(report["backends"].values()))["idle_polls"]
    table = Table(
        title=f"{polls['polls']:,} idle long polls on one topic: CPU % of one core over "
        f"{polls['window_s']:g} s"
    )
    names = ["store", "server: no poll", "1 poll", f"{polls['polls']:,} polls"]
    names += ["redis-server, polls held"]
    names += ["blocked clients", "then 1 batch answers all", "target", ""]
    for name in names:
        table.add_column(name, justify="left" if name in ("store", "target") else "right")
    for backend, figures in report["backends"].items():
        idle = figures["idle_polls"]
        held, quiet = idle["cpu_percent"], idle["cpu_percent_no_polls"]
        one = idle["cpu_percent_one_poll"]
        clients = idle["redis_clients"]
        table.add_row(
            LABELS[backend],
            f"{quiet['server']:.2f}",
            f"{one['server']:.2f}",
            f"{held['server']:.2f}",
            f"{held['redis-server']:.2f}" if "redis-server" in held else "",
            "" if clients is None else str(clients["blocked_clients"]),
            f"{idle['answered']}/{idle['polls']} in {idle['all_answered_ms']:,.0f} ms",
            f"≤ {IDLE_CPU_PERCENT:g}%" + ("" if clients is None else ", 1 blocked"),
            _status(idle["met"]),
        )
    return table


def render(out: Console, report: dict[str, Any]) -> None:
    info = report["machine"]
    command_and_machine(out, report)
    versions = ", ".join(
        f"{name} {info[name]}"
        for name in ("uvicorn", "uvloop", "httptools", "msgspec", "wrk", "redis_server")
        if info.get(name)
    )
    out.print(
        f"[bold]versions[/]  Python {info['python']}, {versions}, chronoq at {info['source']}"
    )
    out.print(f"[bold]placement[/] {report['placement']}; took {report['seconds']:.0f} s")
    out.print(throughput_table(report))
    out.print(lag_table(report))
    out.print(idle_table(report))
