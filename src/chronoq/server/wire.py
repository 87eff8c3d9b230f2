"""The JSON bodies of the /v1 API as msgspec types: the server decodes and
encodes with them, and the OpenAPI document is generated from them, so the
two cannot disagree. Times are ms since the Unix epoch; durations seconds."""

from __future__ import annotations

import base64
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from chronoq.job import MAX_DURATION_S, MAX_PRIORITY, Forecast, JobInfo, PutResult, Reservation
from chronoq.job.codec import TRACEPARENT_PATTERN
from chronoq.names import GROUP_PATTERN

__all__ = [
    "AckBatch",
    "AckBatchResult",
    "BatchPut",
    "BatchPutResult",
    "Deleted",
    "Empty",
    "ErrorBody",
    "ForecastBody",
    "JobBody",
    "JobInfoBody",
    "JobList",
    "JobSpec",
    "LeaseBody",
    "LeaseRefBody",
    "NackBody",
    "NackResult",
    "Paused",
    "PutJob",
    "PutResultBody",
    "Requeue",
    "Requeued",
    "RescheduleBody",
    "Rescheduled",
    "ReserveBody",
    "ReserveResultBody",
    "StateBody",
    "TopicList",
    "TouchBody",
    "Touched",
    "forecast_body",
    "info_body",
    "put_body",
    "reservation_body",
]

# the bounds the queue checks, stated here too so that the document tells them
Seconds = Annotated[float, Meta(ge=0, le=MAX_DURATION_S, description="seconds, ms resolution")]
Lease_s = Annotated[float, Meta(ge=0.001, le=MAX_DURATION_S, description="lease length, s")]
Lease = Annotated[str, Meta(min_length=1, description="the lease token of a reservation")]
# whole numbers are decoded as floats that are a multiple of 1: JSON has one
# number type, and an encoder may well write 3 as 3.0 (the document says integer)
Priority = Annotated[
    float,
    Meta(ge=-MAX_PRIORITY, le=MAX_PRIORITY, multiple_of=1, description="higher first"),
]
Attempts = Annotated[float, Meta(ge=1, le=1_000_000, multiple_of=1)]
Count = Annotated[float, Meta(ge=1, multiple_of=1)]
# ids and due times are checked by the queue, whose messages say what to do;
# openapi.py states the same rules in the document
JobId = Annotated[str, Meta(description="1-256 printable ASCII characters, no space")]
RunAt = Annotated[float, Meta(description="Unix time in seconds")]  # a number: no date format
TraceParent = Annotated[
    str,
    Meta(
        pattern=TRACEPARENT_PATTERN,  # the queue's own check: no all-zero ids
        description="a W3C trace context (traceparent, version 00) kept with the job",
    ),
]
GroupName = Annotated[
    str,
    Meta(
        pattern=f"^{GROUP_PATTERN}$",
        description="the job's group within its topic (a tenant, say); none: the default group",
    ),
]
Base64 = Annotated[
    str,
    Meta(
        pattern=r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
        description="standard base64, padded",
    ),
]


class JobSpec(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One job to put. ``payload`` is any JSON value; a binary payload is
    sent as ``payload_b64`` (base64) instead. ``delay`` and ``run_at``
    (Unix time in seconds) are exclusive."""

    payload: Any = None
    payload_b64: Base64 | None = None
    delay: Seconds | None = None
    run_at: RunAt | None = None
    id: JobId | None = None
    priority: Priority = 0
    ttr: Lease_s = 30.0
    max_attempts: Attempts = 5
    unique_for: Seconds = 0.0
    traceparent: TraceParent | None = None
    group: GroupName | None = None


class PutJob(JobSpec, forbid_unknown_fields=True, omit_defaults=True):
    """One job to put; ``replace``: overwrite a job of this id unless it is
    reserved (else an existing job is left as it is and reported)."""

    replace: bool = False


class BatchPut(Struct, forbid_unknown_fields=True):
    """Jobs to put at once: every one is checked first, and one invalid job
    rejects the batch (its index is in the error) and writes nothing."""

    jobs: list[JobSpec]
    replace: bool = False


class PutResultBody(Struct):
    id: str
    created: bool
    due_at: int


class BatchPutResult(Struct):
    results: list[PutResultBody]


class ReserveBody(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Lease up to ``count`` due jobs; wait up to ``wait`` seconds for one."""

    count: Count = 1
    wait: Seconds = 0.0
    ttr: Lease_s | None = None


class JobBody(Struct, omit_defaults=True):
    """A leased job. ``lease`` fences the lease calls; ``deadline`` is when
    the lease runs out (ms)."""

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
    payload_b64: str | None = None
    traceparent: str | None = None
    group: str | None = None


class ReserveResultBody(Struct):
    jobs: list[JobBody]


class LeaseBody(Struct, forbid_unknown_fields=True):
    lease: Lease


class NackBody(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """``delay`` None: the job's backoff."""

    lease: Lease
    delay: Seconds | None = None
    error: str | None = None


class TouchBody(Struct, forbid_unknown_fields=True, omit_defaults=True):
    lease: Lease
    ttr: Lease_s | None = None


class StateBody(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """bury and release: the lease, and an optional error kept as last_error."""

    lease: Lease
    error: str | None = None


class LeaseRefBody(Struct, forbid_unknown_fields=True):
    id: JobId
    lease: Lease


class AckBatch(Struct, forbid_unknown_fields=True):
    leases: list[LeaseRefBody]


class AckBatchResult(Struct):
    """``lost``: the ids whose lease was lost (nothing was done to them)."""

    lost: list[str]


class Empty(Struct):
    pass


class NackResult(Struct):
    state: str


class Touched(Struct):
    deadline: int


class RescheduleBody(Struct, forbid_unknown_fields=True, omit_defaults=True):
    delay: Seconds | None = None
    run_at: RunAt | None = None


class Rescheduled(Struct):
    rescheduled: bool


class Deleted(Struct):
    deleted: bool


class JobInfoBody(Struct, omit_defaults=True):
    topic: str
    id: str
    state: str
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
    payload_b64: str | None = None
    traceparent: str | None = None
    group: str | None = None


class JobList(Struct):
    jobs: list[JobInfoBody]


class TopicList(Struct):
    topics: list[str]


class ForecastBody(Struct):
    """Delayed jobs due per step from ``start`` (ms, the store's now):
    ``counts[i]`` those due in [start + i·step, start + (i+1)·step), ``step``
    in seconds; ``later`` those due after the last step."""

    topic: str
    start: int
    step: float
    counts: list[int]
    later: int


class Requeue(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """``ids`` None: every dead job of the topic."""

    ids: list[JobId] | None = None


class Requeued(Struct):
    requeued: int


class Paused(Struct):
    paused: bool


class ErrorDetail(Struct, omit_defaults=True):
    code: str
    message: str
    index: int | None = None  # the refused job of a batch
    size: int | None = None  # too_large: the bytes of the payload, or of the body
    limit: int | None = None  # too_large: the store's max_payload, or limits.max_body


class ErrorBody(Struct):
    error: ErrorDetail


def forecast_body(forecast: Forecast) -> ForecastBody:
    return ForecastBody(
        forecast.topic, forecast.start, forecast.step, list(forecast.counts), forecast.later
    )


def _payload(payload: Any) -> tuple[Any, str | None]:
    if isinstance(payload, bytes):
        return None, base64.b64encode(payload).decode()
    return payload, None


def put_body(result: PutResult) -> PutResultBody:
    return PutResultBody(result.id, result.created, result.due_at)


def reservation_body(job: Reservation) -> JobBody:
    payload, b64 = _payload(job.payload)
    return JobBody(
        job.topic,
        job.id,
        payload,
        job.attempts,
        job.lease,
        job.deadline,
        job.due_at,
        job.priority,
        job.max_attempts,
        job.ttr,
        job.created_at,
        b64,
        job.traceparent,
        job.group,
    )


def info_body(info: JobInfo) -> JobInfoBody:
    payload, b64 = _payload(info.payload)
    return JobInfoBody(
        info.topic,
        info.id,
        info.state.value,
        payload,
        info.due_at,
        info.priority,
        info.ttr,
        info.max_attempts,
        info.attempts,
        info.created_at,
        info.last_error,
        info.deadline,
        info.unique_for,
        b64,
        info.traceparent,
        info.group,
    )


ENCODER = msgspec.json.Encoder()
