"""Fixtures of the tracing tests: the OpenTelemetry SDK's tracer provider
with its in-memory exporter, set as the global one for one test and taken
away after it (as the API's own tests do: the API lets a process set its
provider once), so that no other test runs with tracing on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import chronoq.tracing as tracing


class Spans:
    """The spans ended so far, by kind and name."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def of(self, kind: trace.SpanKind, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.all() if s.kind is kind and (name is None or s.name == name)]


def _unset() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def spans() -> Iterator[Spans]:
    """Tracing on: every span ended is in the exporter."""
    assert not tracing.active(), "a tracer provider was left set"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        yield Spans(exporter)
    finally:
        _unset()
        provider.shutdown()


@pytest.fixture
def no_provider() -> None:
    """Tracing off, as in a process that sets no provider."""
    assert not tracing.active(), "a tracer provider was left set"


def traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
