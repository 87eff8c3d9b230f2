"""Every operation of the HTTP clients, written once and without I/O.

Each one is a generator that checks its arguments as ``Queue`` does (the same
functions, so the same ``InvalidInput`` before any request), yields the
``Request``s it needs, is sent each answer's JSON, and returns the value
``Queue`` would. ``Client`` drives them with blocking httpx, ``AsyncClient``
with asyncio; that is all the two differ in."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias, TypeVar
from urllib.parse import quote

from chronoq.calls import (
    LeaseRef,
    check_limit,
    error_text,
    lease_args,
    leases_of,
    optional_ttr_ms,
    requeue_ids,
    reschedule_args,
    reserve_args,
)
from chronoq.errors import InvalidInput, InvalidJob
from chronoq.http.convert import (
    encode,
    encode_jobs,
    info,
    job_body,
    put_result,
    reservation,
    run_at_s,
)
from chronoq.job import (
    Job,
    JobInfo,
    JobLease,
    PutResult,
    Reservation,
    duration_ms,
    leases_by_topic,
    validate_id,
    validate_topic,
)
from chronoq.states import State

T = TypeVar("T")

__all__ = ["Request", "Steps"]


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request of an operation. ``path`` is percent-encoded, relative
    to the server's root."""

    method: str
    path: str
    body: bytes | None = None
    params: dict[str, str] | None = None
    # sending it twice does nothing twice, so it may be sent again after a 503
    # or a dropped connection (reads, pause, resume)
    repeatable: bool = False
    wait: float = 0.0  # seconds the server may hold the answer back (long poll)
    lease: JobLease | None = None  # a lease call: its 409 is LeaseLost of this lease
    missing_ok: bool = False  # a 404 not_found is an answer (None), not NotFound


#: an operation: yields requests, is sent their answers' JSON, returns its result
Steps: TypeAlias = Generator[Request, Any, T]


def _segment(value: str) -> str:
    # a job id may hold any printable character; "." and ".." would be
    # collapsed as path steps by URL normalization unless escaped
    text = quote(value, safe="")
    return text.replace(".", "%2E") if value in (".", "..") else text


def _topic(topic: str) -> str:
    return f"/v1/topics/{_segment(validate_topic(topic))}"


def _job(held: JobLease) -> str:
    return f"{_topic(held.topic)}/jobs/{_segment(held.id)}"


def _given(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


# -- producing -------------------------------------------------------------------------


def put(topic: str, job: Job, replace: bool) -> Steps[PutResult]:
    path = _topic(_as_job_topic(topic))
    body = job_body(job, None)
    if replace:
        body["replace"] = True
    # never sent again once it may have reached the server (transport.py):
    # without an id a second put makes a second job, and with one it answers
    # created=False for the job the first one made
    answer = yield Request("POST", f"{path}/jobs", encode_jobs(body, [body], batch=False))
    return put_result(answer)


def put_many(topic: str, jobs: Iterable[Job], replace: bool) -> Steps[list[PutResult]]:
    """One request, all or nothing: a batch over the server's ``max_batch`` is
    refused whole (``InvalidInput`` with the limit), never split into requests
    of which some could succeed and others fail."""
    path = _topic(_as_job_topic(topic))
    specs = [job_body(job, index) for index, job in enumerate(jobs)]
    if not specs:
        return []
    body = {"jobs": specs, "replace": bool(replace)}
    answer = yield Request("POST", f"{path}/jobs:batch", encode_jobs(body, specs, batch=True))
    return [put_result(result) for result in answer["results"]]


def _as_job_topic(topic: str) -> str:
    """``Queue`` reports a bad topic of a put as ``InvalidJob``."""
    try:
        return validate_topic(topic)
    except InvalidInput as exc:
        raise InvalidJob(str(exc)) from None


# -- consuming -------------------------------------------------------------------------


def reserve(
    topic: str,
    count: int,
    wait: float,
    ttr: float | None,
    long_poll: float,
    clock: Callable[[], float] = time.monotonic,
) -> Steps[list[Reservation]]:
    """Long polls of at most ``long_poll`` seconds until a job comes or
    ``wait`` ends. An empty answer leased nothing, so asking again is safe;
    a reserve whose answer was lost is never sent again (see the drivers)."""
    wait_s, _ = reserve_args(topic, count, wait, ttr)
    path = _topic(topic) + "/reserve"
    end = clock() + wait_s
    while True:
        asked = clock()
        poll = round(min(max(end - asked, 0.0), long_poll), 3)
        body = encode(_given(count=count, wait=poll, ttr=None if ttr is None else float(ttr)))
        answer = yield Request("POST", path, body, wait=poll)
        jobs = [reservation(job) for job in answer["jobs"]]
        now = clock()
        # an empty answer well before its wait is up comes from a server that is
        # stopping (it answers its long polls first): asking again would spin
        if jobs or end - now < 0.001 or now < asked + poll - 0.05:
            return jobs


def _lease_call(held: JobLease, action: str, **fields: Any) -> Request:
    body = encode(_given(lease=held.token, **fields))
    return Request("POST", f"{_job(held)}/{action}", body, lease=held)


def ack(job: LeaseRef, id: str | None, lease: str | None) -> Steps[None]:
    yield _lease_call(lease_args(job, id, lease), "ack")


def ack_many(jobs: Iterable[Reservation | JobLease], max_batch: int) -> Steps[list[str]]:
    """One request per topic and ``max_batch`` leases: unlike a put, an ack of
    many is not all or nothing (each lease is acked or reported lost), so
    splitting it changes nothing."""
    lost: list[str] = []
    for topic, leases in leases_by_topic(leases_of(jobs)).items():
        for start in range(0, len(leases), max_batch):
            refs = [
                {"id": held.id, "lease": held.token} for held in leases[start : start + max_batch]
            ]
            answer = yield Request("POST", f"{_topic(topic)}/jobs:ack", encode({"leases": refs}))
            lost.extend(answer["lost"])
    return lost


def nack(
    job: LeaseRef, id: str | None, lease: str | None, delay: float | None, error: object
) -> Steps[State]:
    held = lease_args(job, id, lease)
    seconds = None if delay is None else duration_ms(delay, "delay") / 1000
    answer = yield _lease_call(held, "nack", delay=seconds, error=error_text(error))
    return State(answer["state"])


def release(job: LeaseRef, id: str | None, lease: str | None, error: object) -> Steps[None]:
    yield _lease_call(lease_args(job, id, lease), "release", error=error_text(error))


def touch(job: LeaseRef, id: str | None, lease: str | None, ttr: float | None) -> Steps[int]:
    held = lease_args(job, id, lease)
    ttr_ms = optional_ttr_ms(ttr)
    answer = yield _lease_call(held, "touch", ttr=None if ttr_ms is None else ttr_ms / 1000)
    deadline: int = answer["deadline"]
    return deadline


def bury(job: LeaseRef, id: str | None, lease: str | None, error: object) -> Steps[None]:
    yield _lease_call(lease_args(job, id, lease), "bury", error=error_text(error))


# -- by id -----------------------------------------------------------------------------


def _job_path(topic: str, id: str) -> str:
    return _job(JobLease(validate_topic(topic), validate_id(id), ""))


def get(topic: str, id: str) -> Steps[JobInfo | None]:
    answer = yield Request("GET", _job_path(topic, id), repeatable=True, missing_ok=True)
    return None if answer is None else info(answer)


def delete(topic: str, id: str) -> Steps[bool]:
    answer = yield Request("DELETE", _job_path(topic, id))
    return bool(answer["deleted"])


def reschedule(
    topic: str, id: str, delay: float | None, run_at: datetime | float | None
) -> Steps[bool]:
    delay_ms, _ = reschedule_args(topic, id, delay, run_at)
    body = {"delay": delay_ms / 1000} if run_at is None else {"run_at": run_at_s(run_at)}
    answer = yield Request("POST", _job_path(topic, id) + "/reschedule", encode(body))
    return bool(answer["rescheduled"])


# -- topic-wide ------------------------------------------------------------------------


def stats(topic: str) -> Steps[dict[str, Any]]:
    answer: dict[str, Any] = yield Request("GET", _topic(topic) + "/stats", repeatable=True)
    return answer


def topics() -> Steps[list[str]]:
    answer = yield Request("GET", "/v1/topics", repeatable=True)
    return list(answer["topics"])


def dead(topic: str, limit: int) -> Steps[list[JobInfo]]:
    check_limit(limit)
    params = {"limit": str(limit)}
    answer = yield Request("GET", _topic(topic) + "/dead", params=params, repeatable=True)
    return [info(job) for job in answer["jobs"]]


def requeue(topic: str, ids: Sequence[str] | None) -> Steps[int]:
    named = requeue_ids(topic, ids)
    body = encode({} if named is None else {"ids": named})
    answer = yield Request("POST", _topic(topic) + "/dead/requeue", body)
    return int(answer["requeued"])


def purge(topic: str) -> Steps[int]:
    answer = yield Request("POST", _topic(topic) + "/purge")
    return int(answer["purged"])


def set_paused(topic: str, paused: bool) -> Steps[None]:
    action = "pause" if paused else "resume"
    yield Request("POST", f"{_topic(topic)}/{action}", repeatable=True)
