"""The reserve path of the SQLite backend: reclaim, promote, lease (docs/contract.md §6:
expired leases are reclaimed here, so no timer process is needed)."""

from __future__ import annotations

import secrets
import sqlite3
import time
from typing import Any

from chronoq.backends.sqlite.eventlog import EventLog, EventRow
from chronoq.backends.sqlite.rows import DEAD, DELAYED, READY, RESERVED
from chronoq.job import Reservation, decode_payload
from chronoq.states import lease_expired_error

__all__ = ["READY_SQL", "expire_leases", "lease_ready", "lease_rows", "next_change_in"]

EXPIRE_BATCH = 1000  # leases reclaimed per reserve call: keeps every call bounded


def expire_leases(db: sqlite3.Connection, log: EventLog, topic: str, now: int) -> None:
    """Expired leases go back to ready, or to dead when attempts are used up."""
    expired = db.execute(
        "SELECT rowid, id, attempts, max_attempts, due_at, priority, job_group FROM jobs "
        "WHERE topic = ? AND state = 2 AND at <= ? LIMIT ?",
        (topic, now, EXPIRE_BATCH),
    ).fetchall()
    if not expired:
        return
    updates: list[tuple[Any, ...]] = []
    events: list[EventRow] = []
    for rowid, job_id, attempts, max_attempts, due_at, priority, group in expired:
        if attempts >= max_attempts:
            error = lease_expired_error(attempts, max_attempts)
            updates.append((DEAD, now, error, rowid))
            events.append(
                (now, topic, job_id, "dead", attempts, due_at, priority, None, error, group)
            )
        else:
            updates.append((READY, due_at, None, rowid))
            events.append(
                (now, topic, job_id, "expire", attempts, due_at, priority, None, None, group)
            )
    db.executemany(
        "UPDATE jobs SET state = ?, at = ?, lease = NULL, last_error = coalesce(?, last_error) "
        "WHERE rowid = ?",
        updates,
    )
    log.append(db, events)


# the best ready jobs of one group (NULL: the default group, every job of a
# topic without flow control): priority, then due time, then put order
READY_SQL = (
    "SELECT rowid, id, payload, attempts, max_attempts, due_at, priority, ttr_ms, "
    "created_at, traceparent, job_group FROM jobs WHERE topic = ? AND state = 1 "
    "AND job_group IS ? ORDER BY priority DESC, due_at, rowid LIMIT ?"
)


def lease_ready(
    db: sqlite3.Connection, log: EventLog, topic: str, count: int, ttr_ms: int | None, now: int
) -> list[Reservation]:
    """Lease the best ``count`` ready jobs of a topic without flow control."""
    rows = db.execute(READY_SQL, (topic, None, count)).fetchall()
    return lease_rows(db, log, topic, rows, ttr_ms, now)


def lease_rows(
    db: sqlite3.Connection,
    log: EventLog,
    topic: str,
    rows: list[Any],
    ttr_ms: int | None,
    now: int,
) -> list[Reservation]:
    """Lease the ready jobs ``rows`` (of ``READY_SQL``), in their order."""
    prefix = secrets.token_hex(8)  # + the index in this call: unique per reservation
    updates: list[tuple[int, str, int, int]] = []
    events: list[EventRow] = []
    jobs: list[Reservation] = []
    for row in rows:
        rowid, job_id, payload, attempts, max_attempts, due_at, priority, ttr, created = row[:9]
        trace, group = row[9], row[10]
        attempts += 1
        lease = f"{prefix}{len(jobs):04x}"
        lease_ms = ttr_ms or ttr
        deadline = now + lease_ms
        updates.append((attempts, lease, deadline, rowid))
        events.append(
            (now, topic, job_id, "reserve", attempts, due_at, priority, now - due_at, None, group)
        )
        jobs.append(
            Reservation(
                topic,
                job_id,
                decode_payload(payload),
                attempts,
                lease,
                deadline,
                due_at,
                priority,
                max_attempts,
                lease_ms / 1000,
                created,
                trace,
                group,
            )
        )
    db.executemany(
        "UPDATE jobs SET state = 2, attempts = ?, lease = ?, at = ? WHERE rowid = ?", updates
    )
    log.append(db, events)
    return jobs


def next_change_in(db: sqlite3.Connection, topic: str) -> float | None:
    """Ms until a delayed job of the topic becomes due or a lease expires,
    measured from the current fractional ms so the waiter does not oversleep."""
    times = [
        db.execute(
            f"SELECT min(at) FROM jobs WHERE topic = ? AND state = {state}", (topic,)
        ).fetchone()[0]
        for state in (DELAYED, RESERVED)
    ]
    pending = [t for t in times if t is not None]
    return max(min(pending) - time.time_ns() / 1e6, 0.0) if pending else None
