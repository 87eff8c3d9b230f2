"""Handlers run in CONSUMER spans when tracing is on (chronoq/tracing.py):
each handler is wrapped once, when a run starts, and the wrapper asks per
job whether a tracer provider is set, so one set later is seen by the next
job. The span is current while the handler runs, in whichever place it runs
(a handler thread, the loop, a task), so the handler's own spans are its
children; it is linked to the context stored with the job, and ends with
the job's outcome (outcomes.py)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import chronoq.tracing as tracing
from chronoq.job import Reservation
from chronoq.worker.outcomes import outcome_of

__all__ = ["traced_handlers"]

Handler = Callable[[Reservation], Any]


def traced_handlers(
    handlers: Mapping[str, Handler], is_async: Mapping[str, bool]
) -> dict[str, Handler]:
    """``handlers``, each in its span; as they are without the OpenTelemetry API."""
    if not tracing.available():
        return dict(handlers)
    return {
        topic: _traced_async(handler) if is_async[topic] else _traced(handler)
        for topic, handler in handlers.items()
    }


def _traced(handler: Handler) -> Handler:
    def run(job: Reservation) -> Any:
        if not tracing.active():
            return handler(job)
        span = tracing.Processing(job)
        try:
            with span.current():
                result = handler(job)
        except BaseException as exc:
            span.end(outcome_of(job, exc), exc)
            raise
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            return _ended_after(span, job, result)
        span.end("ack")
        return result

    return run


def _traced_async(handler: Handler) -> Handler:
    async def run(job: Reservation) -> Any:
        if not tracing.active():
            return await handler(job)
        span = tracing.Processing(job)
        try:
            with span.current():
                result = await handler(job)
        except asyncio.CancelledError as exc:  # released at shutdown, or cancelled
            span.end("cancelled", exc)
            raise
        except BaseException as exc:
            span.end(outcome_of(job, exc), exc)
            raise
        span.end("ack")
        return result

    return run


async def _ended_after(span: tracing.Processing, job: Reservation, result: Awaitable[Any]) -> Any:
    try:
        with span.current():
            value = await result
    except BaseException as exc:
        span.end(outcome_of(job, exc), exc)
        raise
    span.end("ack")
    return value
