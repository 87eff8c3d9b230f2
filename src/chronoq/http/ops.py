"""Every operation of the HTTP clients as requests, without I/O.

The operations are those of ``Queue``, defined once in ``chronoq.calls``: a
``Call`` arrives with its arguments checked (the same ``InvalidInput``
before any request). ``steps_of`` turns it into a generator that yields the
``Request``s it needs, is sent each answer's JSON, and returns the value
``Queue`` would. ``Client`` drives them with blocking httpx, ``AsyncClient``
with asyncio; that is all the two differ in."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar
from urllib.parse import quote

from chronoq.calls.by_id import Delete, Get, Reschedule
from chronoq.calls.call import Call
from chronoq.calls.consuming import Ack, AckMany, Bury, Nack, Release, Reserve, Touch
from chronoq.calls.flow import ClearLimits, SetLimits, TopicLimits
from chronoq.calls.producing import Put, PutMany
from chronoq.calls.topicwide import (
    Dead,
    DueForecast,
    Pause,
    Purge,
    Requeue,
    Resume,
    Stats,
    Topics,
)
from chronoq.errors import InvalidInput, InvalidJob
from chronoq.http.convert import (
    encode,
    encode_jobs,
    forecast,
    info,
    job_body,
    put_result,
    reservation,
    run_at_s,
)
from chronoq.job import (
    Forecast,
    JobInfo,
    JobLease,
    PutResult,
    Reservation,
    leases_by_topic,
    validate_topic,
)
from chronoq.limits import Limits as TopicLimitsValue
from chronoq.states import State

T = TypeVar("T")
C = TypeVar("C", bound=Call[Any])

__all__ = ["Limits", "Request", "Steps", "served", "steps_of"]


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


class Limits(Protocol):
    """What the steps read of a client's settings (transport.Settings)."""

    @property
    def long_poll(self) -> float: ...

    @property
    def max_batch(self) -> int: ...


_STEPS: dict[type[Call[Any]], Callable[[Any, Limits], Steps[Any]]] = {}


def steps_of(call: Call[T], limits: Limits) -> Steps[T]:
    """The requests of ``call`` (the operations in ``chronoq.calls.surface``
    that every facade offers)."""
    make = _STEPS.get(type(call))
    if make is None:
        raise InvalidInput(f"the HTTP API has no {type(call).__name__} operation")
    return make(call, limits)


def _over_http(
    kind: type[C],
) -> Callable[[Callable[[C, Limits], Steps[Any]]], Callable[[C, Limits], Steps[Any]]]:
    """Register the requests of the calls of ``kind``: a function that takes
    exactly that call (mypy checks it)."""

    def register(steps: Callable[[C, Limits], Steps[Any]]) -> Callable[[C, Limits], Steps[Any]]:
        _STEPS[kind] = steps
        return steps

    return register


def served(kind: type[Call[Any]]) -> bool:
    """Whether the HTTP API has the calls of ``kind``."""
    return kind in _STEPS


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


@_over_http(Put)
def _put(call: Put, limits: Limits) -> Steps[PutResult]:
    path = _topic(_as_job_topic(call.topic))
    body = job_body(call.job, None)
    if call.replace:
        body["replace"] = True
    # never sent again once it may have reached the server (transport.py):
    # without an id a second put makes a second job, and with one it answers
    # created=False for the job the first one made
    answer = yield Request("POST", f"{path}/jobs", encode_jobs(body, [body], batch=False))
    return put_result(answer)


@_over_http(PutMany)
def _put_many(call: PutMany, limits: Limits) -> Steps[list[PutResult]]:
    """One request, all or nothing: a batch over the server's ``max_batch`` is
    refused whole (``InvalidInput`` with the limit), never split into requests
    of which some could succeed and others fail."""
    path = _topic(_as_job_topic(call.topic))
    specs = [job_body(job, index) for index, job in enumerate(call.jobs)]
    if not specs:
        return []
    body = {"jobs": specs, "replace": call.replace}
    answer = yield Request("POST", f"{path}/jobs:batch", encode_jobs(body, specs, batch=True))
    return [put_result(result) for result in answer["results"]]


def _as_job_topic(topic: str) -> str:
    """``Queue`` reports a bad topic of a put as ``InvalidJob``."""
    try:
        return validate_topic(topic)
    except InvalidInput as exc:
        raise InvalidJob(str(exc)) from None


# -- consuming -------------------------------------------------------------------------


@_over_http(Reserve)
def _reserve(
    call: Reserve, limits: Limits, clock: Callable[[], float] = time.monotonic
) -> Steps[list[Reservation]]:
    """Long polls of at most ``long_poll`` seconds until a job comes or
    ``wait`` ends. An empty answer leased nothing, so asking again is safe;
    a reserve whose answer was lost is never sent again (see the drivers)."""
    path = _topic(call.topic) + "/reserve"
    ttr = None if call.ttr is None else float(call.ttr)
    end = clock() + call.wait_s
    while True:
        asked = clock()
        poll = round(min(max(end - asked, 0.0), limits.long_poll), 3)
        body = encode(_given(count=call.count, wait=poll, ttr=ttr))
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


@_over_http(Ack)
def _ack(call: Ack, limits: Limits) -> Steps[None]:
    yield _lease_call(call.held, "ack")


@_over_http(AckMany)
def _ack_many(call: AckMany, limits: Limits) -> Steps[list[str]]:
    """One request per topic and ``max_batch`` leases: unlike a put, an ack of
    many is not all or nothing (each lease is acked or reported lost), so
    splitting it changes nothing."""
    lost: list[str] = []
    step = limits.max_batch
    for topic, leases in leases_by_topic(call.leases).items():
        for start in range(0, len(leases), step):
            refs = [{"id": held.id, "lease": held.token} for held in leases[start : start + step]]
            answer = yield Request("POST", f"{_topic(topic)}/jobs:ack", encode({"leases": refs}))
            lost.extend(answer["lost"])
    return lost


@_over_http(Nack)
def _nack(call: Nack, limits: Limits) -> Steps[State]:
    if call.backoff is not None:
        raise InvalidInput(
            "over HTTP a nack without delay takes the server's backoff: pass delay= instead "
            "of backoff= (the server's config sets its backoff)"
        )
    seconds = None if call.delay_ms is None else call.delay_ms / 1000
    answer = yield _lease_call(call.held, "nack", delay=seconds, error=call.error)
    return State(answer["state"])


@_over_http(Release)
def _release(call: Release, limits: Limits) -> Steps[None]:
    yield _lease_call(call.held, "release", error=call.error)


@_over_http(Touch)
def _touch(call: Touch, limits: Limits) -> Steps[int]:
    ttr = None if call.ttr_ms is None else call.ttr_ms / 1000
    answer = yield _lease_call(call.held, "touch", ttr=ttr)
    deadline: int = answer["deadline"]
    return deadline


@_over_http(Bury)
def _bury(call: Bury, limits: Limits) -> Steps[None]:
    yield _lease_call(call.held, "bury", error=call.error)


# -- by id -----------------------------------------------------------------------------


def _job_path(topic: str, id: str) -> str:
    return _job(JobLease(topic, id, ""))


@_over_http(Get)
def _get(call: Get, limits: Limits) -> Steps[JobInfo | None]:
    path = _job_path(call.topic, call.id)
    answer = yield Request("GET", path, repeatable=True, missing_ok=True)
    return None if answer is None else info(answer)


@_over_http(Delete)
def _delete(call: Delete, limits: Limits) -> Steps[bool]:
    answer = yield Request("DELETE", _job_path(call.topic, call.id))
    return bool(answer["deleted"])


@_over_http(Reschedule)
def _reschedule(call: Reschedule, limits: Limits) -> Steps[bool]:
    if call.run_at is None:
        body = {"delay": call.delay_ms / 1000}
    else:
        body = {"run_at": run_at_s(call.run_at)}
    answer = yield Request("POST", _job_path(call.topic, call.id) + "/reschedule", encode(body))
    return bool(answer["rescheduled"])


# -- topic-wide ------------------------------------------------------------------------


@_over_http(Stats)
def _stats(call: Stats, limits: Limits) -> Steps[dict[str, Any]]:
    params = {"per_shard": "true"} if call.per_shard else {}
    if call.groups:
        params["groups"] = "true"
    path = _topic(call.topic) + "/stats"
    answer: dict[str, Any] = yield Request("GET", path, params=params or None, repeatable=True)
    return answer


@_over_http(DueForecast)
def _forecast(call: DueForecast, limits: Limits) -> Steps[Forecast]:
    # until in epoch seconds as run_at travels; the server checks it against its store's now
    params = {"until": repr(call.until_ms / 1000), "step": repr(call.step_ms / 1000)}
    path = _topic(call.topic) + "/forecast"
    return forecast((yield Request("GET", path, params=params, repeatable=True)))


@_over_http(Topics)
def _topics(call: Topics, limits: Limits) -> Steps[list[str]]:
    answer = yield Request("GET", "/v1/topics", repeatable=True)
    return list(answer["topics"])


@_over_http(Dead)
def _dead(call: Dead, limits: Limits) -> Steps[list[JobInfo]]:
    params = {"limit": str(call.limit)}
    answer = yield Request("GET", _topic(call.topic) + "/dead", params=params, repeatable=True)
    return [info(job) for job in answer["jobs"]]


@_over_http(Requeue)
def _requeue(call: Requeue, limits: Limits) -> Steps[int]:
    body = encode({} if call.ids is None else {"ids": call.ids})
    answer = yield Request("POST", _topic(call.topic) + "/dead/requeue", body)
    return int(answer["requeued"])


@_over_http(Purge)
def _purge(call: Purge, limits: Limits) -> Steps[int]:
    answer = yield Request("POST", _topic(call.topic) + "/purge")
    return int(answer["purged"])


@_over_http(Pause)
def _pause(call: Pause, limits: Limits) -> Steps[None]:
    yield Request("POST", f"{_paused(call.topic, call.group)}/pause", repeatable=True)


@_over_http(Resume)
def _resume(call: Resume, limits: Limits) -> Steps[None]:
    yield Request("POST", f"{_paused(call.topic, call.group)}/resume", repeatable=True)


def _paused(topic: str, group: str | None) -> str:
    return _topic(topic) + ("" if group is None else f"/groups/{_segment(group)}")


@_over_http(TopicLimits)
def _limits(call: TopicLimits, limits: Limits) -> Steps[TopicLimitsValue]:
    answer = yield Request("GET", _topic(call.topic) + "/limits", repeatable=True)
    return TopicLimitsValue.of_dict(answer)


@_over_http(SetLimits)
def _set_limits(call: SetLimits, limits: Limits) -> Steps[TopicLimitsValue]:
    fields = call.given.as_dict()
    fields.update({"group_" + name: value for name, value in call.defaults.as_dict().items()})
    answer = yield Request(
        "PUT",
        _topic(call.topic) + "/limits",
        body=encode(fields),
        params=None if call.group is None else {"group": call.group},
        repeatable=True,  # the same fields set twice are set once
    )
    return TopicLimitsValue.of_dict(answer)


@_over_http(ClearLimits)
def _clear_limits(call: ClearLimits, limits: Limits) -> Steps[TopicLimitsValue]:
    params = None if call.group is None else {"group": call.group}
    answer = yield Request("DELETE", _topic(call.topic) + "/limits", params=params, repeatable=True)
    return TopicLimitsValue.of_dict(answer)
