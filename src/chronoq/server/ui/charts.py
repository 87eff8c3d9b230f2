"""The geometry of the dashboard's charts: a throughput sparkline, a
hand-over lag histogram and a topic's forecast of due jobs.
templates/charts.svg draws them as inline SVG,
which needs no script and no image route, with attributes only (no style
attributes: the page's CSP allows no inline style)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
    "LAG_EDGES_MS",
    "Bar",
    "DueBar",
    "DueChart",
    "Histogram",
    "Spark",
    "due_chart",
    "lag_buckets",
    "lag_histogram",
    "percentile",
    "sparkline",
]

#: upper bounds (ms, exclusive) of the lag histogram's buckets; the last is open
LAG_EDGES_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 30_000)

_SPARK_W, _SPARK_H = 150, 28


def _points(counts: Sequence[int], top: int) -> str:
    if not counts:
        return ""
    step = _SPARK_W / max(len(counts) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{_SPARK_H - 2 - (_SPARK_H - 4) * c / top:.1f}"
        for i, c in enumerate(counts)
    )


@dataclass(frozen=True)
class Spark:
    """A sparkline: two polylines' points in a ``width`` × ``height`` box."""

    width: int
    height: int
    title: str
    puts: str
    acks: str


def sparkline(puts: Sequence[int], acks: Sequence[int], bucket_s: float) -> Spark:
    """Jobs put and acked per bucket of ``bucket_s`` seconds, oldest first.
    The last bucket, still filling, is counted in the totals but not drawn:
    drawn, it would show every rate falling at the right edge."""
    drawn_puts, drawn_acks = puts[:-1], acks[:-1]
    busiest = max([*drawn_puts, *drawn_acks], default=0)
    top = max(busiest, 1)
    window = len(drawn_puts) * bucket_s
    title = (
        f"last {window:.0f}s in {bucket_s:.0f}s steps: {sum(puts)} put, {sum(acks)} acked; "
        f"busiest step {busiest}"
    )
    return Spark(_SPARK_W, _SPARK_H, title, _points(drawn_puts, top), _points(drawn_acks, top))


def _label(low: int, high: int | None) -> str:
    """Milliseconds below a second, seconds (marked s) from there on."""
    if high is None:
        return f"≥{low // 1000}s"
    if high >= 1000:
        return f"{low / 1000:g}–{high // 1000}s"
    return f"<{high}" if low == 0 else f"{low}–{high}"


def lag_buckets(lags: Sequence[int]) -> list[tuple[str, int]]:
    """``lags`` (ms) counted per bucket of ``LAG_EDGES_MS``, labelled."""
    counts = [0] * (len(LAG_EDGES_MS) + 1)
    for lag in lags:
        index = 0
        while index < len(LAG_EDGES_MS) and lag >= LAG_EDGES_MS[index]:
            index += 1
        counts[index] += 1
    lows = (0, *LAG_EDGES_MS)
    highs: tuple[int | None, ...] = (*LAG_EDGES_MS, None)
    return [(_label(low, high), n) for low, high, n in zip(lows, highs, counts, strict=True)]


def percentile(ordered: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted values (0 when there are none)."""
    if not ordered:
        return 0
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil without float error on 1.0
    return ordered[min(int(rank), len(ordered)) - 1]


_BAR_W, _BAR_GAP, _PLOT_H, _LABEL_H = 40, 6, 110, 34


@dataclass(frozen=True)
class Bar:
    """One bucket's bar: its range, its count, and where they are drawn."""

    label: str
    count: int
    x: int
    y: int
    height: int
    middle: int  # of the bar, where its count and its label are centred
    count_y: int


@dataclass(frozen=True)
class Histogram:
    width: int
    height: int
    count: int  # lags counted
    bars: list[Bar]
    bar_width: int = _BAR_W
    label_y: int = _PLOT_H + 16


def lag_histogram(lags: Sequence[int]) -> Histogram:
    """A bar per lag bucket (ms), its count above it, its range below."""
    buckets = lag_buckets(lags)
    top = max([n for _, n in buckets] + [1])
    bars = []
    for i, (label, n) in enumerate(buckets):
        x = i * (_BAR_W + _BAR_GAP)
        bar_h = round((_PLOT_H - 16) * n / top)
        y = _PLOT_H - bar_h
        bars.append(Bar(label, n, x, y, bar_h, x + _BAR_W // 2, y - 4))
    width = len(buckets) * (_BAR_W + _BAR_GAP)
    return Histogram(width, _PLOT_H + _LABEL_H, len(lags), bars)


_DUE_W, _DUE_GAP, _DUE_LABEL_EVERY = 22, 4, 3


@dataclass(frozen=True)
class DueBar:
    """One step of a forecast: ``title`` says its time span and count (the
    bar's accessible name); ``label`` is its start on the axis, or ""."""

    title: str
    label: str
    count: int
    x: int
    y: int
    height: int
    middle: int
    count_y: int


@dataclass(frozen=True)
class DueChart:
    width: int
    height: int
    title: str
    bars: list[DueBar]
    bar_width: int = _DUE_W
    label_y: int = _PLOT_H + 16


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M")


def due_chart(start_ms: int, step_ms: int, counts: Sequence[int], what: str) -> DueChart:
    """A bar per step of a forecast from ``start_ms``, its count above it and,
    every few bars, its start time (UTC) below; ``what`` names the chart."""
    top = max([*counts, 1])
    bars = []
    for i, n in enumerate(counts):
        low = start_ms + i * step_ms
        day = datetime.fromtimestamp(low / 1000, UTC).strftime("%Y-%m-%d")
        jobs = "1 job" if n == 1 else f"{n} jobs"
        title = f"{day} {_clock(low)}–{_clock(low + step_ms)} UTC: {jobs} due"
        x = i * (_DUE_W + _DUE_GAP)
        bar_h = round((_PLOT_H - 16) * n / top)
        y = _PLOT_H - bar_h
        label = _clock(low) if i % _DUE_LABEL_EVERY == 0 else ""
        bars.append(DueBar(title, label, n, x, y, bar_h, x + _DUE_W // 2, y - 4))
    width = max(len(counts) * (_DUE_W + _DUE_GAP), 1)
    title = f"{what} from {_clock(start_ms)} UTC: {sum(counts)} in all"
    return DueChart(width, _PLOT_H + _LABEL_H, title, bars)
