"""The figures of bench/http/versus.py: medians over rounds, ratios taken in
each round then their median, the targets judged, and the tables printed.

A round's figures are ``{row: {column: jobs/s}}``: a row is ``server:kind``
(``ouqiang:push``, ``redis:native``, ``hello:hello``...), a column ``c1``
(one connection), ``c16`` (16 connections) or ``wrk``."""

from __future__ import annotations

import math
import statistics
from typing import Any

from rich.table import Table

Rounds = list[dict[str, dict[str, float]]]

COLUMNS = ("c1", "c16", "wrk")
OUQIANG = "ouqiang:push"
HELLO = "hello:hello"
STORES = ("redis", "sqlite")
KIND_LABELS = {
    "push": "/push (ouqiang protocol)",
    "native": "native put /v1/topics/{t}/jobs",
    "youzan": "Youzan /v1/command add",
    "hello": "GET /hello",
}
SERVER_LABELS = {
    "ouqiang": "ouqiang v0.4 (Go) + Redis",
    "redis": "chronoq serve, Redis",
    "sqlite": "chronoq serve, SQLite",
    "hello": "bare ASGI hello-world",
}
PUSH_VS_OUQIANG = 1.5
NATIVE_VS_OUQIANG = 2.0
YOUZAN_VS_NATIVE = 0.9  # "within 10%": at least 0.9 of the native put
NATIVE_VS_HELLO = 0.5
CLIENT_BOUND_CPU = 85.0  # server CPU % of its core under which the client set the pace


def rows(stores: tuple[str, ...]) -> list[str]:
    """The table's rows, in order (ouqiang's too: "skipped" when it was)."""
    chronoq = [f"{store}:{kind}" for store in stores for kind in ("push", "native", "youzan")]
    return [OUQIANG, *chronoq, HELLO]


def medians(rounds: Rounds) -> dict[str, dict[str, float]]:
    """The median of each figure over the rounds that have it."""
    out: dict[str, dict[str, float]] = {}
    for row in rounds[0]:
        for column in rounds[0][row]:
            runs = [r[row][column] for r in rounds if column in r.get(row, {})]
            out.setdefault(row, {})[column] = statistics.median(runs)
    return out


def ratios(rounds: Rounds, base: str, only: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Each row ÷ the ``base`` row of the same round and column, the median
    over rounds; empty where the base was not measured."""
    if not rounds or base not in rounds[0]:
        return {}
    out: dict[str, dict[str, float]] = {}
    for row in only if only is not None else list(rounds[0]):
        for column in rounds[0][row]:
            runs = [r[row][column] / r[base][column] for r in rounds if r[base][column] > 0]
            if runs:
                out.setdefault(row, {})[column] = statistics.median(runs)
    return out


def _target(
    name: str, store: str, got: dict[str, float], limit: float, judged: tuple[str, ...]
) -> dict[str, Any]:
    """A target's ratio in every column; ``met`` in the ``judged`` ones (None elsewhere)."""
    cells = {
        c: {"ratio": got[c], "met": got[c] >= limit if c in judged else None}
        for c in COLUMNS
        if c in got
    }
    verdicts = [cell["met"] for cell in cells.values() if cell["met"] is not None]
    return {
        "target": name,
        "store": store,
        "limit": limit,
        "judged": list(judged),
        "columns": cells,
        "met": all(verdicts) if verdicts else None,
    }


def judge(rounds: Rounds, stores: tuple[str, ...]) -> list[dict[str, Any]]:
    """The targets, per store: ``met`` is None where a row was not measured
    (ouqiang skipped). ouqiang's targets hold for both connection counts (the
    wrk column is shown, not judged); the others for every column."""
    vs_ouqiang = ratios(rounds, OUQIANG)
    vs_hello = ratios(rounds, HELLO)
    out = []
    both = ("c1", "c16")
    for store in stores:
        native = ratios(rounds, f"{store}:native", [f"{store}:youzan"])
        out += [
            _target(
                f"/push ≥ {PUSH_VS_OUQIANG:g}× ouqiang",
                store,
                vs_ouqiang.get(f"{store}:push", {}),
                PUSH_VS_OUQIANG,
                both,
            ),
            _target(
                f"native put ≥ {NATIVE_VS_OUQIANG:g}× ouqiang",
                store,
                vs_ouqiang.get(f"{store}:native", {}),
                NATIVE_VS_OUQIANG,
                both,
            ),
            _target(
                "Youzan add within 10% of native put (≥ 0.9×)",
                store,
                native.get(f"{store}:youzan", {}),
                YOUZAN_VS_NATIVE,
                COLUMNS,
            ),
            _target(
                f"native put ≥ {NATIVE_VS_HELLO:g} of hello-world",
                store,
                vs_hello.get(f"{store}:native", {}),
                NATIVE_VS_HELLO,
                COLUMNS,
            ),
        ]
    return out


def summarize(report: dict[str, Any], raw: list[dict[str, dict[str, dict[str, Any]]]]) -> None:
    """The medians, ratios and targets of the raw rounds (``{row: {column:
    {"rate", "server_cpu_percent", ...}}}`` each) into ``report``."""

    def figure(name: str) -> Rounds:
        return [{row: {c: got[c][name] for c in COLUMNS} for row, got in r.items()} for r in raw]

    rates = figure("rate")
    stores = tuple(report["settings"]["stores"])
    report["rows"] = rows(stores)
    report["rates"] = rates
    report["median"] = medians(rates)
    report["vs_ouqiang"] = ratios(rates, OUQIANG)
    report["server_cpu_percent"] = medians(figure("server_cpu_percent"))
    report["client_cpu_percent"] = medians(figure("client_cpu_percent"))
    report["targets"] = judge(rates, stores)


def _status(ok: bool | None) -> str:
    return "n/a" if ok is None else ("[green]met[/]" if ok else "[red]MISSED[/]")


def _label(row: str) -> tuple[str, str]:
    server, _, kind = row.partition(":")
    return SERVER_LABELS[server], KIND_LABELS[kind]


COLUMN_TITLES = {"c1": "1 conn", "c16": "16 conns", "wrk": "wrk"}


def rate_table(report: dict[str, Any]) -> Table:
    settings = report["settings"]
    table = Table(
        title=f"Pushes, jobs/s: medians of {settings['rounds']} round(s); × ouqiang = the "
        "rate ÷ ouqiang's in the same round and column (median of the rounds' ratios)",
        caption=f"1 conn: {settings['count']:,} pushes on one http.client keep-alive "
        f"connection; 16 conns: {settings['count']:,} pushes over {settings['connections']} "
        f"such connections from {settings['processes']} processes; wrk: -t1 "
        f"-c{settings['wrk_connections']} for {settings['seconds']} s (Lua, a new id each)",
    )
    table.add_column("server")
    table.add_column("route")
    for column in COLUMNS:
        table.add_column(COLUMN_TITLES[column], justify="right")
        table.add_column("× ouqiang", justify="right")
    median, vs = report["median"], report["vs_ouqiang"]
    for row in report["rows"]:
        if row == OUQIANG and row not in median:
            cells = ["skipped", "—"] * len(COLUMNS)  # OUQIANG_BIN is not set
            table.add_row(*_label(row), *cells)
            continue
        cells = []
        for column in COLUMNS:
            rate = median.get(row, {}).get(column)
            ratio = vs.get(row, {}).get(column)
            cells += [
                "" if rate is None else f"{rate:,.0f}",
                "—" if ratio is None else f"{ratio:.2f}",
            ]
        table.add_row(*_label(row), *cells)
    return table


def target_table(report: dict[str, Any]) -> Table:
    table = Table(
        title="Targets: the ratio (median of the rounds' ratios) and whether it is met; "
        "(in brackets): shown, not judged"
    )
    table.add_column("target")
    table.add_column("store")
    for column in COLUMNS:
        table.add_column(COLUMN_TITLES[column], justify="right")
    table.add_column("")
    for target in report["targets"]:
        cells = []
        for column in COLUMNS:
            cell = target["columns"].get(column)
            if cell is None:
                cells.append("")
            elif cell["met"] is None:
                cells.append(f"({cell['ratio']:.2f})")  # shown, not judged
            else:
                cells.append(f"{cell['ratio']:.2f} {_status(cell['met'])}")
        table.add_row(target["target"], target["store"], *cells, _status(target["met"]))
    return table


def cpu_table(report: dict[str, Any]) -> Table:
    table = Table(
        title="CPU while measured, % of one core (medians): the server (alone on its core) "
        "/ the clients (http.client processes, or wrk), which share the other core with "
        f"the redis-servers; * the server under {CLIENT_BOUND_CPU:g}% with many "
        "connections: it waited more than it worked"
    )
    table.add_column("server")
    table.add_column("route")
    for column in COLUMNS:
        table.add_column(COLUMN_TITLES[column], justify="right")
    for row in report["rows"]:
        server = report["server_cpu_percent"].get(row)
        if server is None:
            continue
        client = report["client_cpu_percent"].get(row, {})
        cells = []
        for column in COLUMNS:
            value = server[column]
            mark = " *" if column != "c1" and value < CLIENT_BOUND_CPU else ""
            cells.append(f"{value:.0f} / {client.get(column, math.nan):.0f}{mark}")
        table.add_row(*_label(row), *cells)
    return table
