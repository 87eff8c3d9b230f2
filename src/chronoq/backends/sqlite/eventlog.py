"""Appending to the event log (docs/contract.md §7) inside a transition's transaction,
and keeping the log and the remembered ids from growing without bound."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from chronoq.backends.sqlite.rows import now_ms

__all__ = ["EventLog", "EventRow"]

#: (ts_ms, topic, id, event, attempt, due_at, priority, lag_ms, error, job_group)
EventRow = tuple[int, str, str, str, int, int, int, int | None, str | None, str | None]

_INSERT = (
    "INSERT INTO events (ts_ms, topic, id, event, attempt, due_at, priority, lag_ms, error) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_GROUPED = _INSERT.replace("error)", "error, job_group)").replace("?)", "?, ?)")
_TRIM_EVERY = 10_000  # events written between two trims


class EventLog:
    """Writes events; every ``_TRIM_EVERY`` events it drops all but the newest
    ``keep`` and forgets remembered ids whose ``unique_for`` is over."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        # trim on the first write of each instance too, or short-lived
        # producers (a CLI put, a cron job) would never trim
        self._since_trim = _TRIM_EVERY

    def append(self, db: sqlite3.Connection, events: Iterable[EventRow]) -> None:
        rows = list(events)
        if not rows:
            return
        # a call without a grouped job leaves job_group out (NULL) rather than
        # binding None, which sqlite3 sends through its adapters (~3,000
        # instructions a row, docs/benchmarks.md "Tracing off: A/B")
        if any(row[9] is not None for row in rows):
            db.executemany(_INSERT_GROUPED, rows)
        else:
            db.executemany(_INSERT, [row[:9] for row in rows])
        self.count(db, len(rows))

    def count(self, db: sqlite3.Connection, written: int) -> None:
        """Account for ``written`` events added by a statement of the caller."""
        self._since_trim += written
        if self._since_trim < _TRIM_EVERY:
            return
        self._since_trim = 0
        db.execute(
            "DELETE FROM events WHERE seq <= (SELECT max(seq) FROM events) - ?", (self.keep,)
        )
        db.execute("DELETE FROM remembered WHERE until_ms <= ?", (now_ms(),))


def remember(
    db: sqlite3.Connection, topic: str, job_id: str, unique_for_ms: int, due_at: int, now: int
) -> None:
    """Keep the id of an acked or deleted job for ``unique_for_ms``."""
    if unique_for_ms > 0:
        db.execute(
            "INSERT OR REPLACE INTO remembered (topic, id, until_ms, due_at) VALUES (?, ?, ?, ?)",
            (topic, job_id, now + unique_for_ms, due_at),
        )
