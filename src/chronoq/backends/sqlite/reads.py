"""Read-only queries of the SQLite store: one consistent read each."""

from __future__ import annotations

import sqlite3
from typing import Any

from chronoq.backends.sqlite.rows import (
    DEAD,
    DELAYED,
    EVENT_COLUMNS,
    INFO_COLUMNS,
    READY,
    RESERVED,
    event_from_row,
    info_from_row,
    now_ms,
)
from chronoq.errors import InvalidInput
from chronoq.job import EventPage, Forecast, JobInfo, forecast_steps

__all__ = ["dead_jobs", "due_forecast", "event_page", "job_info", "topic_stats"]


def job_info(db: sqlite3.Connection, topic: str, job_id: str) -> JobInfo | None:
    row = db.execute(
        f"SELECT {INFO_COLUMNS} FROM jobs WHERE topic = ? AND id = ?", (topic, job_id)
    ).fetchone()
    return None if row is None else info_from_row(row, now_ms())


def topic_stats(db: sqlite3.Connection, topic: str) -> dict[str, Any]:
    now = now_ms()
    counts = {
        state: db.execute(
            f"SELECT count(*) FROM jobs WHERE topic = ? AND state = {state}", (topic,)
        ).fetchone()[0]
        for state in (DELAYED, READY, RESERVED, DEAD)  # literals: partial indexes
    }
    # rows whose time has come (due, lease expired) count where they are going:
    # the reserve path moves them lazily
    due_now = db.execute(
        "SELECT count(*) FROM jobs WHERE topic = ? AND state = 0 AND at <= ?", (topic, now)
    ).fetchone()[0]
    expired, exhausted = db.execute(
        "SELECT count(*), coalesce(sum(attempts >= max_attempts), 0) FROM jobs "
        "WHERE topic = ? AND state = 2 AND at <= ?",
        (topic, now),
    ).fetchone()
    next_due = db.execute(
        "SELECT min(at) FROM jobs WHERE topic = ? AND state = 0", (topic,)
    ).fetchone()[0]
    paused = db.execute("SELECT paused FROM topics WHERE name = ?", (topic,)).fetchone()
    return {
        "delayed": counts[DELAYED] - due_now,
        "ready": counts[READY] + due_now + expired - exhausted,
        "reserved": counts[RESERVED] - expired,
        "dead": counts[DEAD] + exhausted,
        "total": sum(counts.values()),
        "paused": bool(paused and paused[0]),
        "next_due_at": next_due,
    }


# the delayed jobs' index on (topic, at) alone (a covering scan: no record is
# read), bucketed by step; the last bucket, ``steps``, is every job due later
_FORECAST_SQL = (
    "SELECT min((at - ?1) / ?2, ?3), count(*) FROM jobs "
    "WHERE topic = ?4 AND state = 0 AND at > ?1 GROUP BY 1"
)


def due_forecast(db: sqlite3.Connection, topic: str, until_ms: int, step_ms: int) -> Forecast:
    """The forecast of docs/contract.md §3, in the read snapshot of ``db``. A
    job due at ``now`` or before is ready (observed_state), so it is not counted."""
    start = now_ms()
    steps = forecast_steps(start, until_ms, step_ms)
    counts = [0] * (steps + 1)
    for bucket, n in db.execute(_FORECAST_SQL, (start, step_ms, steps, topic)):
        counts[bucket] = n
    return Forecast(topic, start, step_ms / 1000, tuple(counts[:steps]), counts[steps])


def dead_jobs(db: sqlite3.Connection, topic: str, limit: int) -> list[JobInfo]:
    rows = db.execute(
        f"SELECT {INFO_COLUMNS} FROM jobs WHERE topic = ? AND state = 3 ORDER BY at, rowid LIMIT ?",
        (topic, limit),
    ).fetchall()
    now = now_ms()
    return [info_from_row(row, now) for row in rows]


def event_page(
    db: sqlite3.Connection, topic: str | None, cursor: str | None, limit: int
) -> EventPage:
    after = _cursor_seq(cursor)
    sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ?"
    params: tuple[Any, ...] = (after,)
    if topic is not None:
        sql, params = sql + " AND topic = ?", (after, topic)
    rows = db.execute(sql + " ORDER BY seq LIMIT ?", (*params, limit)).fetchall()
    events = [event_from_row(row) for row in rows]
    return EventPage(events, str(events[-1].seq if events else after))


def _cursor_seq(cursor: object) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str) and cursor.isdigit() and len(cursor) <= 18:
        return int(cursor)
    raise InvalidInput(f"bad event cursor {cursor!r}: pass the cursor of a previous page, or None")
