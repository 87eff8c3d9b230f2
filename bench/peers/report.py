"""The peers run as people read it: one table (rich on the terminal, Markdown
for docs/benchmarks.md) with, per column, the best peer of the run and the
ratio chronoq / that peer (on Redis, and on SQLite), and a chart of the lag
distributions per rate (PNG)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

LAG_KEYS = ("p50", "p95", "p99", "max")
CHRONOQ = ("chronoq-redis", "chronoq-sqlite")  # the rows that get a ratio row, in this order

Result = dict[str, Any]
Pick = tuple[float, Result, int]  # the best peer's figure, its result, how many peers tie with it


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _ms(value: float) -> str:
    return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def _ratio(ours: float | None, best: Pick | None) -> str:
    if ours is None or best is None or not best[0]:
        return "—"
    return f"{ours / best[0]:.2f}" if ours / best[0] < 10 else f"{ours / best[0]:.0f}"


def _counts(r: Result) -> str:
    return f"{r['early']} / {r['lost']} / {r['duplicates']}"


def _off(lag_ms: float | None) -> float | None:
    """How far from its due time a lag figure is: a start 60 ms early is as far
    off as one 60 ms late (early starts are counted in their own column too)."""
    return None if lag_ms is None else abs(lag_ms)


def _redis_bytes(r: Result) -> float | None:
    # chronoq on SQLite counts bytes on disk, which no peer's Redis memory compares with
    return r["bytes_per_job"] if r["bytes_kind"] == "redis" else None


def _peer(pick: Pick | None) -> str:
    if pick is None:
        return "—"
    return pick[1]["label"] + (f" (+{pick[2]} tied)" if pick[2] else "")


def lag_phases(results: list[Result]) -> list[str]:
    for result in results:
        if "phases" in result:
            return [name for name in result["phases"] if name.startswith("lag")]
    return []


class Columns:
    """Each column: a title, how to show one system's value, and how to pick the
    best peer (highest rate; lowest lag, count and size) for the ratio rows."""

    def __init__(self, results: list[Result]) -> None:
        self.results = results
        self.ok = [r for r in results if "error" not in r]
        self.peers = [r for r in self.ok if not r["name"].startswith("chronoq")]
        by_name = {r["name"]: r for r in self.ok}
        self.ours = [by_name[name] for name in CHRONOQ if name in by_name]

    def titles(self) -> list[str]:
        lags = [
            f"lag at {name[3:]}/s, ms (p50 / p95 / p99 / max)" for name in lag_phases(self.results)
        ]
        return [
            "system",
            "enqueue/s, one call per job",
            "enqueue/s, bulk",
            "drain jobs/s (5,000 due at once)",
            *lags,
            "early / lost / duplicates",
            "Redis bytes per delayed job",
        ]

    def row(self, r: Result) -> list[str]:
        if "error" in r:
            return [r["label"], f"failed: {r['error']}"] + [""] * (len(self.titles()) - 2)
        lags = []
        for name in lag_phases(self.results):
            phase = r["phases"].get(name, {})
            lags.append(" / ".join(_ms(phase[k]) for k in LAG_KEYS) if "p50" in phase else "—")
        size = f"{r['bytes_per_job']:,.0f}" + (" (disk)" if r["bytes_kind"] == "disk" else "")
        return [
            f"{r['label']} {r['version'].split()[-1]}",
            _rate(r["enqueue_single"]),
            _rate(r["enqueue_bulk"]),
            _rate(r["drain_per_s"]),
            *lags,
            _counts(r),
            size,
        ]

    def figures(self) -> list[list[tuple[Callable[[Result], float | None], bool]]]:
        """Per column after the system's name, the figures its cell shows: how
        to read each from a result, and whether lower is better."""
        columns: list[list[tuple[Callable[[Result], float | None], bool]]] = [
            [(lambda r: r["enqueue_single"], False)],
            # a system without a bulk API is compared with its one-call figure
            [(lambda r: r["enqueue_bulk"] or r["enqueue_single"], False)],
            [(lambda r: r["drain_per_s"], False)],
        ]
        for name in lag_phases(self.results):
            columns.append(
                [
                    (lambda r, n=name, k=key: _off(r["phases"].get(n, {}).get(k)), True)
                    for key in LAG_KEYS
                ]
            )
        columns.append([(lambda r: r["early"] + r["lost"] + r["duplicates"], True)])
        columns.append([(_redis_bytes, True)])
        return columns

    def best(self, value: Callable[[Result], float | None], lower: bool) -> Pick | None:
        """The peer with the best figure (the first of the run's order on a tie)."""
        found = [(v, r) for r in self.peers if (v := value(r)) is not None]
        if not found:
            return None
        pick = min if lower else max
        figure, result = pick(found, key=lambda f: f[0])
        return figure, result, sum(1 for v, _ in found if v == figure) - 1

    def picks(self) -> list[list[Pick | None]]:
        return [[self.best(value, lower) for value, lower in col] for col in self.figures()]

    def best_row(self) -> list[str]:
        """Which peer each ratio below divides by: the best of this run, per column."""
        if not self.ours or not self.peers:
            return []
        cells = ["best peer of this run"]
        for picks in self.picks():
            names = [_peer(pick) for pick in picks]
            cells.append(names[0] if len(set(names)) == 1 else " / ".join(names))
        return cells

    def ratio_rows(self) -> list[list[str]]:
        """chronoq ÷ the best peer, per column and figure: over 1 is better for
        rates, under 1 for lags (the distance from the due time) and sizes."""
        if not self.peers:
            return []
        picks = self.picks()
        rows = []
        for ours in self.ours:
            cells = [f"**{ours['label']} ÷ best peer**"]
            for col, col_picks in zip(self.figures(), picks, strict=True):
                cells.append(
                    " / ".join(
                        _ratio(value(ours), pick)
                        for (value, _), pick in zip(col, col_picks, strict=True)
                    )
                )
            # early / lost / duplicates: the counts side by side rather than a ratio
            counts = picks[-2][0]
            cells[-2] = f"{_counts(ours)} (best peer: {_counts(counts[1]) if counts else '—'})"
            rows.append(cells)
        return rows


def markdown_table(results: list[Result]) -> str:
    columns = Columns(results)
    lines = ["| " + " | ".join(columns.titles()) + " |"]
    lines.append("|" + "|".join([" --- "] + [" ---: "] * (len(columns.titles()) - 1)) + "|")
    lines += ["| " + " | ".join(columns.row(r)) + " |" for r in results]
    for extra in (columns.best_row(), *columns.ratio_rows()):
        if extra:
            lines.append("| " + " | ".join(extra) + " |")
    return "\n".join(lines) + "\n"


def console_table(results: list[Result]) -> Table:
    columns = Columns(results)
    table = Table(title="chronoq and its peers: one run, one redis-server, concurrency 4")
    for k, title in enumerate(columns.titles()):
        table.add_column(title, justify="left" if k == 0 else "right")
    for r in results:
        table.add_row(*columns.row(r))
    best = columns.best_row()
    if best:
        table.add_section()
        table.add_row(*best, style="italic")
    for ratio in columns.ratio_rows():
        table.add_row(*(cell.replace("**", "") for cell in ratio), style="bold")
    return table


def charts(results: list[Result], out: Path) -> list[Path]:
    """One PNG per lag phase: the share of jobs started within x ms of due."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for name in lag_phases(results):
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
        for r in results:
            lags = sorted(r.get("phases", {}).get(name, {}).get("lags_ms", []))
            if not lags:
                continue
            shown = [
                max(lag, 0.05) for lag in lags
            ]  # a log axis: at most 0.05 ms early shown as 0.05
            share = [(k + 1) / r["phases"][name]["n"] for k in range(len(lags))]
            style = "-" if r["name"].startswith("chronoq") else "--"
            ax.step(shown, share, style, where="post", label=r["label"], linewidth=1.6)
        ax.set_xscale("log")
        ax.set_xlabel("hand-over lag: start − due time (ms, log scale)")
        ax.set_ylabel("share of jobs started")
        ax.set_ylim(0, 1.01)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"Due times at {name[3:]} jobs/s, concurrency 4 (one run)")
        ax.legend(loc="lower right", fontsize=8)
        path = out / f"peers-{name}.png"
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
