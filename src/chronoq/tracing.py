"""OpenTelemetry tracing (docs/tracing.md): the only module that imports
``opentelemetry``, and only when it is installed (the ``otel`` extra).

Off unless a tracer provider is set: ``active()`` says whether one is. It
is asked once per put, per handler run and per request, so it reads the
API's global (``opentelemetry.trace._TRACER_PROVIDER``, None until
``set_tracer_provider``) rather than calling ``get_tracer_provider()``,
which looks in ``os.environ`` on every call while none is set; a put reads
it inline (``api``). A provider set after a ``Queue`` was made is seen by
its next put, and by a worker's next job.

The spans follow OpenTelemetry's messaging conventions: a put is a
PRODUCER span (``put <topic>``; one for a ``put_many``, whose jobs all get
its context), a handler run a CONSUMER span (``process <topic>``) linked to
the context stored with the job, and a request to ``chronoq serve`` a
SERVER span (``<method> <route>``) continuing the caller's trace.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from chronoq.job import NewJob, PutResult, Reservation

__all__ = [
    "TRACE_MODULE",
    "Processing",
    "Producing",
    "Serving",
    "active",
    "api",
    "available",
    "outgoing_headers",
    "put_span",
    "quiet",
    "server_span",
    "traceparent_of",
]

#: the API's module that holds the global provider: none can be set before it is imported
TRACE_MODULE = "opentelemetry.trace"
_ENV = "OTEL_PYTHON_TRACER_PROVIDER"  # a provider the API loads when first asked for one
_installed = importlib.util.find_spec("opentelemetry") is not None
# the API's modules, imported by _load once the application imported the API:
# a process that never does pays neither the import nor its memory
_trace: Any = None
_context: Any = None

SYSTEM = "chronoq"
# what instrumentations set to keep spans of theirs from being made (for one
# put of the server's grouped puts, which made its own per request)
_QUIET = "suppress_instrumentation"


def available() -> bool:
    """Whether the OpenTelemetry API is installed (spans may be turned on)."""
    return _installed


class _Unseen:
    """``api`` before ``_load``: asks whether the application imported the API."""

    @property
    def _TRACER_PROVIDER(self) -> object | None:  # the name of the API's global
        if TRACE_MODULE not in sys.modules:
            return None
        provider: object | None = _load()._TRACER_PROVIDER
        return provider


class _Asking:
    """``api`` in an API release without the global: asks the API each time."""

    @property
    def _TRACER_PROVIDER(self) -> object | None:  # the name of the API's global
        provider = _trace.get_tracer_provider()
        return None if isinstance(provider, _trace.ProxyTracerProvider) else provider


def _load() -> Any:
    """Import the API's modules; ``api`` becomes its module of the global.
    Not ``opentelemetry.propagate``, whose import reads every installed
    package's entry points (about 12 M instructions, once): its users import it when
    tracing is on (``_propagation``)."""
    global _trace, _context, api
    from opentelemetry import context, trace

    _trace, _context = trace, context
    if _ENV in os.environ:
        trace.get_tracer_provider()  # loads it now: the global is read from here on
    api = trace if hasattr(trace, "_TRACER_PROVIDER") else _Asking()
    return api


#: ``TRACE_MODULE in sys.modules and api._TRACER_PROVIDER is not None`` says
#: whether a tracer provider is set: a put reads it inline (calls/producing.py),
#: where a call of ``active`` was 0.6% of a put on SQLite
api: Any = _Unseen() if _installed else SimpleNamespace(_TRACER_PROVIDER=None)
if _installed and _ENV in os.environ:
    _load()


def active() -> bool:
    """Whether spans are made: a tracer provider is set (see the module's docstring)."""
    return TRACE_MODULE in sys.modules and api._TRACER_PROVIDER is not None


def _tracer() -> Any:
    if _trace is None:
        _load()
    return _trace.get_tracer("chronoq")


def traceparent_of(span: Any) -> str | None:
    """The W3C ``traceparent`` of a span, None for an invalid one (a no-op tracer's)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _linked(traceparent: str | None) -> list[Any]:
    """A link to the context stored with a job, if it has one."""
    if traceparent is None or _trace is None:
        return []
    context = _trace.SpanContext(
        int(traceparent[3:35], 16),
        int(traceparent[36:52], 16),
        is_remote=True,
        trace_flags=_trace.TraceFlags(int(traceparent[53:55], 16)),
    )
    return [_trace.Link(context)]


def _fail(span: Any, exc: BaseException) -> None:
    assert _trace is not None
    span.record_exception(exc)
    text = str(exc) or type(exc).__name__
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, text))


# -- producing ---------------------------------------------------------------------------


class Producing:
    """The PRODUCER span of one put (or put_many): its context goes with
    every job that has none of its own."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    @property
    def traceparent(self) -> str | None:
        return traceparent_of(self._span)

    def stamp(self, jobs: list[NewJob]) -> list[NewJob]:
        """``jobs`` with this put's context where they have none."""
        traceparent = traceparent_of(self._span)
        if traceparent is None:
            return jobs
        return [
            job if job.traceparent is not None else job._replace(traceparent=traceparent)
            for job in jobs
        ]

    def done(self, results: Sequence[PutResult]) -> None:
        span = self._span
        if len(results) == 1:
            span.set_attribute("messaging.message.id", results[0].id)
            span.set_attribute("chronoq.job.created", results[0].created)
        span.end()

    def failed(self, exc: BaseException) -> None:
        _fail(self._span, exc)
        self._span.end()


def put_span(topic: str, count: int) -> Producing | None:
    """A put's span (not made current: nothing runs under it but the store
    call), or None while spans are suppressed (``quiet``)."""
    assert _trace is not None
    if _context.get_value(_QUIET):
        return None
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "put",
        "messaging.destination.name": topic,
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    span = _tracer().start_span(
        f"put {topic}", kind=_trace.SpanKind.PRODUCER, attributes=attributes
    )
    return Producing(span)


@contextmanager
def quiet() -> Iterator[None]:
    """No put spans within (the context of this task or thread)."""
    if _trace is None:
        yield
        return
    token = _context.attach(_context.set_value(_QUIET, True))
    try:
        yield
    finally:
        _context.detach(token)


# -- consuming ----------------------------------------------------------------------------


class Processing:
    """The CONSUMER span of one handler run, current while the handler runs
    (its own spans are children of it), linked to the job's stored context."""

    __slots__ = ("_span", "job")

    def __init__(self, job: Reservation) -> None:
        assert _trace is not None
        self.job = job
        self._span = _tracer().start_span(
            f"process {job.topic}",
            kind=_trace.SpanKind.CONSUMER,
            links=_linked(job.traceparent),
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": job.topic,
                "messaging.message.id": job.id,
                "chronoq.job.attempt": job.attempts,
            },
        )

    @contextmanager
    def current(self) -> Iterator[None]:
        assert _trace is not None
        with _trace.use_span(self._span, end_on_exit=False, record_exception=False):
            yield

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """``outcome``: what the worker does with the job (ack, retry, dead, bury)."""
        span = self._span
        span.set_attribute("chronoq.job.outcome", outcome)
        if error is not None:
            _fail(span, error)
        span.end()


# -- HTTP ------------------------------------------------------------------------------------


def _propagation() -> Any:
    from opentelemetry import propagate

    return propagate


def outgoing_headers() -> dict[str, str] | None:
    """The headers that carry the caller's context to the server
    (``traceparent``, by the global propagator), or None."""
    if not active():
        return None
    carrier: dict[str, str] = {}
    _propagation().inject(carrier)
    return carrier or None


class Serving:
    """The SERVER span of one request, current while it is answered."""

    __slots__ = ("_span", "method")

    def __init__(self, span: Any, method: str) -> None:
        self._span = span
        self.method = method

    def answered(self, route: str, status: int) -> None:
        span = self._span
        span.update_name(f"{self.method} {route}")
        span.set_attribute("http.route", route)
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            assert _trace is not None
            span.set_status(_trace.Status(_trace.StatusCode.ERROR))


@contextmanager
def server_span(
    method: str, path: str, headers: Iterable[tuple[bytes, bytes]]
) -> Iterator[Serving]:
    """A request's span, a child of the context its headers carry."""
    assert _trace is not None
    carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}
    span = _tracer().start_span(
        method,
        context=_propagation().extract(carrier),
        kind=_trace.SpanKind.SERVER,
        attributes={"http.request.method": method, "url.path": path},
    )
    serving = Serving(span, method)
    try:
        with _trace.use_span(span, end_on_exit=False, record_exception=False):
            yield serving
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        span.end()
