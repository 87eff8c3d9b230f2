"""Small SVG line charts for the report of ``chronoq analyze``, drawn as strings.

The report is one HTML file that has to open offline, on a machine without
chronoq, long after the run: so no JavaScript and no plotting library, only
inline ``<svg>``. What is here is just what the report draws: named series over
a shared time axis (lag percentiles, counts per bucket), with gaps where a value
is missing. Every text that comes from data is XML-escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

__all__ = ["PALETTE", "Series", "line_chart", "nice_ticks", "time_ticks"]

#: Okabe & Ito's colour-blind-safe colours, without their yellow (too pale on white)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
# once the palette runs out, the colours come back dashed
_DASHES = ("", "7 3", "2 3")
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 48, 30
_CHAR = 6.4  # rough width of a character at 11-12 px: labels are placed by estimate
_MARKERS_UP_TO = 48  # beyond that many times, dots would hide the line
# time-axis steps, in seconds: round ones, so tick labels are too
_DAY = 86400
_TIME_STEPS: tuple[int, ...] = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)
_TIME_STEPS += (3 * 3600, 6 * 3600, 12 * 3600, _DAY, 2 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY)
_TIME_STEPS += (91 * _DAY, 182 * _DAY, 365 * _DAY)


@dataclass(frozen=True)
class Series:
    """One line: ``values`` has one entry per time of the chart, None for a gap."""

    name: str
    values: Sequence[float | None]


def nice_ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """About ``count`` evenly spaced round values (steps of 1, 2, 2.5 or 5 times
    a power of ten) from at most ``lo`` to at least ``hi``; with ``integer``, no
    step under 1 (counts have no halves)."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("ticks need finite bounds")
    if hi == lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    multiples = (1.0, 2.0, 5.0, 10.0) if integer and magnitude <= 1 else (1.0, 2.0, 2.5, 5.0, 10.0)
    step = next(m * magnitude for m in multiples if m * magnitude >= raw * (1 - 1e-9))
    if integer:
        step = max(step, 1.0)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    # multiply, not accumulate: 0.1 + 0.2 would print as 0.30000000000000004
    return [round(i * step, 12) for i in range(first, last + 1)]


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _seconds(moment: datetime) -> float:
    # a naive time is taken as UTC, as Spark's session time zone is for the report
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def time_ticks(lo: float, hi: float, most: int = 6) -> tuple[list[tuple[float, str]], str]:
    """Ticks for a UTC time axis from ``lo`` to ``hi`` (epoch seconds): at most
    ``most`` (position, label) pairs on round times, and a caption for the axis
    (the day, when every tick is on the same one)."""
    span = hi - lo
    longest = _TIME_STEPS[-1]
    step = next((s for s in _TIME_STEPS if span / s <= most - 1), None)
    step = step or longest * math.ceil(span / (most - 1) / longest)
    first = math.ceil(lo / step) * step
    at = [float(first + i * step) for i in range(int((hi - first) // step) + 1)] or [lo]
    days = {_utc(t).date() for t in (lo, hi)}
    clock = "%H:%M:%S" if any(t % 60 for t in at) else "%H:%M"
    if step >= _DAY:
        pattern, caption = "%Y-%m-%d", "UTC"
    elif len(days) == 1:
        pattern, caption = clock, f"{_utc(lo):%Y-%m-%d}, UTC"
    else:
        pattern, caption = f"%m-%d {clock}", "UTC"
    return [(t, _utc(t).strftime(pattern)) for t in at], caption


def _number(value: float) -> str:
    """A y-axis label: short, as a tick is a round number."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:,.6g}" if value != int(value) else f"{int(value):,}"


def _text(x: float, y: float, text: str, *, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _header(title: str, series: Sequence[Series], caption: str, width: int) -> list[str]:
    """The title, the legend below it and the time axis' caption on the right."""
    parts = [_text(8, 18, title, extra=' font-size="14" font-weight="600"')]
    x = float(_LEFT)
    for index, line in enumerate(series):
        parts.append(
            f'<line x1="{x:.1f}" y1="33" x2="{x + 18:.1f}" y2="33"{_stroke(index)}'
            ' stroke-width="2.5"/>'
        )
        parts.append(_text(x + 23, 37, line.name))
        x += 23 + _CHAR * len(line.name) + 16
    if caption:
        parts.append(_text(width - _RIGHT, 37, caption, anchor="end", extra=' fill="#555"'))
    return parts


def _stroke(index: int) -> str:
    colour = PALETTE[index % len(PALETTE)]
    dash = _DASHES[(index // len(PALETTE)) % len(_DASHES)]
    return f' stroke="{colour}"' + (f' stroke-dasharray="{dash}"' if dash else "")


def _segments(points: Sequence[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """Runs of points without a gap."""
    runs: list[list[tuple[float, float]]] = [[]]
    for point in points:
        if point is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(point)
    return [run for run in runs if run]


class Scale:
    """A linear map from data values to pixels."""

    def __init__(self, lo: float, hi: float, start: float, end: float) -> None:
        self.lo, self.span, self.start, self.end = lo, (hi - lo) or 1.0, start, end

    def __call__(self, value: float) -> float:
        return self.start + (value - self.lo) / self.span * (self.end - self.start)


def _lines(series: Sequence[Series], xs: Sequence[float], scale_y: Scale) -> list[str]:
    parts: list[str] = []
    markers = len(xs) <= _MARKERS_UP_TO
    for index, line in enumerate(series):
        # the first drawn widest: where lines coincide, each still shows
        stroke = _stroke(index) + f' stroke-width="{1.5 + 0.8 * (len(series) - 1 - index):.1f}"'
        colour = PALETTE[index % len(PALETTE)]
        points = [
            (x, scale_y(v)) if v is not None and math.isfinite(v) else None
            for x, v in zip(xs, line.values, strict=True)
        ]
        for run in _segments(points):
            if len(run) > 1:
                coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
                parts.append(
                    f'<polyline points="{coords}" fill="none"{stroke} stroke-linejoin="round"/>'
                )
            # a point alone would be invisible as a line
            if markers or len(run) == 1:
                parts.extend(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>' for x, y in run
                )
    return parts


def line_chart(
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    *,
    counts: bool = False,
    empty: str = "no data",
    width: int = 720,
    height: int = 260,
) -> str:
    """An ``<svg>`` of ``series`` over ``times`` (UTC), the y axis from 0 (or
    below, for negative values) to a round number above the largest value;
    with ``counts``, integer ticks only. Without any value to draw, the frame
    says ``empty`` instead."""
    if any(len(line.values) != len(times) for line in series):
        raise ValueError("every series needs one value per time")
    left, right, top, bottom = _LEFT, width - _RIGHT, _TOP, height - _BOTTOM
    stamps = [_seconds(t) for t in times]
    values = [v for line in series for v in line.values if v is not None and math.isfinite(v)]
    ticks, caption = time_ticks(min(stamps), max(stamps)) if stamps else ([], "")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}"'
        ' font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
        *_header(title, series if values else [], caption if values else "", width),
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}"'
        ' fill="none" stroke="#ccc"/>',
    ]
    if not values:
        mid_x, mid_y = (left + right) / 2, (top + bottom) / 2 + 4
        parts.append(_text(mid_x, mid_y, empty, anchor="middle", extra=' fill="#666"'))
        return "".join(parts) + "</svg>"
    y_ticks = nice_ticks(min(0.0, *values), max(0.0, *values), integer=counts)
    scale_y = Scale(y_ticks[0], y_ticks[-1], bottom, top)
    if len(set(stamps)) == 1:
        # one time: in the middle, rather than on the frame
        scale_x = Scale(stamps[0] - 1, stamps[0] + 1, left, right)
    else:
        scale_x = Scale(min(stamps), max(stamps), left + 6, right - 6)
    for value in y_ticks:
        y = scale_y(value)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(_text(left - 6, y + 4, _number(value), anchor="end"))
    for stamp, label in ticks:
        x = scale_x(stamp)
        half = _CHAR * len(label) / 2
        anchor = "end" if x + half > width - 2 else "start" if x - half < 2 else "middle"
        parts.append(
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#999"/>'
        )
        parts.append(_text(x, bottom + 17, label, anchor=anchor))
    parts.extend(_lines(series, [scale_x(s) for s in stamps], scale_y))
    return "".join(parts) + "</svg>"
