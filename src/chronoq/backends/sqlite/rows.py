"""Row shapes of the SQLite store and their conversion to chronoq values."""

from __future__ import annotations

import time
from typing import Any

from chronoq.job import Event, JobInfo, decode_payload
from chronoq.states import EventKind, State, lease_expired_error, observed_state

__all__ = [
    "DEAD",
    "DELAYED",
    "EVENT_COLUMNS",
    "INFO_COLUMNS",
    "IN_CHUNK",
    "READY",
    "RESERVED",
    "event_from_row",
    "info_from_row",
    "now_ms",
]

DELAYED, READY, RESERVED, DEAD = 0, 1, 2, 3
IN_CHUNK = 500  # ids per IN (...) list, well under SQLite's variable limit

INFO_COLUMNS = (
    "topic, id, state, at, due_at, priority, payload, ttr_ms, max_attempts, attempts, "
    "created_at, last_error, unique_for_ms, traceparent, job_group"
)
EVENT_COLUMNS = "seq, ts_ms, topic, id, event, attempt, due_at, priority, lag_ms, error, job_group"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _state(code: int, at: int, now: int, attempts: int, max_attempts: int) -> State:
    stored = (State.DELAYED, State.READY, State.RESERVED, State.DEAD)[code]
    return observed_state(stored, at, now, attempts, max_attempts)


def info_from_row(row: tuple[Any, ...], now: int) -> JobInfo:
    (
        topic,
        job_id,
        code,
        at,
        due_at,
        priority,
        payload,
        ttr_ms,
        max_attempts,
        attempts,
        created_at,
        last_error,
        unique_for_ms,
        traceparent,
        job_group,
    ) = row
    state = _state(code, at, now, attempts, max_attempts)
    return JobInfo(
        topic=topic,
        id=job_id,
        state=state,
        payload=decode_payload(payload),
        due_at=due_at,
        priority=priority,
        ttr=ttr_ms / 1000,
        max_attempts=max_attempts,
        attempts=attempts,
        created_at=created_at,
        last_error=(
            lease_expired_error(attempts, max_attempts)
            if state == State.DEAD and code == RESERVED
            else last_error
        ),
        deadline=at if state == State.RESERVED else None,
        unique_for=unique_for_ms / 1000,
        traceparent=traceparent,
        group=job_group,
    )


def event_from_row(row: tuple[Any, ...]) -> Event:
    seq, ts_ms, topic, job_id, kind, attempt, due_at, priority, lag_ms, error, group = row
    return Event(
        seq, ts_ms, topic, job_id, EventKind(kind), attempt, due_at, priority, lag_ms, error, group
    )
