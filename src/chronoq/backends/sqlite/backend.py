"""The SQLite backend: each transition is one ``BEGIN IMMEDIATE`` transaction
that also appends its events."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from chronoq.backends.base import AsyncBackend, Backend, ReserveResult, Watcher
from chronoq.backends.sqlite.aio_watcher import AsyncSQLiteBackend
from chronoq.backends.sqlite.eventlog import EventLog, remember
from chronoq.backends.sqlite.flow import SQLiteFlow, enable, group_counts, reserve_in_turns
from chronoq.backends.sqlite.leases import SQLiteLeases
from chronoq.backends.sqlite.logs import SQLiteBulkReads
from chronoq.backends.sqlite.reads import (
    dead_jobs,
    due_forecast,
    event_page,
    job_info,
    topic_stats,
)
from chronoq.backends.sqlite.reserving import expire_leases, lease_ready, next_change_in
from chronoq.backends.sqlite.rows import DELAYED, IN_CHUNK, READY, RESERVED, now_ms
from chronoq.backends.sqlite.schedules import SQLiteSchedules
from chronoq.backends.sqlite.signals import SQLiteWatcher, signals_for
from chronoq.backends.sqlite.store import Store
from chronoq.backends.url import StoreURL
from chronoq.errors import InvalidInput
from chronoq.job import EventPage, Forecast, JobInfo, NewJob, PutResult

__all__ = ["SQLiteBackend"]

_JOB_SQL = (
    "INSERT INTO jobs (topic, id, state, at, due_at, priority, payload, ttr_ms, max_attempts, "
    "attempts, created_at, unique_for_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)"
)
# Jobs with a trace context or a group: a put leaves out (NULL) the columns
# none of its jobs has, rather than binding None, which sqlite3 sends through
# its adapters (~3,000 instructions a job, docs/benchmarks.md "Tracing off: A/B")
_EXTRA_JOB_SQL = {
    (traced, grouped): _JOB_SQL.replace(
        "unique_for_ms)",
        "unique_for_ms" + ", traceparent" * traced + ", job_group" * grouped + ")",
    ).replace("?)", "?" + ", ?" * (traced + grouped) + ")")
    for traced in (False, True)
    for grouped in (False, True)
}
_NO_EXTRAS = (None, None)
_PUT_EVENTS_SQL = (
    "INSERT INTO events (ts_ms, topic, id, event, attempt, due_at, priority, job_group) "
    "SELECT ?, topic, id, 'put', 0, due_at, priority, job_group FROM jobs WHERE rowid > ? "
    "ORDER BY rowid"
)
# is the topic paused, is it under flow control (sqlite/flow.py)
_TOPIC_SQL = (
    "SELECT coalesce((SELECT paused FROM topics WHERE name = ?1), 0), "
    "EXISTS (SELECT 1 FROM flow_topics WHERE topic = ?1)"
)


def _insert(
    db: sqlite3.Connection,
    rows: dict[str, tuple[Any, ...]],
    extras: dict[str, tuple[str | None, str | None]] | None,
) -> None:
    """Write the jobs' rows, with their trace contexts and groups (``extras``)."""
    if extras is None:
        db.executemany(_JOB_SQL, rows.values())
        return
    # one statement for all, in put order (the rowids are that order)
    traced = any(trace is not None for trace, _ in extras.values())
    grouped = any(group is not None for _, group in extras.values())
    full = []
    for job_id, row in rows.items():
        trace, group = extras.get(job_id, _NO_EXTRAS)
        full.append(row + (trace,) * traced + (group,) * grouped)
    db.executemany(_EXTRA_JOB_SQL[traced, grouped], full)


class SQLiteBackend(SQLiteLeases, SQLiteFlow, SQLiteSchedules, SQLiteBulkReads, Backend):
    """Jobs in one SQLite file (WAL), safe for many threads and processes."""

    def __init__(
        self,
        path: str,
        *,
        url: str | None = None,
        synchronous: str = "normal",
        busy_timeout_ms: int = 10_000,
        events_keep: int = 1_000_000,
    ) -> None:
        self.url = url or f"sqlite:///{path}"
        self._store = Store(path, self.url, synchronous, busy_timeout_ms)
        key = f":memory:{id(self)}" if path == ":memory:" else os.path.realpath(path)
        # what another process's commit changes (asyncio waiters look at them)
        self._files = [] if path == ":memory:" else [key, key + "-wal"]
        self._signals = signals_for(key)
        self._log = EventLog(events_keep)
        self._known_topics: set[str] = set()

    @classmethod
    def from_url(cls, url: StoreURL) -> SQLiteBackend:
        """``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``sqlite://:memory:``."""
        parts = urlsplit(url.raw)
        if parts.netloc == ":memory:" or parts.path == "/:memory:":
            path = ":memory:"
        elif parts.netloc or len(parts.path) < 2:
            raise InvalidInput(
                f"bad SQLite URL {url.raw!r}: use sqlite:///relative/path.db, "
                "sqlite:////absolute/path.db or sqlite://:memory:"
            )
        else:
            path = parts.path[1:]
        options = StoreURL(url.scheme, url.raw, dict(url.options))
        synchronous = options.options.pop("synchronous", "normal").lower()
        busy_timeout_ms = options.pop_int("busy_timeout_ms", 10_000)
        events_keep = options.pop_int("events_keep", 1_000_000, minimum=1)
        options.reject_unknown()
        return cls(
            path,
            url=url.raw.split("?", 1)[0],
            synchronous=synchronous,
            busy_timeout_ms=busy_timeout_ms,
            events_keep=events_keep,
        )

    # -- producing -----------------------------------------------------------

    def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> list[PutResult]:
        with self._store.write() as db:
            now = now_ms()
            expire_leases(db, self._log, topic, now)  # see an expired lease as ready/dead
            if topic not in self._known_topics:  # topics rows are never deleted
                db.execute("INSERT OR IGNORE INTO topics (name) VALUES (?)", (topic,))
            grouped = self._grouped(db, topic, jobs)
            known = self._known(db, topic, [job.id for job in jobs if not job.generated], now)
            results: list[PutResult] = []
            rows: dict[str, tuple[Any, ...]] = {}
            # id -> (trace context, group), when any job has either
            extras: dict[str, tuple[str | None, str | None]] | None = None
            replaced: list[tuple[str, str]] = []
            for job in jobs:
                due = now + job.delay_ms if job.run_at_ms is None else max(job.run_at_ms, now)
                prior = known.get(job.id)
                if prior is not None and (not replace or prior[0] == RESERVED):
                    results.append(PutResult(job.id, False, prior[1]))
                    continue
                if prior is not None and job.id not in rows:
                    replaced.append((topic, job.id))
                state = READY if due <= now else DELAYED
                known[job.id] = (state, due)
                rows[job.id] = (
                    topic,
                    job.id,
                    state,
                    due,
                    due,
                    job.priority,
                    job.payload,
                    job.ttr_ms,
                    job.max_attempts,
                    now,
                    job.unique_for_ms,
                )
                if job.traceparent is not None or job.group is not None:
                    extras = extras or {}
                    extras[job.id] = (job.traceparent, job.group)
                elif extras:  # an id twice, replaced by a job without either
                    extras.pop(job.id, None)
                results.append(PutResult(job.id, True, due))
            if replaced:
                db.executemany("DELETE FROM jobs WHERE topic = ? AND id = ?", replaced)
                db.executemany("DELETE FROM remembered WHERE topic = ? AND id = ?", replaced)
            last = db.execute("SELECT coalesce(max(rowid), 0) FROM jobs").fetchone()[0]
            _insert(db, rows, extras)
            if rows:  # one statement in C rather than a row of parameters per event
                logged = db.execute(_PUT_EVENTS_SQL, (now, last)).rowcount
                self._log.count(db, logged)
        self._known_topics.add(topic)  # committed
        if grouped:
            self._signals.flow_topics.add(topic)
        if rows:
            self._signals.notify(topic)
        return results

    def _grouped(self, db: sqlite3.Connection, topic: str, jobs: Sequence[NewJob]) -> bool:
        """Whether a job has a group; the topic is then under flow control
        from before the jobs are written (the triggers count them)."""
        if not any(job.group for job in jobs):
            return False
        enable(db, topic)  # looks in the store: another process may have made it anew
        return True

    def _known(
        self, db: sqlite3.Connection, topic: str, ids: list[str], now: int
    ) -> dict[str, tuple[int, int]]:
        """id -> (state, due_at) of live jobs and remembered ids (state -1)."""
        known: dict[str, tuple[int, int]] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), IN_CHUNK):
            chunk = unique[start : start + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for job_id, until, due in db.execute(
                f"SELECT id, until_ms, due_at FROM remembered WHERE topic = ? AND id IN ({marks})",
                (topic, *chunk),
            ):
                if until > now:
                    known[job_id] = (-1, due)
            for job_id, state, due in db.execute(
                f"SELECT id, state, due_at FROM jobs WHERE topic = ? AND id IN ({marks})",
                (topic, *chunk),
            ):
                known[job_id] = (state, due)
        return known

    # -- consuming -------------------------------------------------------------

    def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: Watcher | None = None
    ) -> ReserveResult:
        with self._store.write() as db:
            now = now_ms()
            expire_leases(db, self._log, topic, now)
            db.execute(
                "UPDATE jobs SET state = 1 WHERE topic = ? AND state = 0 AND at <= ?", (topic, now)
            )
            paused, flow = db.execute(_TOPIC_SQL, (topic,)).fetchone()
            if paused:
                return ReserveResult([], None)
            if not flow:
                jobs = lease_ready(db, self._log, topic, count, ttr_ms, now)
                return ReserveResult(jobs, None if jobs else next_change_in(db, topic))
            self._signals.flow_topics.add(topic)
            jobs, token_in = reserve_in_turns(db, self._log, topic, count, ttr_ms, now)
            if jobs:
                return ReserveResult(jobs, None)
            changes = [t for t in (token_in, next_change_in(db, topic)) if t is not None]
        return ReserveResult(jobs, min(changes) if changes else None)

    def watch(self, topic: str) -> Watcher:
        return SQLiteWatcher(self._signals, topic, self._store.data_version)

    def asyncio_backend(self, *, owned: bool) -> AsyncBackend | None:
        """Calls in threads, and waits as futures on the event loop."""
        return AsyncSQLiteBackend(
            self, self._signals, self._store.data_version, self._files, owned=owned
        )  # type: ignore[abstract]  # see fill_contract

    # -- by id -------------------------------------------------------------------

    def get(self, topic: str, job_id: str) -> JobInfo | None:
        with self._store.read() as db:
            return job_info(db, topic, job_id)

    def delete(self, topic: str, job_id: str) -> bool:
        with self._store.write() as db:
            now = now_ms()
            row = db.execute(
                "SELECT rowid, attempts, due_at, priority, unique_for_ms, job_group FROM jobs "
                "WHERE topic = ? AND id = ?",
                (topic, job_id),
            ).fetchone()
            if row is None:
                return False
            rowid, attempts, due_at, priority, unique_for_ms, group = row
            db.execute("DELETE FROM jobs WHERE rowid = ?", (rowid,))
            remember(db, topic, job_id, unique_for_ms, due_at, now)
            self._log.append(
                db, [(now, topic, job_id, "delete", attempts, due_at, priority, None, None, group)]
            )
        if topic in self._signals.flow_topics:  # a lease slot may be free
            self._signals.notify(topic)
        return True

    def reschedule(self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None) -> bool:
        with self._store.write() as db:
            now = now_ms()
            expire_leases(db, self._log, topic, now)  # see an expired lease as ready/dead
            row = db.execute(
                "SELECT rowid, attempts, priority, job_group FROM jobs "
                "WHERE topic = ? AND id = ? AND state IN (0, 1)",
                (topic, job_id),
            ).fetchone()
            if row is None:
                return False
            rowid, attempts, priority, group = row
            due = now + delay_ms if run_at_ms is None else max(run_at_ms, now)
            state = DELAYED if due > now else READY
            db.execute(
                "UPDATE jobs SET state = ?, at = ?, due_at = ? WHERE rowid = ?",
                (state, due, due, rowid),
            )
            self._log.append(
                db, [(now, topic, job_id, "reschedule", attempts, due, priority, None, None, group)]
            )
        self._signals.notify(topic)
        return True

    # -- topic-wide --------------------------------------------------------------

    def stats(self, topic: str, per_shard: bool = False, groups: bool = False) -> dict[str, Any]:
        with self._store.read() as db:
            stats = topic_stats(db, topic)
            if groups:
                stats["groups"] = group_counts(db, topic, now_ms())
        if per_shard:  # one shard: the topic's own counts
            names = ("delayed", "ready", "reserved", "dead", "next_due_at")
            stats["shards"] = [{name: stats[name] for name in names}]
        return stats

    def forecast(self, topic: str, until_ms: int, step_ms: int) -> Forecast:
        with self._store.read() as db:
            return due_forecast(db, topic, until_ms, step_ms)

    def topics(self) -> list[str]:
        with self._store.read() as db:
            return [
                name
                for (name,) in db.execute(
                    "SELECT name FROM topics WHERE paused "
                    "OR EXISTS (SELECT 1 FROM jobs WHERE topic = topics.name) ORDER BY name"
                )
            ]

    def dead(self, topic: str, limit: int) -> list[JobInfo]:
        with self._store.write() as db:  # a write: expired last attempts are dead now
            expire_leases(db, self._log, topic, now_ms())
            return dead_jobs(db, topic, limit)

    def requeue(self, topic: str, ids: Sequence[str] | None) -> int:
        with self._store.write() as db:
            now = now_ms()
            expire_leases(db, self._log, topic, now)  # see an expired lease as ready/dead
            sql = "SELECT rowid, id, priority, job_group FROM jobs WHERE topic = ? AND state = 3"
            if ids is None:
                rows = db.execute(sql, (topic,)).fetchall()
            else:
                rows = [
                    r
                    for job_id in dict.fromkeys(ids)
                    for r in db.execute(sql + " AND id = ?", (topic, job_id))
                ]
            db.executemany(
                "UPDATE jobs SET state = 1, at = ?, due_at = ?, attempts = 0, lease = NULL "
                "WHERE rowid = ?",
                [(now, now, rowid) for rowid, _, _, _ in rows],
            )
            self._log.append(
                db,
                [
                    (now, topic, job_id, "requeue", 0, now, priority, None, None, group)
                    for _, job_id, priority, group in rows
                ],
            )
        if rows:
            self._signals.notify(topic)
        return len(rows)

    def purge(self, topic: str) -> int:
        with self._store.write() as db:
            now = now_ms()
            cursor = db.execute(
                "INSERT INTO events (ts_ms, topic, id, event, attempt, due_at, priority, error, "
                "job_group) SELECT ?, topic, id, 'delete', attempts, due_at, priority, 'purged', "
                "job_group FROM jobs WHERE topic = ?",
                (now, topic),
            )
            count = cursor.rowcount
            db.execute("DELETE FROM jobs WHERE topic = ?", (topic,))
            db.execute("DELETE FROM remembered WHERE topic = ?", (topic,))
            self._log.count(db, count)
        return count

    def set_paused(self, topic: str, paused: bool) -> None:
        with self._store.write() as db:
            db.execute(
                "INSERT INTO topics (name, paused) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET paused = excluded.paused",
                (topic, int(paused)),
            )
        if not paused:
            self._signals.notify(topic)

    def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage:
        with self._store.read() as db:
            return event_page(db, topic, cursor, limit)

    def close(self) -> None:
        self._store.close()
