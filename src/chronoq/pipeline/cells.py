"""The cells and tables of the report of ``chronoq analyze`` (report.py): its
numbers as text (a dash for a missing value), names escaped, and the table
of measures that topics, groups and buckets share."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from typing import Any

__all__ = [
    "COUNTS",
    "LAGS",
    "NONE",
    "RATES",
    "RUNS",
    "as_int",
    "count",
    "group_name",
    "kv",
    "metrics_table",
    "missing",
    "ms",
    "name",
    "per_s",
    "rate",
    "utc",
    "when",
]

COUNTS: tuple[str, ...] = (
    "puts",
    "reserves",
    "acks",
    "nacks",
    "expires",
    "deads",
    "buries",
    "deletes",
)
COUNTS += ("reschedules", "requeues", "touches")
LAGS = ("lag_p50_ms", "lag_p95_ms", "lag_p99_ms", "lag_max_ms")
RUNS = ("run_p50_ms", "run_p99_ms")
RATES = ("retry_rate", "dead_rate")
NONE = "—"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def as_int(value: Any) -> int:
    return 0 if missing(value) else round(value)


def count(value: Any) -> str:
    return NONE if missing(value) else f"{round(value):,}"


def ms(value: Any) -> str:
    if missing(value):
        return NONE
    tenths = round(float(value), 1)
    return f"{tenths:,.0f}" if tenths == int(tenths) else f"{tenths:,.1f}"


def rate(value: Any) -> str:
    if missing(value):
        return NONE
    percent = float(value) * 100
    # one dead letter in a million is not "0.00 %"
    return "< 0.01 %" if 0 < percent < 0.005 else f"{percent:.2f} %"


def utc(moment: datetime) -> datetime:
    # a naive time is taken as UTC: Spark's session time zone is for analyze
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def when(moment: datetime) -> str:
    moment = utc(moment)
    return f"{moment:%Y-%m-%d %H:%M}" + (f":{moment:%S}" if moment.second else "")


def name(topic: str) -> str:
    return escape(topic) if topic else "<em>(no name)</em>"


def kv(caption: str, pairs: Mapping[str, str]) -> str:
    body = "".join(
        f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in pairs.items()
    )
    return f"<table><caption>{escape(caption)}</caption><tbody>{body}</tbody></table>"


def group_name(group: str | None) -> str:
    """A group's name; None is a topic's default group (jobs put without one)."""
    return "<em>(no group)</em>" if group is None else escape(group)


def per_s(value: Any) -> str:
    if missing(value):
        return NONE
    return f"{float(value):,.2f}" if value < 100 else f"{round(value):,}"


def metrics_head(with_bucket: bool, with_group: bool = False) -> str:
    first = '<th rowspan="2">topic</th>' + ('<th rowspan="2">group</th>' * with_group)
    first += '<th rowspan="2">bucket (UTC)</th>' * with_bucket
    groups = (
        *((("jobs and throughput", 2),) * with_group),
        ("events", len(COUNTS)),
        ("hand-over lag, ms", len(LAGS)),
        ("reserve to ack, ms", len(RUNS)),
        ("rates", len(RATES)),
    )
    first += "".join(f'<th class="g" colspan="{n}">{label}</th>' for label, n in groups)
    names = ("jobs", "acks/s") * with_group + COUNTS
    names += ("p50", "p95", "p99", "max", "p50", "p99", "retry", "dead letter")
    second = "".join(f'<th class="n">{label}</th>' for label in names)
    return f"<thead><tr>{first}</tr><tr>{second}</tr></thead>"


def metrics_row(row: Mapping[str, Any], with_bucket: bool, with_group: bool = False) -> str:
    cells = [f"<td>{name(str(row.get('topic', '')))}</td>"]
    if with_group:
        cells.append(f"<td>{group_name(row.get('group'))}</td>")
    if with_bucket:
        cells.append(f'<td class="n">{when(row["bucket"])}</td>')
    if with_group:
        cells.append(f'<td class="n">{count(row.get("jobs"))}</td>')
        cells.append(f'<td class="n">{per_s(row.get("acks_per_s"))}</td>')
    cells += [f'<td class="n">{count(row.get(k))}</td>' for k in COUNTS]
    cells += [f'<td class="n">{ms(row.get(k))}</td>' for k in (*LAGS, *RUNS)]
    cells += [f'<td class="n">{rate(row.get(k))}</td>' for k in RATES]
    return f"<tr>{''.join(cells)}</tr>"


def metrics_table(
    rows: Iterable[Mapping[str, Any]], with_bucket: bool, with_group: bool = False
) -> str:
    """Measures by topic (and group, with its jobs and acks per second; and bucket)."""
    body = "".join(metrics_row(row, with_bucket, with_group) for row in rows)
    head = metrics_head(with_bucket, with_group)
    return f'<div class="scroll"><table>{head}<tbody>{body}</tbody></table></div>'
