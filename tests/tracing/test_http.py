"""Over HTTP: the clients send the caller's context (``traceparent``), the
server answers each request in a SERVER span continuing it, and a job put
there keeps a context of the caller's trace; a REST put may give the job's
context in its body (producers without OpenTelemetry's propagators). The
server runs in this process (uvicorn in a thread), so its spans are in the
same exporter as the client's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind

import chronoq.http

from .conftest import Spans, traceparent

WAIT_S = 20.0


def ended(spans: Spans, kind: SpanKind, name: str | None = None, count: int = 1) -> list[Any]:
    """The spans of ``kind``, once ``count`` ended: the server ends a request's
    span after its answer went out, so maybe after the client read it."""
    end = time.monotonic() + WAIT_S
    while len(found := spans.of(kind, name)) < count:
        assert time.monotonic() < end, f"no {count} {kind} span(s) {name or ''} ended"
        time.sleep(0.01)
    return found


TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


def _put_from(spans: Spans, url: str, topic: str, kind: str) -> tuple[str, Any]:
    """A put by a client of ``kind`` inside a caller's span: its trace id, and the result."""
    app = trace.get_tracer("app")
    with app.start_as_current_span("checkout") as caller:
        if kind == "sync":
            with chronoq.http.Client(url) as client:
                result = client.put(topic, {"n": 1})
        else:

            async def put() -> Any:
                async with chronoq.http.AsyncClient(url) as client:
                    return await client.put(topic, {"n": 1})

            result = asyncio.run(put())
    return f"{caller.get_span_context().trace_id:032x}", result


def test_a_put_over_http_keeps_the_callers_trace(spans: Spans, server: Any, topic: str) -> None:
    for kind in ("sync", "aio"):
        spans.exporter.clear()
        trace_id, result = _put_from(spans, server.url, topic, kind)
        (caller,) = spans.of(SpanKind.INTERNAL, "checkout")
        (request,) = ended(spans, SpanKind.SERVER, "POST /v1/topics/{topic}/jobs")
        (producer,) = spans.of(SpanKind.PRODUCER)
        attributes = dict(request.attributes or {})
        assert attributes["http.route"] == "/v1/topics/{topic}/jobs"
        assert attributes["http.response.status_code"] == 201
        assert request.parent is not None and request.parent.span_id == caller.context.span_id
        assert producer.parent is not None and producer.parent.span_id == request.context.span_id
        assert producer.attributes["messaging.message.id"] == result.id  # type: ignore[index]
        with chronoq.http.Client(server.url) as client:
            stored = client.get(topic, result.id).traceparent
        assert stored == traceparent(producer)
        assert stored.split("-")[1] == trace_id


def test_a_batch_over_http_is_one_producer_span_in_the_request(
    spans: Spans, server: Any, topic: str
) -> None:
    with chronoq.http.Client(server.url) as client:
        results = client.put_many(topic, [chronoq.Job(1), chronoq.Job(2, traceparent=TRACE)])
        (request,) = ended(spans, SpanKind.SERVER, "POST /v1/topics/{topic}/jobs:batch")
        (producer,) = spans.of(SpanKind.PRODUCER)
        assert producer.parent is not None and producer.parent.span_id == request.context.span_id
        assert [client.get(topic, r.id).traceparent for r in results] == [
            traceparent(producer),
            TRACE,
        ]
        jobs = client.reserve(topic, 2)
    assert sorted(job.traceparent for job in jobs) == sorted([traceparent(producer), TRACE])


def test_single_puts_grouped_at_the_store_keep_their_own_traces(
    spans: Spans, server: Any, topic: str
) -> None:
    """Puts that meet at the store go as one call (server/grouped_puts.py),
    made in the task of the first: each job still gets its own request's trace."""

    async def put_many_at_once() -> list[tuple[str, str]]:
        app = trace.get_tracer("app")
        async with chronoq.http.AsyncClient(server.url) as client:

            async def one(n: int) -> tuple[str, str]:
                with app.start_as_current_span(f"caller {n}") as caller:
                    result = await client.put(topic, n)
                return f"{caller.get_span_context().trace_id:032x}", result.id

            return await asyncio.gather(*(one(n) for n in range(20)))

    puts = asyncio.run(put_many_at_once())
    with chronoq.http.Client(server.url) as client:
        for trace_id, job_id in puts:
            assert client.get(topic, job_id).traceparent.split("-")[1] == trace_id
    assert len(spans.of(SpanKind.PRODUCER)) == 20


def test_a_rest_put_may_give_the_jobs_context_in_its_body(
    spans: Spans, server: Any, topic: str
) -> None:
    with httpx.Client(base_url=server.url) as http:
        put = http.post(f"/v1/topics/{topic}/jobs", json={"payload": 1, "traceparent": TRACE})
        assert put.status_code == 201, put.text
        batch = http.post(
            f"/v1/topics/{topic}/jobs:batch",
            json={"jobs": [{"payload": 2, "traceparent": OTHER}, {"payload": 3}]},
        )
        assert batch.status_code == 200, batch.text
        bad = http.post(f"/v1/topics/{topic}/jobs", json={"traceparent": "00-zz"})
        assert bad.status_code == 400 and "traceparent" in bad.text
        reserved = http.post(f"/v1/topics/{topic}/reserve", json={"count": 3}).json()["jobs"]
    (producer,) = [
        s
        for s in spans.of(SpanKind.PRODUCER)
        if "messaging.batch.message_count" in (s.attributes or {})
    ]
    assert {job["payload"]: job.get("traceparent") for job in reserved} == {
        1: TRACE,
        2: OTHER,
        3: traceparent(producer),
    }


def test_no_provider_no_header_and_no_context(no_provider: None, server: Any, topic: str) -> None:
    with chronoq.http.Client(server.url) as client:
        result = client.put(topic, 1)
        assert client.get(topic, result.id).traceparent is None
        client.put(topic, 2, id="given", traceparent=TRACE)
        (first, given) = client.reserve(topic, 2)
    assert (first.traceparent, given.traceparent) == (None, TRACE)
