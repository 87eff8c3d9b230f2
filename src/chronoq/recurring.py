"""Recurring jobs: what ``Queue.recurring`` stores and what ``run_recurring``
puts, shared by ``Queue`` and ``chronoq.aio.AsyncQueue``. No I/O.

A schedule belongs to a topic and has a name; it is a cron expression in a
time zone or a fixed interval (``chronoq.schedule``). Each occurrence becomes
an ordinary job of the topic whose id is ``<name>@<occurrence ms>``, put by
``run_recurring``, which every worker calls. Duplicates are prevented twice:

- the schedule remembers the last occurrence put (``last_at``), so a later
  call does not compute that occurrence again;
- callers that raced on the same occurrence put the same id, which the store
  creates once: while the job lives, and after it is acked or deleted for
  ``unique_for`` (until the next occurrence is due, plus a margin), so a
  caller that read the schedule before the mark and puts late is answered
  ``created=False``.

After downtime the missed occurrences collapse into one job, the latest one
due: a nightly report that missed three nights runs once, not three times. A
new schedule does not fire for occurrences before its creation; redefining a
schedule (same topic and name) keeps its creation time and last occurrence,
so defining schedules at every start-up is safe and misses nothing.

Schedules are not jobs: ``topics()`` lists topics that hold jobs or are
paused, not those with only schedules; ``purge`` deletes jobs and leaves the
schedules; changing a schedule appends no event (the occurrences' puts do).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from chronoq.backends.base import StoredSchedule
from chronoq.calls.checks import put_args
from chronoq.errors import ChronoqError, InvalidInput, NotFound
from chronoq.job import (
    MAX_DURATION_S,
    Job,
    NewJob,
    PutResult,
    decode_payload,
    encode_payload,
    validate_topic,
)
from chronoq.schedule import Schedule, occurrence_id

__all__ = [
    "Plan",
    "Recurring",
    "RecurringRun",
    "check_name",
    "encode_spec",
    "find_recurring",
    "plan_run",
    "recurring_list",
    "to_recurring",
    "unique_for_ms",
]

SPEC_VERSION = 1
#: how long after the next occurrence an occurrence's id is still remembered
#: (at least): covers a caller that read the schedule, then stalled before
#: its put. Intervals longer than this are covered for their own length.
MIN_MARGIN_MS = 60_000
_MAX_DURATION_MS = MAX_DURATION_S * 1000
_UNLIMITED = 1 << 62  # a stored payload was checked when defined: not again


@dataclass(frozen=True, slots=True)
class Recurring:
    """A recurring schedule of a topic. Times are ms since the epoch:
    ``created_at`` (kept when it is redefined), ``last_at`` (the latest
    occurrence put, None before the first) and ``next_at`` (the first
    occurrence after now)."""

    topic: str
    name: str
    cron: str | None
    every: float | None
    tz: str
    payload: Any
    priority: int
    ttr: float
    max_attempts: int
    created_at: int
    last_at: int | None
    next_at: int | None


@dataclass(frozen=True, slots=True)
class RecurringRun:
    """What ``run_recurring`` did: the occurrences it created (jobs put by
    another caller are not listed) and the earliest next occurrence of the
    topic's schedules (ms), None when it has none: call again then.
    ``next_in``: seconds from this call to ``next_at`` by the store's clock;
    sleep this long rather than compare ``next_at`` with a local clock, which
    may differ from the store's (Redis ``TIME``)."""

    put: list[PutResult]
    next_at: int | None
    next_in: float | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """The occurrences to put now, as jobs, and when to run again."""

    jobs: list[NewJob]
    marks: list[tuple[str, int]]
    next_at: int | None
    next_in: float | None  # seconds, by the store's clock

    def done(self, results: list[PutResult]) -> RecurringRun:
        """What ``run_recurring`` answers once the jobs were put."""
        created = [result for result in results if result.created]
        return RecurringRun(created, self.next_at, self.next_in)


def encode_spec(
    topic: str,
    name: str,
    cron: str | None,
    every: float | None,
    payload: Any,
    tz: str,
    priority: int,
    ttr: float,
    max_attempts: int,
    max_payload: int,
) -> bytes:
    """Every argument of ``Queue.recurring`` checked (``InvalidInput``), and
    the schedule encoded as compact JSON for the backend."""
    validate_topic(topic)
    schedule = Schedule(name, cron, every, tz)
    try:  # the job fields are checked as a put checks them
        (job,) = put_args(
            topic,
            [Job(payload, None, None, name, priority, ttr, max_attempts)],
            max_payload,
            batch=False,
        )
    except InvalidInput as exc:
        raise InvalidInput(f"recurring job {name!r}: {exc}") from None
    spec: dict[str, Any] = {
        "v": SPEC_VERSION,
        "cron": schedule.cron,
        "every": schedule.every,
        "tz": schedule.tz,
        "priority": job.priority,
        "ttr_ms": job.ttr_ms,
        "max_attempts": job.max_attempts,
    }
    stored = decode_payload(job.payload)  # the payload as a put would store it
    if isinstance(stored, bytes):
        spec["payload_base64"] = base64.b64encode(stored).decode()
    else:
        spec["payload"] = stored
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class _Spec:
    schedule: Schedule
    payload: Any
    priority: int
    ttr_ms: int
    max_attempts: int


def _decode_spec(topic: str, stored: StoredSchedule) -> _Spec:
    try:
        spec = json.loads(stored.spec)
        if "payload_base64" in spec:
            payload: Any = base64.b64decode(spec["payload_base64"])
        else:
            payload = spec["payload"]
        return _Spec(
            Schedule(stored.name, spec["cron"], spec["every"], spec["tz"]),
            payload,
            int(spec["priority"]),
            int(spec["ttr_ms"]),
            int(spec["max_attempts"]),
        )
    except (ValueError, KeyError, TypeError) as exc:  # InvalidInput is a ValueError
        raise ChronoqError(
            f"recurring job {stored.name!r} of topic {topic!r} is stored in a form this "
            f"chronoq cannot read ({exc}): define it again, or remove it"
        ) from None


def _anchor(stored: StoredSchedule) -> int:
    """Occurrences after this are put: the last one put, or the creation time
    (a new schedule does not fire for past occurrences)."""
    if stored.last_at is None:
        return stored.created_at
    return max(stored.last_at, stored.created_at)


def to_recurring(topic: str, stored: StoredSchedule, now_ms: int) -> Recurring:
    """The user's view of a stored schedule at ``now_ms`` (the store's clock)."""
    spec = _decode_spec(topic, stored)
    schedule = spec.schedule
    return Recurring(
        topic=topic,
        name=stored.name,
        cron=schedule.cron,
        every=schedule.every,
        tz=schedule.tz,
        payload=spec.payload,
        priority=spec.priority,
        ttr=spec.ttr_ms / 1000,
        max_attempts=spec.max_attempts,
        created_at=stored.created_at,
        last_at=stored.last_at,
        next_at=schedule.next_after(now_ms),
    )


def unique_for_ms(schedule: Schedule, at_ms: int) -> int:
    """How long an occurrence's id is remembered once its job is gone: until
    the next occurrence and a margin after it (see MIN_MARGIN_MS)."""
    gap = schedule.next_after(at_ms) - at_ms
    return min(gap + max(gap, MIN_MARGIN_MS), _MAX_DURATION_MS)


def plan_run(topic: str, now_ms: int, stored: list[StoredSchedule]) -> Plan:
    """The occurrence of each schedule due at ``now_ms`` (the store's clock)
    that was not put yet, as a job; and the earliest next occurrence."""
    jobs: list[NewJob] = []
    marks: list[tuple[str, int]] = []
    next_at: int | None = None
    for entry in stored:
        spec = _decode_spec(topic, entry)
        schedule = spec.schedule
        at = schedule.due(_anchor(entry), now_ms)
        if at is not None:
            payload = encode_payload(spec.payload, _UNLIMITED)
            jobs.append(
                NewJob(
                    id=occurrence_id(entry.name, at),
                    payload=payload,
                    delay_ms=0,
                    run_at_ms=at,
                    priority=spec.priority,
                    ttr_ms=spec.ttr_ms,
                    max_attempts=spec.max_attempts,
                    unique_for_ms=unique_for_ms(schedule, at),
                )
            )
            marks.append((entry.name, at))
        nxt = schedule.next_after(now_ms)
        next_at = nxt if next_at is None else min(next_at, nxt)
    return Plan(jobs, marks, next_at, None if next_at is None else (next_at - now_ms) / 1000)


def check_name(name: object) -> str:
    """A schedule name, as ``recurring_remove`` takes it."""
    if not isinstance(name, str):
        raise InvalidInput(f"name must be the name of a recurring job, got {name!r}")
    Schedule(name, every=1)  # the name's rule, with its message
    return name


def recurring_list(topic: str, now_ms: int, stored: list[StoredSchedule]) -> list[Recurring]:
    """The topic's schedules, by name."""
    return [to_recurring(topic, entry, now_ms) for entry in sorted(stored)]


def find_recurring(topic: str, name: str, now_ms: int, stored: list[StoredSchedule]) -> Recurring:
    """The schedule ``name`` just defined, from a listing read after it."""
    for entry in stored:
        if entry.name == name:
            return to_recurring(topic, entry, now_ms)
    raise NotFound(f"recurring job {name!r} of topic {topic!r} was removed as it was defined")
