"""chronoq's values to the JSON bodies of the /v1 API and back: jobs to put,
reservations, job snapshots, forecasts. No I/O. Binary payloads travel as ``payload_b64``;
times are ms since the epoch and durations seconds, as in the Python API."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from typing import Any

from chronoq.errors import InvalidInput, InvalidJob
from chronoq.job import (
    DEFAULT_MAX_PAYLOAD,
    Forecast,
    Job,
    JobInfo,
    PutResult,
    Reservation,
    prepare_job,
    run_at_ms,
)
from chronoq.states import State

__all__ = ["encode", "forecast", "info", "job_body", "put_result", "reservation", "run_at_s"]

_BINARY = (bytes, bytearray, memoryview)
_DEFAULT = Job()


def encode(body: Any) -> bytes:
    """Compact JSON, refusing NaN and infinities as ``Queue`` does (the
    server's decoder would refuse them too, with a less helpful message)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def run_at_s(value: object) -> float:
    """``run_at`` (datetime, naive = UTC, or epoch seconds) as epoch seconds
    with ms resolution; a time before 1970 is due now, as with ``Queue``."""
    return max(run_at_ms(value), 0) / 1000


def job_body(job: Job, index: int | None) -> dict[str, Any]:
    """The JSON of one job to put, checked as ``Queue`` checks it (raising
    ``InvalidJob``); the payload size is left to the server, whose store's
    ``max_payload`` is the one that counts."""
    # the checks without the payload: its JSON text is made once, with the body
    probe = dataclasses.replace(job, payload=None) if isinstance(job, Job) else job
    prepare_job(probe, DEFAULT_MAX_PAYLOAD, index)
    body: dict[str, Any] = {}
    if isinstance(job.payload, _BINARY):
        body["payload_b64"] = base64.b64encode(bytes(job.payload)).decode()
    elif job.payload is not None:
        body["payload"] = job.payload
    if job.delay is not None:
        body["delay"] = float(job.delay)
    if job.run_at is not None:
        body["run_at"] = run_at_s(job.run_at)
    if job.id is not None:
        body["id"] = job.id
    if job.priority != _DEFAULT.priority:
        body["priority"] = job.priority
    if job.ttr != _DEFAULT.ttr:
        body["ttr"] = float(job.ttr)
    if job.max_attempts != _DEFAULT.max_attempts:
        body["max_attempts"] = job.max_attempts
    if job.unique_for != _DEFAULT.unique_for:
        body["unique_for"] = float(job.unique_for)
    if job.traceparent is not None:
        body["traceparent"] = job.traceparent
    if job.group is not None:
        body["group"] = job.group
    return body


def encode_jobs(body: dict[str, Any], jobs: list[dict[str, Any]], batch: bool) -> bytes:
    """``body`` as JSON; a payload that is not JSON raises ``InvalidJob``
    naming it (its index in a batch), as ``Queue.put_many`` does."""
    try:
        return encode(body)
    except (TypeError, ValueError):
        pass
    for index, job in enumerate(jobs):  # only on failure: find the culprit
        try:
            encode(job.get("payload"))
        except (TypeError, ValueError) as exc:
            raise InvalidJob(
                f"payload is not JSON-serializable ({exc}): pass a JSON value "
                "(dict, list, str, int, float, bool, None) or bytes",
                index if batch else None,
            ) from None
    raise InvalidInput("the request cannot be encoded as JSON")  # pragma: no cover


def _payload(body: dict[str, Any]) -> Any:
    b64 = body.get("payload_b64")
    if b64 is None:
        return body.get("payload")
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("the server sent a payload_b64 that is not base64") from None


def put_result(body: dict[str, Any]) -> PutResult:
    return PutResult(body["id"], body["created"], body["due_at"])


def reservation(body: dict[str, Any]) -> Reservation:
    return Reservation(
        body["topic"],
        body["id"],
        _payload(body),
        body["attempts"],
        body["lease"],
        body["deadline"],
        body["due_at"],
        body["priority"],
        body["max_attempts"],
        float(body["ttr"]),
        body["created_at"],
        body.get("traceparent"),
        body.get("group"),
    )


def info(body: dict[str, Any]) -> JobInfo:
    return JobInfo(
        body["topic"],
        body["id"],
        State(body["state"]),
        _payload(body),
        body["due_at"],
        body["priority"],
        float(body["ttr"]),
        body["max_attempts"],
        body["attempts"],
        body["created_at"],
        body.get("last_error"),
        body.get("deadline"),
        float(body["unique_for"]),
        body.get("traceparent"),
        body.get("group"),
    )


def forecast(body: dict[str, Any]) -> Forecast:
    return Forecast(
        body["topic"],
        body["start"],
        float(body["step"]),
        tuple(body["counts"]),
        body["later"],
    )
