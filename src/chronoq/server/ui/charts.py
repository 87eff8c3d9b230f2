"""The dashboard's two charts as inline SVG: a throughput sparkline and a
hand-over lag histogram. Inline SVG needs no script and no image route, and
is drawn with attributes only (no style attributes: the page's CSP allows
no inline style)."""

from __future__ import annotations

from collections.abc import Sequence

from chronoq.server.ui.markup import Html, join, render

__all__ = ["LAG_EDGES_MS", "lag_buckets", "lag_histogram", "percentile", "sparkline"]

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


def sparkline(puts: Sequence[int], acks: Sequence[int], bucket_s: float) -> Html:
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
    return render(
        '<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{title}"><title>{title}</title>'
        '<polyline class="spark-put" fill="none" stroke-width="3" points="{put}"/>'
        '<polyline class="spark-ack" fill="none" stroke-width="1.5" points="{ack}"/></svg>',
        w=_SPARK_W,
        h=_SPARK_H,
        title=title,
        put=_points(drawn_puts, top),
        ack=_points(drawn_acks, top),
    )


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


def lag_histogram(lags: Sequence[int]) -> Html:
    """A bar per lag bucket (ms), its count above it, its range below."""
    buckets = lag_buckets(lags)
    top = max([n for _, n in buckets] + [1])
    width = len(buckets) * (_BAR_W + _BAR_GAP)
    height = _PLOT_H + _LABEL_H
    bars = []
    for i, (label, n) in enumerate(buckets):
        x = i * (_BAR_W + _BAR_GAP)
        bar_h = round((_PLOT_H - 16) * n / top)
        bars.append(
            render(
                "<g><title>{label} ms: {n}</title>"
                '<rect class="bar" x="{x}" y="{y}" width="{bw}" height="{bh}"/>'
                '<text class="count" x="{cx}" y="{ty}" text-anchor="middle">{shown}</text>'
                '<text class="axis" x="{cx}" y="{ly}" text-anchor="middle">{label}</text></g>',
                label=label,
                unit="" if label.endswith("s") else " ms",
                n=n,
                x=x,
                y=_PLOT_H - bar_h,
                bw=_BAR_W,
                bh=bar_h,
                cx=x + _BAR_W // 2,
                ty=_PLOT_H - bar_h - 4,
                shown=n if n else "",
                ly=_PLOT_H + 16,
            )
        )
    return render(
        '<svg class="hist" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="hand-over lag histogram"><title>hand-over lag (ms) of {count} reserves'
        '</title>{bars}<text class="axis" x="{w}" y="{uy}" text-anchor="end">'
        "ms, or s where marked</text></svg>",
        w=width,
        h=height,
        count=len(lags),
        bars=join(bars),
        uy=height - 2,
    )
