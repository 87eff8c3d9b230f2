"""The worker runs each handler in a CONSUMER span linked to the context
stored with its job, current while the handler runs, with the job's topic,
id, attempt and outcome; a retry keeps the job's first context. Threads,
the event loop (async handlers), SQLite and Redis."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import chronoq
from chronoq import Bury, Reservation, Retry, Worker
from chronoq.tracing import quiet

from .conftest import Spans, traceparent

WAIT_S = 20.0


def wait_until(condition: Callable[[], Any]) -> None:
    end = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {condition}"
        time.sleep(0.01)


@contextmanager
def running(worker: Worker) -> Iterator[None]:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        worker.stop(now=True)
        thread.join(WAIT_S)
    assert not thread.is_alive()


def consumer_spans(spans: Spans, topic: str, count: int) -> list[ReadableSpan]:
    wait_until(lambda: len(spans.of(SpanKind.CONSUMER)) >= count)
    found = spans.of(SpanKind.CONSUMER)
    assert [s.name for s in found] == [f"process {topic}"] * count
    return sorted(found, key=lambda s: s.start_time or 0)


def linked_to(span: ReadableSpan) -> list[str]:
    return [
        f"00-{link.context.trace_id:032x}-{link.context.span_id:016x}-"
        f"{int(link.context.trace_flags):02x}"
        for link in span.links
    ]


def test_a_handler_runs_in_a_consumer_span_linked_to_its_put(
    spans: Spans, store_url: str, topic: str
) -> None:
    inner: list[Any] = []

    def handler(job: Reservation) -> None:
        with trace.get_tracer("app").start_as_current_span("charge card") as child:
            inner.append(child)

    with chronoq.connect(store_url) as q:
        put = q.put(topic, {"n": 1})
        (producer,) = spans.of(SpanKind.PRODUCER)
        with running(Worker(q, {topic: handler}, recurring=False)):
            (span,) = consumer_spans(spans, topic, 1)
    assert linked_to(span) == [traceparent(producer)]
    assert span.parent is None  # a link, not a parent: the run is a trace of its own
    assert dict(span.attributes or {}) == {
        "messaging.system": "chronoq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": topic,
        "messaging.message.id": put.id,
        "chronoq.job.attempt": 1,
        "chronoq.job.outcome": "ack",
    }
    assert span.status.status_code is StatusCode.UNSET
    (child,) = spans.of(SpanKind.INTERNAL, "charge card")
    assert child.parent is not None and child.parent.span_id == span.context.span_id


def test_retries_keep_the_first_context_and_each_run_tells_its_outcome(
    spans: Spans, store_url: str, topic: str
) -> None:
    def handler(job: Reservation) -> None:
        if job.id == "buried":
            raise Bury("no such customer")
        if job.attempts == 1:
            raise Retry(delay=0)
        if job.attempts == 2:
            raise ValueError("flaky")

    with chronoq.connect(store_url) as q:
        q.put(topic, 1, id="retried")
        q.put(topic, 2, id="buried", max_attempts=1)
        contexts = {s.attributes["messaging.message.id"]: traceparent(s) for s in spans.all()}  # type: ignore[index]
        with running(
            Worker(q, {topic: handler}, recurring=False, backoff=chronoq.Backoff(0.01, 1, 0.01))
        ):
            found = consumer_spans(spans, topic, 4)
        assert q.get(topic, "retried") is None  # acked at its third attempt
    runs = [
        (
            s.attributes["messaging.message.id"],  # type: ignore[index]
            s.attributes["chronoq.job.attempt"],  # type: ignore[index]
            s.attributes["chronoq.job.outcome"],  # type: ignore[index]
            s.status.status_code,
            linked_to(s),
        )
        for s in found
    ]
    assert sorted(runs, key=str) == sorted(
        [
            ("retried", 1, "retry", StatusCode.ERROR, [contexts["retried"]]),
            ("retried", 2, "retry", StatusCode.ERROR, [contexts["retried"]]),
            ("retried", 3, "ack", StatusCode.UNSET, [contexts["retried"]]),
            ("buried", 1, "bury", StatusCode.ERROR, [contexts["buried"]]),
        ],
        key=str,
    )
    failed = next(s for s in found if s.attributes["chronoq.job.attempt"] == 2)  # type: ignore[index]
    assert [e.name for e in failed.events] == ["exception"]
    assert failed.status.description == "flaky"


def test_an_async_handler_runs_in_its_span_and_a_last_failure_is_dead(
    spans: Spans, sqlite_url: str, topic: str
) -> None:
    seen: list[Any] = []

    async def handler(job: Reservation) -> None:
        await asyncio.sleep(0)
        seen.append(trace.get_current_span().get_span_context().span_id)
        raise RuntimeError("down")

    with chronoq.connect(sqlite_url) as q:
        q.put(topic, 1, id="last", max_attempts=1)
        with running(Worker(q, {topic: handler}, recurring=False)):
            (span,) = consumer_spans(spans, topic, 1)
    assert seen == [span.context.span_id]
    assert span.attributes["chronoq.job.outcome"] == "dead"  # type: ignore[index]
    assert span.status.status_code is StatusCode.ERROR


def test_a_job_without_a_context_is_processed_in_a_span_without_a_link(
    spans: Spans, sqlite_url: str, topic: str
) -> None:
    with chronoq.connect(sqlite_url) as q:
        with quiet():  # no put span, so no context for the job
            q.put(topic, 1, id="plain")
        assert q.get(topic, "plain").traceparent is None
        with running(Worker(q, {topic: lambda job: None}, recurring=False)):
            (span,) = consumer_spans(spans, topic, 1)
    assert span.links == ()
    assert span.attributes["chronoq.job.outcome"] == "ack"  # type: ignore[index]


def test_no_provider_the_handler_runs_without_a_span(
    no_provider: None, sqlite_url: str, topic: str
) -> None:
    seen: list[bool] = []
    done = threading.Event()

    def handler(job: Reservation) -> None:
        seen.append(trace.get_current_span().get_span_context().is_valid)
        done.set()

    with chronoq.connect(sqlite_url) as q:
        q.put(topic, 1)
        with running(Worker(q, {topic: handler}, recurring=False)):
            assert done.wait(WAIT_S)
    assert seen == [False]
