"""The argument checks of every operation (``chronoq.calls``): each turns a
user's arguments into what the backend takes, or raises ``InvalidInput``.
No I/O."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from chronoq.backoff import Backoff
from chronoq.errors import InvalidInput, InvalidJob
from chronoq.job import (
    Job,
    JobLease,
    LogShard,
    NewJob,
    Reservation,
    duration_ms,
    prepare_job,
    run_at_ms,
    validate_id,
    validate_topic,
)

__all__ = [
    "MAX_COUNT",
    "MAX_LIMIT",
    "MAX_WAIT_S",
    "SEQ_BEYOND",
    "LeaseRef",
    "check_limit",
    "error_text",
    "forecast_args",
    "jobs_args",
    "lease_args",
    "leases_of",
    "log_shard_arg",
    "nack_args",
    "optional_ttr_ms",
    "put_args",
    "requeue_ids",
    "reschedule_args",
    "reserve_args",
    "seq_arg",
]

MAX_COUNT = 10_000
MAX_LIMIT = 100_000  # events, dead jobs, jobs of one read
MAX_WAIT_S = 3600.0
MAX_ERROR_CHARS = 10_000
SEQ_BEYOND = 1 << 62  # a seq past any log's head: a read after it finds no event
LeaseRef = Reservation | str


def put_args(topic: str, jobs: list[Job], max_payload: int, batch: bool) -> list[NewJob]:
    """Every job validated and encoded; one invalid job raises ``InvalidJob``."""
    try:
        validate_topic(topic)
    except InvalidInput as exc:
        raise InvalidJob(str(exc)) from None
    return [
        prepare_job(job, max_payload, index if batch else None) for index, job in enumerate(jobs)
    ]


def reserve_args(
    topic: str, count: int, wait: float, ttr: float | None
) -> tuple[float, int | None]:
    """The wait in seconds and the lease length override in ms."""
    validate_topic(topic)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise InvalidInput(f"count must be an integer from 1 to {MAX_COUNT}, got {count!r}")
    wait_s = duration_ms(wait, "wait") / 1000
    if wait_s > MAX_WAIT_S:
        raise InvalidInput(f"wait must be at most {MAX_WAIT_S:g} seconds, got {wait!r}")
    return wait_s, optional_ttr_ms(ttr)


def optional_ttr_ms(ttr: float | None) -> int | None:
    return None if ttr is None else duration_ms(ttr, "ttr", minimum_ms=1)


def lease_args(job: LeaseRef, job_id: str | None, lease: str | None) -> JobLease:
    """The lease a lease call names: a Reservation, or topic, id and token."""
    if isinstance(job, Reservation):
        if job_id is not None or lease is not None:
            raise InvalidInput("pass a Reservation, or topic, id and lease; not both")
        return JobLease(job.topic, job.id, job.lease)
    if job_id is None or lease is None:
        raise InvalidInput("pass a Reservation, or all three of topic, id and lease")
    if not isinstance(lease, str) or not lease:
        raise InvalidInput(f"lease must be the token of a reservation, got {lease!r}")
    return JobLease(validate_topic(job), validate_id(job_id), lease)


def leases_of(jobs: Iterable[Reservation | JobLease]) -> list[JobLease]:
    """The leases of reservations (or ``JobLease`` values), for ``ack_many``."""
    return [
        lease_args(job.topic, job.id, job.token)
        if isinstance(job, JobLease)
        else lease_args(job, None, None)
        for job in jobs
    ]


def nack_args(delay: float | None, backoff: Backoff | None) -> tuple[int | None, Backoff | None]:
    """The delay in ms (None: by the backoff) and the backoff curve to use
    (None: the facade's)."""
    if backoff is not None and not isinstance(backoff, Backoff):
        raise InvalidInput(f"backoff must be a chronoq.Backoff, got {backoff!r}")
    return (None if delay is None else duration_ms(delay, "delay")), backoff


def error_text(error: object) -> str | None:
    """The text kept as ``last_error``, cut to a sane length."""
    if error is None:
        return None
    text = str(error)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def reschedule_args(
    topic: str, job_id: str, delay: float | None, run_at: datetime | float | None
) -> tuple[int, int | None]:
    """The delay in ms and the due time in ms (or None)."""
    validate_topic(topic)
    validate_id(job_id)
    if (delay is None) == (run_at is None):
        raise InvalidInput("reschedule takes exactly one of delay or run_at")
    delay_ms = 0 if delay is None else duration_ms(delay, "delay")
    return delay_ms, None if run_at is None else run_at_ms(run_at)


def forecast_args(topic: str, until: datetime | float, step: float) -> tuple[int, int]:
    """The end and the step of a forecast in ms. Whether ``until`` is later
    than now, and how many steps away, only the store can tell: its clock is
    the one that counts (``job.forecast_steps``)."""
    validate_topic(topic)
    return run_at_ms(until, "until"), duration_ms(step, "step", minimum_ms=1000)


def requeue_ids(topic: str, ids: Sequence[str] | None) -> list[str] | None:
    validate_topic(topic)
    if isinstance(ids, str):
        raise InvalidInput("ids must be a list of ids, not one string")
    return None if ids is None else [validate_id(job_id) for job_id in ids]


def check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")


def log_shard_arg(shard: object) -> LogShard:
    if not isinstance(shard, LogShard):
        raise InvalidInput(f"expected a LogShard from log_shards(), got {shard!r}")
    return shard


def seq_arg(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"an event seq must be an integer >= 0, got {value!r}")
    return value


def jobs_args(shard: object, cursor: object, limit: object) -> None:
    check_limit(limit)
    if isinstance(shard, bool) or not isinstance(shard, int):
        raise InvalidInput(f"shard must be an integer, got {shard!r}")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidInput(f"bad job cursor {cursor!r}: pass the cursor of a previous page")
