"""The values chronoq passes around: the jobs put, leased and read, their
leases, and the pages of the event log. No I/O; ``codec.py`` validates and
encodes them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from chronoq.states import EventKind, State

__all__ = [
    "DEFAULT_MAX_PAYLOAD",
    "MAX_DURATION_S",
    "MAX_FORECAST_STEPS",
    "MAX_PRIORITY",
    "YEAR_10000",
    "Event",
    "EventPage",
    "Forecast",
    "Job",
    "JobInfo",
    "JobLease",
    "JobPage",
    "LogRead",
    "LogShard",
    "NewJob",
    "PutResult",
    "Reservation",
    "leases_by_topic",
]

DEFAULT_MAX_PAYLOAD = 1024 * 1024
MAX_PRIORITY = 1000
YEAR_10000 = 253_402_300_800  # epoch seconds: a run_at from there on is a unit mistake
MAX_DURATION_S = 10 * 365 * 24 * 3600  # ten years: beyond that it is a unit mistake
MAX_FORECAST_STEPS = 10_000  # the steps of one forecast: one count each, per shard


@dataclass(frozen=True, slots=True)
class Job:
    """A job to put. ``delay`` (seconds) and ``run_at`` (datetime, naive = UTC,
    or epoch seconds) are exclusive; neither means due now. ``id=None`` makes a
    ULID. ``ttr`` and ``unique_for`` are seconds. ``traceparent``: a W3C trace
    context (``00-<trace id>-<span id>-<flags>``) kept with the job; None lets
    a put with tracing on (docs/tracing.md) give it the put's own. ``group``:
    the job's group within its topic (a tenant, say; the pattern of a topic),
    or None for the topic's default group."""

    payload: Any = None
    delay: float | None = None
    run_at: datetime | float | None = None
    id: str | None = None
    priority: int = 0
    ttr: float = 30.0
    max_attempts: int = 5
    unique_for: float = 0.0
    traceparent: str | None = None
    group: str | None = None


class NewJob(NamedTuple):
    """A validated, encoded job as backends receive it. The due time is
    ``max(run_at_ms, now)`` when ``run_at_ms`` is set, else ``now + delay_ms``,
    with ``now`` taken from the store's clock. ``generated`` says the id is a
    fresh ULID made by this process, which no stored job can have: backends
    may skip the duplicate check for it. ``traceparent``: the job's W3C
    trace context, checked (docs/tracing.md), or None; ``group``: its group,
    checked, or None."""

    id: str
    payload: bytes
    delay_ms: int
    run_at_ms: int | None
    priority: int
    ttr_ms: int
    max_attempts: int
    unique_for_ms: int
    generated: bool = False
    traceparent: str | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True)
class PutResult:
    """What a put did: ``created`` is False when a job with this id already
    existed (or was remembered through ``unique_for``) and was left as it was;
    ``due_at`` is then the existing job's due time (ms since epoch)."""

    id: str
    created: bool
    due_at: int


@dataclass(frozen=True, slots=True)
class Reservation:
    """A job leased to this consumer until ``deadline`` (ms since epoch).
    Pass it to ``ack``, ``nack``, ``touch`` or ``bury``. ``traceparent``: the
    W3C trace context stored with the job (docs/tracing.md), or None;
    ``group``: the job's group, or None."""

    topic: str
    id: str
    payload: Any
    attempts: int
    lease: str
    deadline: int
    due_at: int
    priority: int
    max_attempts: int
    ttr: float
    created_at: int
    traceparent: str | None = None
    group: str | None = None


class JobLease(NamedTuple):
    """One lease of one job, as the lease calls of a backend take it (ack,
    nack, release, touch, bury): from a ``Reservation``, or from the three
    values a consumer elsewhere was given (``topic``, ``id``, ``lease``)."""

    topic: str
    id: str
    token: str


def leases_by_topic(leases: Iterable[JobLease]) -> dict[str, list[JobLease]]:
    """Leases grouped by topic, each group in the order given (``ack_many``)."""
    groups: dict[str, list[JobLease]] = {}
    for lease in leases:
        groups.setdefault(lease.topic, []).append(lease)
    return groups


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of one job, as ``get`` and ``dead`` return it.
    ``traceparent``: its W3C trace context (docs/tracing.md), or None;
    ``group``: its group, or None."""

    topic: str
    id: str
    state: State
    payload: Any
    due_at: int
    priority: int
    ttr: float
    max_attempts: int
    attempts: int
    created_at: int
    last_error: str | None
    deadline: int | None
    unique_for: float
    traceparent: str | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the event log (docs/contract.md §7). ``seq`` increases within a log;
    ``group``: the job's group, or None (last, so that positional constructions
    of before still hold)."""

    seq: int
    ts_ms: int
    topic: str
    id: str
    event: EventKind
    attempt: int
    due_at: int
    priority: int
    lag_ms: int | None
    error: str | None
    group: str | None = None


@dataclass(frozen=True, slots=True)
class EventPage:
    """A page of events and the cursor to pass for the next page."""

    events: list[Event]
    cursor: str


@dataclass(frozen=True, slots=True)
class Forecast:
    """How many delayed jobs of ``topic`` fall due per step, from ``start``
    (ms since the epoch: the store's now when it answered) on. ``step`` is
    seconds; ``counts[i]`` counts the jobs due in ``[start + i·step, start +
    (i+1)·step)``, and ``later`` those due from ``start + len(counts)·step``
    on, so ``sum(counts) + later`` is the ``delayed`` of ``stats``."""

    topic: str
    start: int
    step: float
    counts: tuple[int, ...]
    later: int


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of a topic's jobs and the cursor to pass for the next page
    (None: there is no more)."""

    jobs: list[JobInfo]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class LogShard:
    """One separately numbered part of a store's event log. SQLite keeps one
    for every topic (``name`` "events", ``shard`` 0, ``shared``; ``topic``
    selects the events of one topic in it, or None); Redis one per topic and
    shard (``name``: its stream's key, such as "chronoq:{orders:3}:events").
    Within one, events are numbered 1, 2, 3... without holes, except where the
    store trimmed events (docs/contract.md §7)."""

    name: str
    topic: str | None
    shard: int
    shared: bool = False  # it holds the events of other topics too


@dataclass(frozen=True, slots=True)
class LogRead:
    """Events of one log shard after a seq, oldest first, up to the first
    hole in the numbering. ``lost``: how many events after that seq and before
    ``events[0]`` (or ``upto``) the store had trimmed before they could be
    read. ``upto``: the seq this read is complete up to (the last event's, or
    further when the rest of the log holds none of the events asked for):
    the ``after`` of the next read. ``head``: the seq of the shard's newest
    event (0 for an empty log; below ``after`` when the store lost or replaced
    its log, and then the read is empty)."""

    events: list[Event]
    lost: int
    head: int
    upto: int
