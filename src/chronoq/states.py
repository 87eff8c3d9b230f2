"""Job states, events and the transition table of docs/contract.md §1: the spec in code."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TRANSITIONS", "EventKind", "State", "lease_expired_error", "observed_state"]


class State(StrEnum):
    """Where a job is in its life. A job that was acked or deleted is gone."""

    DELAYED = "delayed"
    READY = "ready"
    RESERVED = "reserved"
    DEAD = "dead"


class EventKind(StrEnum):
    """What an event-log entry records; every transition appends exactly one."""

    PUT = "put"
    RESERVE = "reserve"
    ACK = "ack"
    NACK = "nack"
    EXPIRE = "expire"
    DEAD = "dead"
    BURY = "bury"
    DELETE = "delete"
    RESCHEDULE = "reschedule"
    REQUEUE = "requeue"
    TOUCH = "touch"


_LIVE = frozenset({State.DELAYED, State.READY})
_ANY = frozenset(State)
_GONE: frozenset[State] = frozenset()

#: operation -> (states it may start from, states it may lead to; empty = gone)
TRANSITIONS: dict[str, tuple[frozenset[State], frozenset[State]]] = {
    "put": (_GONE, _LIVE),
    "reserve": (frozenset({State.READY}), frozenset({State.RESERVED})),
    "ack": (frozenset({State.RESERVED}), _GONE),
    "nack": (frozenset({State.RESERVED}), frozenset({State.DELAYED, State.READY, State.DEAD})),
    "expire": (frozenset({State.RESERVED}), frozenset({State.READY, State.DEAD})),
    "touch": (frozenset({State.RESERVED}), frozenset({State.RESERVED})),
    "bury": (frozenset({State.RESERVED}), frozenset({State.DEAD})),
    "delete": (_ANY, _GONE),
    "reschedule": (_LIVE, _LIVE),
    "requeue": (frozenset({State.DEAD}), frozenset({State.READY})),
}


def observed_state(stored: State, at: int, now: int, attempts: int, max_attempts: int) -> State:
    """The state a reader sees. Time-driven moves (a delayed job falls due, a
    lease runs out) are applied lazily by the store; a reader sees them as done.
    ``at`` is the due time of a delayed job, the deadline of a reserved one."""
    if stored is State.DELAYED and at <= now:
        return State.READY
    if stored is State.RESERVED and at <= now:
        return State.DEAD if attempts >= max_attempts else State.READY
    return stored


def lease_expired_error(attempts: int, max_attempts: int) -> str:
    """The ``last_error`` of a job whose last lease ran out (the Redis scripts
    write the same text)."""
    return f"lease expired on attempt {attempts} of {max_attempts}"
