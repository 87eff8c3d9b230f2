"""Putting jobs. With tracing on (chronoq/tracing.py), a put is the steps
of ``_traced``: a PRODUCER span around the store call, whose context goes
with the jobs; off, it is the one backend call it always was."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import datetime
from operator import itemgetter
from typing import Any

import chronoq.tracing as tracing
from chronoq.calls.call import Call, StoreSide, StoreSteps, Use, known
from chronoq.calls.checks import put_args
from chronoq.job import Job, PutResult

__all__ = ["Put", "PutMany"]

_modules = sys.modules
_TRACE = tracing.TRACE_MODULE


class Put(Call[PutResult]):
    """Put one job; due after ``delay`` seconds or at ``run_at`` (else now).

    An existing job with the same id is left as it is (``created=False``)
    unless ``replace=True`` and it is not reserved. ``traceparent``: a W3C
    trace context to keep with the job (docs/tracing.md). ``group``: the
    job's group within the topic (a tenant, say), None for the default
    group. Over HTTP, a bytes payload travels base64-encoded."""

    __slots__ = ("job", "replace", "topic")

    def __init__(
        self,
        topic: str,
        payload: Any = None,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
        id: str | None = None,
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
        unique_for: float = 0.0,
        replace: bool = False,
        traceparent: str | None = None,
        group: str | None = None,
    ) -> None:
        self.topic = topic
        self.job = Job(
            payload, delay, run_at, id, priority, ttr, max_attempts, unique_for, traceparent, group
        )
        self.replace = bool(replace)

    def store(self, side: StoreSide) -> StoreSteps[PutResult] | Use:
        if _TRACE in _modules and tracing.api._TRACER_PROVIDER is not None:  # tracing.active()
            return _one(_traced(self.topic, [self.job], side, self.replace, False))
        prepared = put_args(self.topic, [self.job], side.max_payload, False)
        return Use("put_many", (self.topic, prepared, self.replace), itemgetter(0))


class PutMany(Call[list[PutResult]]):
    """Put many jobs in one transaction; one result per job, in order.

    Every job is validated first: one invalid job raises ``InvalidJob``
    naming its index, and nothing is written. Over HTTP it is one request,
    all or nothing: a batch over the server's ``max_batch`` (1000) raises
    ``InvalidInput`` naming the limit, and nothing is written (split it
    where a partial put is fine)."""

    __slots__ = ("jobs", "replace", "topic")

    def __init__(self, topic: str, jobs: Iterable[Job], *, replace: bool = False) -> None:
        self.topic = topic
        self.jobs = list(jobs)
        self.replace = bool(replace)

    def store(self, side: StoreSide) -> StoreSteps[list[PutResult]] | Use:
        if _TRACE in _modules and tracing.api._TRACER_PROVIDER is not None and self.jobs:
            return _traced(self.topic, self.jobs, side, self.replace, True)
        prepared = put_args(self.topic, self.jobs, side.max_payload, True)
        if not prepared:
            return known([])
        return Use("put_many", (self.topic, prepared, self.replace))


def _traced(
    topic: str, jobs: list[Job], side: StoreSide, replace: bool, batch: bool
) -> StoreSteps[list[PutResult]]:
    """A put in its PRODUCER span: the span ends with the put, and with an
    error (recorded) when the put fails, the checks of its jobs included."""
    span = tracing.put_span(topic, len(jobs))
    try:
        prepared = put_args(topic, jobs, side.max_payload, batch)
        if span is not None:
            prepared = span.stamp(prepared)
        results: list[PutResult] = yield Use("put_many", (topic, prepared, replace))
    except BaseException as exc:  # the facade throws a failed step in here
        if span is not None:
            span.failed(exc)
        raise
    if span is not None:
        span.done(results)
    return results


def _one(steps: StoreSteps[list[PutResult]]) -> StoreSteps[PutResult]:
    return (yield from steps)[0]
