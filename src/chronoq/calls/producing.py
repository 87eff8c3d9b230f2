"""Putting jobs."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from operator import itemgetter
from typing import Any

from chronoq.calls.call import Call, StoreSide, StoreSteps, Use, known
from chronoq.calls.checks import put_args
from chronoq.job import Job, PutResult

__all__ = ["Put", "PutMany"]


class Put(Call[PutResult]):
    """Put one job; due after ``delay`` seconds or at ``run_at`` (else now).

    An existing job with the same id is left as it is (``created=False``)
    unless ``replace=True`` and it is not reserved. ``traceparent``: a W3C
    trace context to keep with the job (docs/tracing.md). Over HTTP, a bytes
    payload travels base64-encoded."""

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
    ) -> None:
        self.topic = topic
        self.job = Job(
            payload, delay, run_at, id, priority, ttr, max_attempts, unique_for, traceparent
        )
        self.replace = bool(replace)

    def store(self, side: StoreSide) -> Use:
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
        prepared = put_args(self.topic, self.jobs, side.max_payload, True)
        if not prepared:
            return known([])
        return Use("put_many", (self.topic, prepared, self.replace))
