"""Rendering for the ``chronoq`` command: rich tables for people, one JSON
document for programs. Times are ISO 8601 UTC with ms in tables and raw ms
since the epoch in JSON; user data is always rendered as plain text, never as
rich markup."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from chronoq.job import Forecast, JobInfo, PutResult, Reservation
from chronoq.limits import GROUPS_SHOWN, Limits, Rule

__all__ = [
    "Output",
    "clock_ms",
    "dead_table",
    "forecast_doc",
    "forecast_view",
    "groups_table",
    "info_doc",
    "info_table",
    "iso_ms",
    "limits_view",
    "message",
    "now_ms",
    "payload_text",
    "put_doc",
    "relative",
    "reservation_doc",
    "reservations_table",
    "stats_table",
    "stats_view",
    "topics_table",
]

PIPE_WIDTH = 160  # tables piped to a file or a pager: wide rows beat wrapped cells
BAR_WIDTH = 40  # characters of the longest bar of a forecast


class Output:
    """Where a command's result goes: a JSON document or a rich renderable on
    stdout, and one-line errors on stderr."""

    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json
        self.stdout = Console(highlight=False)
        if not self.stdout.is_terminal and "COLUMNS" not in os.environ:
            self.stdout.width = PIPE_WIDTH
        self.stderr = Console(stderr=True, highlight=False, soft_wrap=True)

    def emit(self, doc: Any, human: Callable[[], RenderableType]) -> None:
        """Show ``doc`` as JSON under ``--json``, else the renderable ``human()``."""
        if self.as_json:
            self.stdout.out(json.dumps(doc, indent=2, ensure_ascii=False), highlight=False)
        else:
            self.stdout.print(human())

    def json_only(self, doc: Any) -> None:
        """Show ``doc`` under ``--json``; people get nothing on stdout."""
        if self.as_json:
            self.emit(doc, Text)

    def error(self, text: str) -> None:
        """One line on stderr, whatever the width of the terminal."""
        self.stderr.print(Text(text), soft_wrap=True)


def message(*parts: str | tuple[str, str]) -> Text:
    """A line of plain text; ``(text, style)`` pairs are styled."""
    return Text.assemble(*parts)


def now_ms() -> int:
    """The wall clock in ms since the epoch."""
    return time.time_ns() // 1_000_000


def _utc_ms(ms: int, fmt: str) -> str:
    return f"{datetime.fromtimestamp(ms // 1000, UTC):{fmt}}.{ms % 1000:03d}"


def iso_ms(ms: int | None) -> str:
    """Epoch ms as ``2030-01-01T12:00:00.123Z``; ``-`` for None."""
    return "-" if ms is None else _utc_ms(ms, "%Y-%m-%dT%H:%M:%S") + "Z"


def clock_ms(ms: int) -> str:
    """Epoch ms as the UTC time of day, ``12:00:00.123``."""
    return _utc_ms(ms, "%H:%M:%S")


def relative(ms: int | None, now: int | None = None) -> str:
    """``in 1.500 s`` or ``2.000 s ago``."""
    if ms is None:
        return ""
    if now is None:
        now = now_ms()
    delta = (ms - now) / 1000
    if delta == 0:
        return "now"
    return f"in {delta:.3f} s" if delta > 0 else f"{-delta:.3f} s ago"


def payload_text(payload: Any, limit: int | None = 60) -> str:
    """Compact JSON (or ``<N bytes>``), cut at ``limit`` characters."""
    if isinstance(payload, bytes):
        return f"<{len(payload)} bytes>"
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def _payload_doc(payload: Any) -> dict[str, Any]:
    if isinstance(payload, bytes):
        return {"payload_base64": base64.b64encode(payload).decode()}
    return {"payload": payload}


def put_doc(topic: str, result: PutResult) -> dict[str, Any]:
    return {"topic": topic, "id": result.id, "created": result.created, "due_at": result.due_at}


def reservation_doc(job: Reservation) -> dict[str, Any]:
    return {
        "topic": job.topic,
        "id": job.id,
        "lease": job.lease,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "due_at": job.due_at,
        "deadline": job.deadline,
        "ttr": job.ttr,
        "created_at": job.created_at,
        "group": job.group,
        **_payload_doc(job.payload),
    }


def info_doc(info: JobInfo) -> dict[str, Any]:
    return {
        "topic": info.topic,
        "id": info.id,
        "state": info.state.value,
        "priority": info.priority,
        "attempts": info.attempts,
        "max_attempts": info.max_attempts,
        "due_at": info.due_at,
        "deadline": info.deadline,
        "created_at": info.created_at,
        "ttr": info.ttr,
        "unique_for": info.unique_for,
        "last_error": info.last_error,
        "group": info.group,
        **_payload_doc(info.payload),
    }


def _table(*columns: str, caption: str | None = None) -> Table:
    table = Table(caption=caption, caption_justify="left", header_style="bold")
    for name in columns:
        numeric = name in {"priority", "attempts", "delayed", "ready", "reserved", "dead", "total"}
        table.add_column(name, justify="right" if numeric else "left", no_wrap=name != "payload")
    return table


def reservations_table(jobs: Iterable[Reservation]) -> Table:
    jobs = list(jobs)
    table = _table("id", "lease", "attempts", "priority", "due_at", "deadline", "payload")
    for job in jobs:
        table.add_row(
            Text(job.id),
            Text(job.lease, style="cyan"),
            f"{job.attempts}/{job.max_attempts}",
            str(job.priority),
            iso_ms(job.due_at),
            iso_ms(job.deadline),
            Text(payload_text(job.payload)),
        )
    if jobs:
        table.caption = (
            f"Finish each job before its deadline: chronoq ack {jobs[0].topic} ID LEASE "
            "(or nack, touch, bury)."
        )
    return table


def info_table(info: JobInfo) -> Table:
    now = now_ms()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    rows: list[tuple[str, str]] = [
        ("topic", info.topic),
        ("id", info.id),
        ("state", info.state.value),
        ("priority", str(info.priority)),
        ("attempts", f"{info.attempts} of {info.max_attempts}"),
        ("due_at", f"{iso_ms(info.due_at)}  ({relative(info.due_at, now)})"),
        ("created_at", iso_ms(info.created_at)),
        ("ttr", f"{info.ttr:g} s"),
        ("unique_for", f"{info.unique_for:g} s"),
    ]
    if info.deadline is not None:
        rows.append(("deadline", f"{iso_ms(info.deadline)}  ({relative(info.deadline, now)})"))
    if info.last_error is not None:
        rows.append(("last_error", info.last_error))
    if info.group is not None:
        rows.append(("group", info.group))
    rows.append(("payload", payload_text(info.payload, limit=None)))
    for name, value in rows:
        table.add_row(name, Text(value))
    return table


def dead_table(jobs: Iterable[JobInfo]) -> Table:
    table = _table("id", "priority", "attempts", "due_at", "created_at", "last_error", "payload")
    for info in jobs:
        table.add_row(
            Text(info.id),
            str(info.priority),
            f"{info.attempts}/{info.max_attempts}",
            iso_ms(info.due_at),
            iso_ms(info.created_at),
            Text(info.last_error or "-", style="red"),
            Text(payload_text(info.payload)),
        )
    return table


def _stats_cells(stats: dict[str, Any]) -> list[str]:
    cells = [str(stats[name]) for name in ("delayed", "ready", "reserved", "dead", "total")]
    return [*cells, "yes" if stats["paused"] else "no", iso_ms(stats.get("next_due_at"))]


def topics_table(rows: Iterable[tuple[str, dict[str, Any]]]) -> Table:
    table = _table(
        "topic", "delayed", "ready", "reserved", "dead", "total", "paused", "next_due_at"
    )
    for topic, stats in rows:
        table.add_row(Text(topic), *_stats_cells(stats))
    return table


def stats_table(topic: str, stats: dict[str, Any]) -> Table:
    table = Table(title=Text(f"topic {topic}"), show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for name, value in stats.items():
        if name == "next_due_at":
            text = f"{iso_ms(value)}  ({relative(value)})" if value is not None else "-"
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = str(value)
        table.add_row(name, Text(text))
    return table


def stats_view(topic: str, stats: dict[str, Any]) -> RenderableType:
    """``stats_table``, then ``groups_table`` when the stats count by group."""
    if "groups" not in stats:
        return stats_table(topic, stats)
    counts = {name: value for name, value in stats.items() if name != "groups"}
    return Group(stats_table(topic, counts), groups_table(stats["groups"]))


def _span(seconds: float) -> str:
    """``1h``, ``30m``, ``2d``: in the largest unit that divides it, else seconds."""
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:g}{unit}"
    return f"{seconds:g}s"


def forecast_doc(forecast: Forecast) -> dict[str, Any]:
    return {
        "topic": forecast.topic,
        "start": forecast.start,
        "step": forecast.step,
        "counts": list(forecast.counts),
        "later": forecast.later,
    }


def forecast_view(forecast: Forecast) -> RenderableType:
    """A row per step (its start, its count, a bar scaled to the busiest
    step), then the jobs due later."""
    title = f"delayed jobs of {forecast.topic} due per {_span(forecast.step)} (the store's clock)"
    table = Table(title=Text(title), title_justify="left", header_style="bold")
    table.add_column("step start")
    table.add_column("count", justify="right")
    table.add_column("", no_wrap=True)
    step_ms = round(forecast.step * 1000)
    top = max(forecast.counts, default=0)
    for i, count in enumerate(forecast.counts):
        bar = "█" * -(-BAR_WIDTH * count // top) if top else ""
        table.add_row(iso_ms(forecast.start + i * step_ms), str(count), Text(bar, style="cyan"))
    end = forecast.start + len(forecast.counts) * step_ms
    return Group(table, message(f"later: {forecast.later} due from {iso_ms(end)} on"))


def groups_table(groups: list[dict[str, Any]]) -> Table:
    """``stats --groups``: a row per group, largest backlog first."""
    table = _table("group", "ready", "reserved", "paused")
    table.title, table.title_justify = "by group", "left"
    for row in groups:
        name = Text(row["group"]) if row["group"] is not None else Text("(default)", style="dim")
        counts = [str(row[state]) for state in ("ready", "reserved")]
        table.add_row(name, *counts, "yes" if row["paused"] else "no")
    if not groups:
        table.caption = "no group has due jobs or is paused"
    elif len(groups) >= GROUPS_SHOWN:
        table.caption = f"only the {GROUPS_SHOWN} largest backlogs are shown"
    return table


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.15g}"


def _rule_cells(rule: Rule, own: Rule) -> list[Text]:
    """``rule``'s rate, per, burst (the bucket) and concurrency; a value that
    ``own`` does not set (a group default's, or the bucket or period it
    implies) in parentheses, since a pipe loses the dim style."""
    cells = []
    for value, set_here in rule.shown(own):
        text = _number(value)
        if value is not None and not set_here:
            cells.append(Text(f"({text})", style="dim"))
        else:
            cells.append(Text(text))
    return cells


def limits_view(limits: Limits) -> RenderableType:
    """A row for the topic, the group defaults and each group (the limits it
    is held to), then what the marks mean."""
    table = Table(
        title=Text(f"limits of {limits.topic}"), title_justify="left", header_style="bold"
    )
    table.add_column("for")
    for name in ("rate", "per (s)", "burst", "concurrency"):
        table.add_column(name, justify="right")
    table.add_row("topic", *_rule_cells(limits.topic_rule, limits.topic_rule))
    table.add_row("group default", *_rule_cells(limits.default, limits.default))
    for name in sorted(limits.groups):
        held_to = limits.of_group(name)
        table.add_row(Text(f"group {name}"), *_rule_cells(held_to, limits.groups[name]))
    note = (
        "-: no limit; (n): not set on the row: the group default's, or implied "
        "(per 1 s; burst a per's worth of the rate)"
    )
    return Group(table, Text(note, style="dim"))
