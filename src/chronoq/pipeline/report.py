"""The HTML report of ``chronoq analyze``: one self-contained file of tables
and inline SVG charts, from the rows that Spark aggregated.

It has to open offline, anywhere, long after the run, and be safe to mail: so
inline CSS only, no script, no external reference, and every text from the data
(topic names above all) is escaped. Spark did the counting; this runs on the
driver over a few thousand collected rows, so it needs neither PySpark nor
pyarrow."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from chronoq.pipeline.cells import (
    as_int,
    kv,
    metrics_table,
    missing,
    name,
    utc,
)
from chronoq.pipeline.charts import Series, line_chart

__all__ = ["BUCKET_ROWS_SHOWN", "CHARTED_TOPICS", "ReportData", "render_report"]

#: the busiest topics (by reserves + puts) that get charts; the tables keep every topic
CHARTED_TOPICS = 8
#: the per-bucket table shows the most recent rows only: a browser chokes on more
BUCKET_ROWS_SHOWN = 2000
_AXIS_POINTS = 2000  # empty buckets are filled in on a time axis up to this long

_CSS = """
:root{color-scheme:light}
body{margin:0;background:#fff;color:#1b1b1b;
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:1.6em;margin:0 0 2px}
h2{font-size:1.25em;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:22px 0 6px}
.meta,.note{color:#555}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:6px 0 14px;font-variant-numeric:tabular-nums}
th,td{padding:3px 8px;border-bottom:1px solid #e6e6e6;text-align:left;vertical-align:top}
thead th{background:#f5f5f5;font-weight:600;white-space:nowrap}
th.n,td.n{text-align:right;white-space:nowrap}
th.g{text-align:center;border-left:1px solid #ddd}
tfoot td{font-weight:600}
.kv{display:flex;flex-wrap:wrap;gap:8px 40px}
.kv tbody th{font-weight:600;white-space:nowrap;padding-right:16px}
.kv td{overflow-wrap:anywhere}
.charts svg{display:block;max-width:100%;height:auto;margin:6px 0 10px}
"""


@dataclass(frozen=True)
class ReportData:
    """What ``render_report`` draws, rows in any order. A bucket row: topic,
    bucket (its start), the counts of each kind of event (puts ... touches),
    lag_p50/p95/p99/max_ms and run_p50/p99_ms (None without a reserve, or an
    ack), retry_rate and dead_rate in 0..1 (None when nothing to divide by)."""

    generated_at: datetime  # UTC, timezone-aware
    parameters: dict[str, str]
    input: dict[str, str]
    buckets: list[dict[str, Any]]  # one per (topic, bucket start)
    topics: list[dict[str, Any]]  # one per topic: the keys of buckets but "bucket"
    attempts: list[dict[str, Any]]  # topic, outcome ("acked"/"dead"), attempts, jobs
    # the groups with the most jobs (analyze.TOP_GROUPS), of group_count: a row of
    # topics with group (None: the default group), jobs and acks_per_s
    groups: list[dict[str, Any]] = field(default_factory=list)
    group_buckets: list[dict[str, Any]] = field(default_factory=list)  # theirs by bucket
    group_count: int = 0


def _busyness(data: ReportData) -> dict[str, int]:
    """reserves + puts per topic, from its ``topics`` row or else from its
    buckets; every topic named anywhere in the data is in it."""
    summary = {str(row["topic"]): row for row in data.topics}
    busy = dict.fromkeys((str(row["topic"]) for row in (*data.attempts, *data.buckets)), 0)
    for row in (*summary.values(), *data.buckets):
        topic = str(row["topic"])
        if "bucket" not in row or topic not in summary:
            busy[topic] = busy.get(topic, 0) + sum(as_int(row.get(k)) for k in ("reserves", "puts"))
    return busy


def _axis(buckets: Sequence[Mapping[str, Any]]) -> list[datetime]:
    """Every bucket start of the run, the buckets without events included: their
    width is the smallest gap between two starts (rows exist only where events were)."""
    starts = sorted({utc(row["bucket"]) for row in buckets})
    gaps = [b - a for a, b in pairwise(starts)]
    step = min(gaps, default=timedelta(0))
    if not step or (starts[-1] - starts[0]) / step >= _AXIS_POINTS:
        return starts
    filled = (starts[0] + i * step for i in range(int((starts[-1] - starts[0]) / step) + 1))
    # the starts too, should a bucket not be on the grid of the first one
    return sorted({*filled, *starts})


def _series_of(
    rows: Sequence[Mapping[str, Any]], axis: Sequence[datetime]
) -> Callable[..., list[float | None]]:
    """``values(*keys, gap=)``: the sum of ``keys`` of the row of each time of
    ``axis``; no row is a bucket without events, so zero events but no lag (a
    gap, with ``gap``)."""
    at = {utc(row["bucket"]): row for row in rows}

    def values(*keys: str, gap: bool) -> list[float | None]:
        out: list[float | None] = []
        for moment in axis:
            row = at.get(moment)
            parts = [None if row is None or missing(row.get(k)) else row[k] for k in keys]
            known = [float(p) for p in parts if p is not None]
            out.append(None if gap and not known else sum(known))
        return out

    return values


def _topic_charts(topic: str, rows: Sequence[Mapping[str, Any]], axis: Sequence[datetime]) -> str:
    if not rows:
        return '<p class="note">no events in any bucket</p>'
    values = _series_of(rows, axis)

    lag = [Series(p, values(f"lag_{p}_ms", gap=True)) for p in ("p50", "p95", "p99")]
    flow = [Series(k, values(k, gap=False)) for k in ("puts", "reserves", "acks")]
    trouble = [
        Series("retries (nacks + expires)", values("nacks", "expires", gap=False)),
        Series("dead letters (deads + buries)", values("deads", "buries", gap=False)),
    ]
    return "".join(
        (
            line_chart(f"{topic}: hand-over lag, ms", axis, lag, empty="no reserves, so no lag"),
            line_chart(f"{topic}: events per bucket", axis, flow, counts=True, empty="no events"),
            line_chart(f"{topic}: retries and dead letters per bucket", axis, trouble, counts=True),
        )
    )


def _charts(data: ReportData, busy: Mapping[str, int]) -> str:
    if not busy:
        return "<p>no events</p>"
    chosen = sorted(busy, key=lambda t: (-busy[t], t))[:CHARTED_TOPICS]
    left_out = len(busy) - len(chosen)
    parts = []
    if left_out:
        parts.append(
            f'<p class="note">The {len(chosen)} busiest topics (by reserves + puts) are charted;'
            f" {left_out:,} more {'is' if left_out == 1 else 'are'} left out of the charts"
            " but kept in the tables.</p>"
        )
    by_topic: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in data.buckets:
        by_topic[str(row["topic"])].append(row)
    axis = _axis(data.buckets) if data.buckets else []
    for topic in chosen:
        parts.append(f"<h3>{name(topic)}</h3>")
        parts.append(f'<div class="charts">{_topic_charts(topic, by_topic[topic], axis)}</div>')
    return "".join(parts)


def _attempts(data: ReportData, topics: Iterable[str]) -> str:
    jobs: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for row in data.attempts:
        cell = jobs[str(row["topic"])][int(row["attempts"])]
        cell[str(row["outcome"])] = cell.get(str(row["outcome"]), 0) + int(row["jobs"])
    parts = []
    for topic in sorted(topics):
        parts.append(f"<h3>{name(topic)}</h3>")
        if not jobs.get(topic):
            parts.append('<p class="note">no job was acked or dead-lettered</p>')
            continue
        body = "".join(
            f'<tr><td class="n">{n:,}</td><td class="n">{c.get("acked", 0):,}</td>'
            f'<td class="n">{c.get("dead", 0):,}</td></tr>'
            for n, c in sorted(jobs[topic].items())
        )
        acked = sum(c.get("acked", 0) for c in jobs[topic].values())
        dead = sum(c.get("dead", 0) for c in jobs[topic].values())
        parts.append(
            '<table><thead><tr><th class="n">attempts</th><th class="n">acked jobs</th>'
            f'<th class="n">dead jobs</th></tr></thead><tbody>{body}</tbody>'
            f'<tfoot><tr><td>all</td><td class="n">{acked:,}</td><td class="n">{dead:,}</td>'
            "</tr></tfoot></table>"
        )
    return "".join(parts) or "<p>no events</p>"


def _bucket_table(buckets: Sequence[Mapping[str, Any]]) -> str:
    if not buckets:
        return "<p>no events</p>"
    rows = list(buckets)
    note = ""
    if len(rows) > BUCKET_ROWS_SHOWN:
        # the most recent buckets, whatever their topic
        rows = sorted(rows, key=lambda r: (utc(r["bucket"]), str(r["topic"])))
        rows = rows[-BUCKET_ROWS_SHOWN:]
        note = (
            f'<p class="note">{len(buckets):,} rows: only the last {BUCKET_ROWS_SHOWN:,}'
            " (the most recent buckets) are shown.</p>"
        )
    rows.sort(key=lambda r: (str(r["topic"]), utc(r["bucket"])))
    return note + metrics_table(rows, with_bucket=True)


def _groups(data: ReportData) -> str:
    """The groups with the most jobs: their measures, their lag and throughput over time."""
    if not data.groups:
        return "<p>no events</p>"
    rows = sorted(data.groups, key=lambda r: (-as_int(r.get("jobs")), str(r["topic"])))
    left_out = max(data.group_count - len(rows), 0)
    parts = []
    if left_out:
        parts.append(
            f'<p class="note">The {len(rows)} groups with the most jobs; {left_out:,} more'
            f" {'is' if left_out == 1 else 'are'} in the groups table.</p>"
        )
    parts.append(metrics_table(rows, with_bucket=False, with_group=True))
    mine: dict[tuple[str, str | None], list[Mapping[str, Any]]] = defaultdict(list)
    for row in data.group_buckets:
        mine[str(row["topic"]), row.get("group")].append(row)
    axis = _axis(data.group_buckets) if data.group_buckets else []
    lag, acks = [], []
    for row in rows:
        key = (str(row["topic"]), row.get("group"))
        label = f"{key[0]} / {'(no group)' if key[1] is None else key[1]}"
        values = _series_of(mine[key], axis)
        lag.append(Series(label, values("lag_p99_ms", gap=True)))
        acks.append(Series(label, values("acks", gap=False)))
    charts = (
        line_chart("hand-over lag p99 by group, ms", axis, lag, empty="no reserves, so no lag"),
        line_chart("acks per bucket by group", axis, acks, counts=True, empty="no acks"),
    )
    return "".join(parts) + f'<div class="charts">{"".join(charts)}</div>'


def render_report(data: ReportData) -> str:
    """The report as one HTML5 document."""
    busy = _busyness(data)
    summary = sorted(data.topics, key=lambda r: str(r["topic"]))
    generated = utc(data.generated_at)
    return "".join(
        (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>chronoq delivery report</title><style>{_CSS}</style></head><body><main>",
            "<h1>chronoq delivery report</h1>",
            f'<p class="meta">Generated {generated:%Y-%m-%d %H:%M:%S} UTC</p>',
            '<section><h2>Run</h2><div class="kv">',
            kv("parameters", data.parameters),
            kv("input", data.input),
            "</div></section><section><h2>Topics</h2>",
            metrics_table(summary, with_bucket=False) if summary else "<p>no events</p>",
            "</section><section><h2>Groups</h2>",
            _groups(data),
            "</section><section><h2>Over time</h2>",
            _charts(data, busy),
            "</section><section><h2>Attempts per finished job</h2>",
            _attempts(data, busy),
            "</section><section><h2>Per bucket</h2>",
            _bucket_table(data.buckets),
            "</section></main></body></html>\n",
        )
    )
