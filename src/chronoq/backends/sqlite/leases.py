"""The lease calls of the SQLite store (ack, nack, release, touch, bury):
each one transaction that checks the lease is live, moves the job and
appends its events."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from chronoq.backends.sqlite.eventlog import EventLog, EventRow, remember
from chronoq.backends.sqlite.rows import DELAYED, IN_CHUNK, READY, now_ms
from chronoq.backends.sqlite.signals import FileSignals
from chronoq.backends.sqlite.store import Store
from chronoq.backoff import Backoff
from chronoq.errors import LeaseLost
from chronoq.job import JobLease, leases_by_topic
from chronoq.states import State

__all__ = ["SQLiteLeases"]

_LEASED_SQL = (
    "SELECT rowid, attempts, max_attempts, due_at, priority, ttr_ms, unique_for_ms, job_group "
    "FROM jobs WHERE topic = ? AND id = ? AND state = 2 AND lease = ? AND at > ?"
)


class SQLiteLeases:
    """The lease methods of ``SQLiteBackend``."""

    _store: Store
    _log: EventLog
    _signals: FileSignals

    def _leased(
        self, db: sqlite3.Connection, lease: JobLease, now: int
    ) -> tuple[int, int, int, int, int, int, int, str | None]:
        row = db.execute(_LEASED_SQL, (*lease, now)).fetchone()
        if row is None:
            raise LeaseLost(lease.topic, lease.id)
        return row  # type: ignore[no-any-return]

    def ack_many(self, leases: Sequence[JobLease]) -> list[str]:
        lost: list[str] = []
        with self._store.write() as db:
            now = now_ms()
            gone: list[tuple[int]] = []
            events: list[EventRow] = []
            for topic, held_leases in leases_by_topic(leases).items():
                held = self._reserved(db, topic, [lease.id for lease in held_leases])
                for _, job_id, token in held_leases:
                    row = held.get(job_id)
                    if row is None or row[1] != token or row[2] <= now:
                        lost.append(job_id)
                        continue
                    del held[job_id]  # the same lease twice in one call: the second is lost
                    rowid, _, _, attempts, due_at, priority, unique_for_ms, group = row
                    gone.append((rowid,))
                    remember(db, topic, job_id, unique_for_ms, due_at, now)
                    events.append(
                        (now, topic, job_id, "ack", attempts, due_at, priority, None, None, group)
                    )
            db.executemany("DELETE FROM jobs WHERE rowid = ?", gone)
            self._log.append(db, events)
        self._free_slots({lease.topic for lease in leases})
        return lost

    def _free_slots(self, topics: set[str]) -> None:
        """Wake consumers held up by a limit on leases (docs/contract.md §10)."""
        for topic in topics & self._signals.flow_topics:
            self._signals.notify(topic)

    def _reserved(
        self, db: sqlite3.Connection, topic: str, ids: list[str]
    ) -> dict[str, tuple[int, str, int, int, int, int, int, str | None]]:
        """id -> (rowid, lease, deadline, attempts, due_at, priority, unique_for_ms,
        job_group)."""
        held = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), IN_CHUNK):
            chunk = unique[start : start + IN_CHUNK]
            for job_id, *row in db.execute(
                "SELECT id, rowid, lease, at, attempts, due_at, priority, unique_for_ms, job_group "
                f"FROM jobs WHERE topic = ? AND id IN ({','.join('?' * len(chunk))}) "
                "AND state = 2",
                (topic, *chunk),
            ):
                held[job_id] = tuple(row)
        return held

    def nack(
        self,
        lease: JobLease,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State:
        topic, job_id, _ = lease
        with self._store.write() as db:
            now = now_ms()
            rowid, attempts, max_attempts, due_at, priority, _, _, group = self._leased(
                db, lease, now
            )
            if attempts >= max_attempts:
                event = (now, topic, job_id, "dead", attempts, due_at, priority, None, error, group)
                self._kill(db, rowid, event)
                return State.DEAD
            delay = backoff.delay_ms(attempts, jitter) if delay_ms is None else delay_ms
            due = now + delay
            state = DELAYED if delay > 0 else READY
            db.execute(
                "UPDATE jobs SET state = ?, at = ?, due_at = ?, lease = NULL, "
                "last_error = coalesce(?, last_error) WHERE rowid = ?",
                (state, due, due, error, rowid),
            )
            self._log.append(
                db, [(now, topic, job_id, "nack", attempts, due, priority, None, error, group)]
            )
        self._signals.notify(topic)
        return State.DELAYED if state == DELAYED else State.READY

    def release(self, lease: JobLease, error: str | None) -> None:
        topic, job_id, _ = lease
        with self._store.write() as db:
            now = now_ms()
            rowid, attempts, _, _, priority, _, _, group = self._leased(db, lease, now)
            db.execute(
                "UPDATE jobs SET state = ?, at = ?, due_at = ?, lease = NULL, "
                "last_error = coalesce(?, last_error) WHERE rowid = ?",
                (READY, now, now, error, rowid),
            )
            self._log.append(
                db, [(now, topic, job_id, "nack", attempts, now, priority, None, error, group)]
            )
        self._signals.notify(topic)

    def touch(self, lease: JobLease, ttr_ms: int | None) -> int:
        topic, job_id, _ = lease
        with self._store.write() as db:
            now = now_ms()
            rowid, attempts, _, due_at, priority, ttr, _, group = self._leased(db, lease, now)
            deadline = now + (ttr_ms or ttr)
            db.execute("UPDATE jobs SET at = ? WHERE rowid = ?", (deadline, rowid))
            self._log.append(
                db, [(now, topic, job_id, "touch", attempts, due_at, priority, None, None, group)]
            )
        return deadline

    def bury(self, lease: JobLease, error: str | None) -> None:
        topic, job_id, _ = lease
        with self._store.write() as db:
            now = now_ms()
            rowid, attempts, _, due_at, priority, _, _, group = self._leased(db, lease, now)
            event = (now, topic, job_id, "bury", attempts, due_at, priority, None, error, group)
            self._kill(db, rowid, event)
        self._free_slots({topic})

    def _kill(self, db: sqlite3.Connection, rowid: int, event: EventRow) -> None:
        """The job dead, with its ``event`` (dead or bury: its time and error)."""
        db.execute(
            "UPDATE jobs SET state = 3, at = ?, lease = NULL, last_error = coalesce(?, last_error) "
            "WHERE rowid = ?",
            (event[0], event[8], rowid),
        )
        self._log.append(db, [event])
