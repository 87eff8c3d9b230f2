"""Reading the SQLite store in bulk: its event log as one numbered sequence
(for export and the Spark pipeline), and a topic's jobs page by page."""

from __future__ import annotations

from chronoq.backends.sqlite.rows import (
    EVENT_COLUMNS,
    INFO_COLUMNS,
    event_from_row,
    info_from_row,
    now_ms,
)
from chronoq.backends.sqlite.store import Store
from chronoq.errors import InvalidInput
from chronoq.job import JobPage, LogRead, LogShard

__all__ = ["SQLiteBulkReads"]

#: the one log shard of a SQLite store: every topic's events, numbered together
LOG_NAME = "events"


class SQLiteBulkReads:
    """The ``jobs`` and ``log_*`` methods of ``SQLiteBackend``."""

    _store: Store
    shards = 1

    def jobs(self, topic: str, shard: int, cursor: str | None, limit: int) -> JobPage:
        """Jobs of the topic by id, after the id ``cursor``."""
        if shard != 0:
            raise InvalidInput(f"a SQLite store has one shard (0), not shard {shard}")
        with self._store.read() as db:
            rows = db.execute(
                f"SELECT {INFO_COLUMNS} FROM jobs WHERE topic = ? AND id > ? ORDER BY id LIMIT ?",
                (topic, cursor or "", limit),
            ).fetchall()
            now = now_ms()
        jobs = [info_from_row(row, now) for row in rows]
        return JobPage(jobs, jobs[-1].id if len(jobs) == limit else None)

    def log_shards(self, topic: str | None) -> list[LogShard]:
        return [LogShard(LOG_NAME, topic, 0, shared=True)]

    def log_read(self, shard: LogShard, after: int, limit: int) -> LogRead:
        """Events after ``after`` in one read transaction. Without a topic, a
        hole in the numbering is a loss (trimming, or a DELETE by hand), and
        the read stops before one past its first event; with a topic, only
        what was trimmed from the start of the log is seen (events of every
        topic), and a read that finds fewer than ``limit`` events is complete
        up to the head."""
        _check(shard)
        sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ?"
        params: tuple[object, ...] = (after,)
        if shard.topic is not None:
            sql, params = sql + " AND topic = ?", (after, shard.topic)
        with self._store.read() as db:
            first, head = db.execute("SELECT min(seq), max(seq) FROM events").fetchone()
            rows = db.execute(sql + " ORDER BY seq LIMIT ?", (*params, limit)).fetchall()
        head = head or 0
        if head <= after:
            return LogRead([], 0, head, after)
        events = [event_from_row(row) for row in rows]
        if shard.topic is not None:
            upto = head if len(events) < limit else events[-1].seq
            return LogRead(events, max(first - after - 1, 0), head, upto)
        if not events:  # every event after ``after`` is gone
            return LogRead([], head - after, head, head)
        end = 1
        while end < len(events) and events[end].seq == events[end - 1].seq + 1:
            end += 1
        events = events[:end]
        return LogRead(events, events[0].seq - after - 1, head, events[-1].seq)

    def log_trim(self, shard: LogShard, upto: int) -> None:
        """Delete the events up to ``upto`` but the newest: SQLite numbers a
        new row after the largest one left, so the log keeps its numbering."""
        _check(shard)
        if shard.topic is not None:
            raise InvalidInput(
                "the SQLite event log is one sequence for every topic: trim it from an "
                "export of every topic (no --topic), or other readers would see holes"
            )
        with self._store.write() as db:
            db.execute(
                "DELETE FROM events WHERE seq <= ? AND seq < (SELECT max(seq) FROM events)",
                (upto,),
            )


def _check(shard: LogShard) -> None:
    if shard.name != LOG_NAME or shard.shard != 0:
        raise InvalidInput(f"a SQLite store has one event log, {LOG_NAME!r}, not {shard.name!r}")
