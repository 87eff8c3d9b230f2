"""A put's PRODUCER span, on SQLite and Redis, through both store facades:
its attributes, its context stored with the job, its end with an error when
the put fails; and with no tracer provider set, no span and no context."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import chronoq
import chronoq.aio
from chronoq import Job, tracing
from chronoq.errors import InvalidJob

from .conftest import Spans, traceparent

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_put_records_a_producer_span_whose_context_the_job_keeps(
    spans: Spans, api_queue: Any, topic: str
) -> None:
    app = trace.get_tracer("app")
    with app.start_as_current_span("order placed") as parent:
        result = api_queue.put(topic, {"order": 7})
    (span,) = spans.of(SpanKind.PRODUCER)
    assert span.name == f"put {topic}"
    assert dict(span.attributes or {}) == {
        "messaging.system": "chronoq",
        "messaging.operation.type": "send",
        "messaging.operation.name": "put",
        "messaging.destination.name": topic,
        "messaging.message.id": result.id,
        "chronoq.job.created": True,
    }
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert span.status.status_code is StatusCode.UNSET
    assert api_queue.get(topic, result.id).traceparent == traceparent(span)
    (job,) = api_queue.reserve(topic)
    assert job.traceparent == traceparent(span)


def test_put_many_is_one_span_whose_context_every_job_gets(
    spans: Spans, api_queue: Any, topic: str
) -> None:
    results = api_queue.put_many(topic, [Job(1), Job(2, traceparent=TRACE), Job(3)])
    (span,) = spans.of(SpanKind.PRODUCER)
    attributes = dict(span.attributes or {})
    assert attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in attributes
    stored = [api_queue.get(topic, r.id).traceparent for r in results]
    # a job that came with a context keeps it
    assert stored == [traceparent(span), TRACE, traceparent(span)]


def test_a_failed_put_ends_its_span_with_the_error(
    spans: Spans, api_queue: Any, topic: str
) -> None:
    with pytest.raises(InvalidJob):
        api_queue.put(topic, {"not": {1, 2}})
    with pytest.raises(InvalidJob):
        api_queue.put_many(topic, [Job(1), Job(2, ttr=-1)])
    failed = spans.of(SpanKind.PRODUCER, f"put {topic}")
    assert len(failed) == 2
    for span in failed:
        assert span.end_time is not None
        assert span.status.status_code is StatusCode.ERROR
        (event,) = span.events
        assert event.name == "exception"
        assert (event.attributes or {})["exception.type"] == "chronoq.errors.InvalidJob"


def test_a_put_failing_at_the_store_ends_its_span_with_the_error(
    spans: Spans, sqlite_url: str, topic: str
) -> None:
    async def run() -> None:
        q = chronoq.aio.connect(sqlite_url)
        await q.put(topic, 1)
        await q.close()  # the store is gone: the put's store call fails
        with pytest.raises(Exception) as failure:
            await q.put(topic, 2)
        raise failure.value

    with pytest.raises(Exception) as failure:
        asyncio.run(run())
    first, failed = spans.of(SpanKind.PRODUCER)
    assert first.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR and failed.end_time is not None
    (event,) = failed.events
    assert str((event.attributes or {})["exception.type"]).endswith(type(failure.value).__name__)


def test_no_provider_no_span_and_no_context_stored(
    no_provider: None, api_queue: Any, topic: str
) -> None:
    assert tracing.available() and not tracing.active()
    first = api_queue.put(topic, 1)
    (second,) = api_queue.put_many(topic, [Job(2)])
    assert api_queue.get(topic, first.id).traceparent is None
    assert api_queue.get(topic, second.id).traceparent is None
    # a context given by the caller is the job's own: kept whatever the provider
    api_queue.put(topic, 3, id="given", traceparent=TRACE)
    assert api_queue.get(topic, "given").traceparent == TRACE


def test_a_provider_set_after_the_queue_was_made_is_seen_by_its_next_put(
    sqlite_url: str, topic: str, request: pytest.FixtureRequest
) -> None:
    with chronoq.connect(sqlite_url) as q:
        before = q.put(topic, 1)
        spans: Spans = request.getfixturevalue("spans")  # sets the provider now
        after = q.put(topic, 2)
        assert q.get(topic, before.id).traceparent is None
        (span,) = spans.of(SpanKind.PRODUCER)
        assert q.get(topic, after.id).traceparent == traceparent(span)
