"""The peers run as people read it: one table (rich on the terminal, Markdown
for docs/benchmarks.md) with the ratio chronoq on Redis / best peer per
column, and a chart of the lag distributions per rate (PNG)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

LAG_KEYS = ("p50", "p95", "p99", "max")
CHRONOQ = "chronoq-redis"

Result = dict[str, Any]


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _ms(value: float) -> str:
    return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def _ratio(ours: float | None, best: float | None) -> str:
    if ours is None or not best:
        return "—"
    return f"{ours / best:.2f}" if ours / best < 10 else f"{ours / best:.0f}"


def _counts(r: Result) -> str:
    return f"{r['early']} / {r['lost']} / {r['duplicates']}"


def lag_phases(results: list[Result]) -> list[str]:
    for result in results:
        if "phases" in result:
            return [name for name in result["phases"] if name.startswith("lag")]
    return []


class Columns:
    """Each column: a title, how to show one system's value, and how to pick the
    best peer (max or min) for the ratio row."""

    def __init__(self, results: list[Result]) -> None:
        self.results = results
        self.ok = [r for r in results if "error" not in r]
        self.peers = [r for r in self.ok if not r["name"].startswith("chronoq")]
        self.ours = next((r for r in self.ok if r["name"] == CHRONOQ), None)

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

    def ratio_row(self) -> list[str]:
        ours = self.ours
        if ours is None or not self.peers:
            return []
        high = self._best(max)
        low = self._best(min)
        cells = [
            "**chronoq (Redis) ÷ best peer**",
            _ratio(ours["enqueue_single"], high(lambda r: r["enqueue_single"])),
            _ratio(ours["enqueue_bulk"], high(lambda r: r["enqueue_bulk"] or r["enqueue_single"])),
            _ratio(ours["drain_per_s"], high(lambda r: r["drain_per_s"])),
        ]
        for name in lag_phases(self.results):
            parts = []
            for key in LAG_KEYS:
                mine = ours["phases"].get(name, {}).get(key)
                best = low(lambda r, k=key, n=name: r["phases"].get(n, {}).get(k))
                parts.append(_ratio(mine, best))
            cells.append(" / ".join(parts))
        best_counts = min(self.peers, key=lambda r: r["early"] + r["lost"] + r["duplicates"])
        cells.append(f"{_counts(ours)} (best peer: {_counts(best_counts)})")
        cells.append(_ratio(ours["bytes_per_job"], low(lambda r: r["bytes_per_job"])))
        return cells

    def _best(self, pick: Callable[..., Any]) -> Callable[[Callable[[Result], Any]], float | None]:
        def best(value: Callable[[Result], Any]) -> float | None:
            values = [v for v in (value(r) for r in self.peers) if v is not None]
            return pick(values) if values else None

        return best


def markdown_table(results: list[Result]) -> str:
    columns = Columns(results)
    lines = ["| " + " | ".join(columns.titles()) + " |"]
    lines.append("|" + "|".join([" --- "] + [" ---: "] * (len(columns.titles()) - 1)) + "|")
    lines += ["| " + " | ".join(columns.row(r)) + " |" for r in results]
    ratio = columns.ratio_row()
    if ratio:
        lines.append("| " + " | ".join(ratio) + " |")
    return "\n".join(lines) + "\n"


def console_table(results: list[Result]) -> Table:
    columns = Columns(results)
    table = Table(title="chronoq and its peers: one run, one redis-server, concurrency 4")
    for k, title in enumerate(columns.titles()):
        table.add_column(title, justify="left" if k == 0 else "right")
    for r in results:
        table.add_row(*columns.row(r))
    ratio = columns.ratio_row()
    if ratio:
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
