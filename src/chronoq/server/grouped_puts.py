"""Single puts of many requests as few store calls: the puts of one topic
(and one ``replace``) that meet at the store go as one ``put_many``
(batching.py's group commit). Every protocol's single put goes this way: the
/v1 put, and the pushes of the Youzan and ouqiang protocols with their index
entries (byid.py); the app makes one for all of them, so a /v1 put and a
push to one topic may share a call. With tracing on, each put has its own
PRODUCER span, in its request's trace, and its job that span's context: the
group's call, made in the task of the request that came first, makes none."""

from __future__ import annotations

import contextlib
import dataclasses

import chronoq.tracing as tracing
from chronoq.aio import AsyncQueue
from chronoq.errors import InvalidJob, PayloadTooLarge
from chronoq.job import Job, PutResult
from chronoq.server.batching import Coalescer

__all__ = ["GroupedPuts"]


def _alone(exc: InvalidJob) -> InvalidJob:
    """The refusal of one job of a group as its own put would raise it: of
    the same type and sizes, without the group's index."""
    message = str(exc).split(": ", 1)[-1]  # after "job #i of the batch"
    if isinstance(exc, PayloadTooLarge):
        return PayloadTooLarge(message, exc.size, exc.limit)
    return InvalidJob(message)


class GroupedPuts:
    def __init__(self, queue: AsyncQueue) -> None:
        self.q = queue
        self._groups: Coalescer[tuple[str, bool], Job, PutResult | InvalidJob] = Coalescer(
            self._put_group
        )

    async def put(self, topic: str, job: Job, *, replace: bool = False) -> PutResult:
        """``put_many(topic, [job], replace=replace)`` with whatever other puts
        of the topic meet it; raises ``InvalidJob`` for this job alone."""
        span = tracing.put_span(topic, 1) if tracing.active() else None
        if span is None:
            return await self._put(topic, job, replace)
        if job.traceparent is None and span.traceparent is not None:
            job = dataclasses.replace(job, traceparent=span.traceparent)
        try:
            result = await self._put(topic, job, replace)
        except BaseException as exc:
            span.failed(exc)
            raise
        span.done([result])
        return result

    async def _put(self, topic: str, job: Job, replace: bool) -> PutResult:
        result = await self._groups.call((topic, replace), job)
        if isinstance(result, InvalidJob):
            raise result
        return result

    async def _put_group(
        self, key: tuple[str, bool], jobs: list[Job]
    ) -> list[PutResult | InvalidJob]:
        """One put_many for the group. It checks every job before it writes
        any, so a bad job (named by its index) is answered alone and the
        others go again without it: in the usual group, with no bad job, each
        job is checked once."""
        topic, replace = key
        results: list[PutResult | InvalidJob | None] = [None] * len(jobs)
        left = list(range(len(jobs)))
        while left:
            try:
                # each put made its own span (put): this call makes none
                with tracing.quiet() if tracing.active() else contextlib.nullcontext():
                    done = await self.q.put_many(topic, [jobs[i] for i in left], replace=replace)
            except InvalidJob as exc:
                if exc.index is None:
                    raise
                results[left.pop(exc.index)] = _alone(exc)
                continue
            for i, result in zip(left, done, strict=True):
                results[i] = result
            break
        return [result for result in results if result is not None]
