"""Recurring schedules in the SQLite store: the ``schedules`` table, one
transaction per call. Schedules are not jobs: no events, no wake-ups."""

from __future__ import annotations

from chronoq.backends.base import StoredSchedule
from chronoq.backends.sqlite.rows import now_ms
from chronoq.backends.sqlite.store import Store

__all__ = ["SQLiteSchedules"]


class SQLiteSchedules:
    """The ``schedules_*`` methods of ``SQLiteBackend``."""

    _store: Store

    def schedules_put(self, topic: str, name: str, spec: bytes) -> bool:
        with self._store.write() as db:
            updated = db.execute(
                "UPDATE schedules SET spec = ? WHERE topic = ? AND name = ?", (spec, topic, name)
            ).rowcount
            if not updated:
                db.execute(
                    "INSERT INTO schedules (topic, name, spec, created_at) VALUES (?, ?, ?, ?)",
                    (topic, name, spec, now_ms()),
                )
        return not updated

    def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]:
        with self._store.read() as db:
            rows = db.execute(
                "SELECT name, spec, last_at, created_at FROM schedules WHERE topic = ? "
                "ORDER BY name",
                (topic,),
            ).fetchall()
            now = now_ms()
        return now, [
            StoredSchedule(name, bytes(spec), last, created) for name, spec, last, created in rows
        ]

    def schedules_remove(self, topic: str, name: str) -> bool:
        with self._store.write() as db:
            return bool(
                db.execute(
                    "DELETE FROM schedules WHERE topic = ? AND name = ?", (topic, name)
                ).rowcount
            )

    def schedules_mark(self, topic: str, name: str, at_ms: int) -> None:
        with self._store.write() as db:
            db.execute(
                "UPDATE schedules SET last_at = ? WHERE topic = ? AND name = ? "
                "AND (last_at IS NULL OR last_at < ?)",
                (at_ms, topic, name, at_ms),
            )
