"""Handlers as ``run_due`` calls them: checked as a ``Worker`` checks them,
called one at a time (an ``async def`` on an event loop of its own), and
their jobs settled as the worker settles them (worker/session.py)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from chronoq.backoff import Backoff
from chronoq.errors import ChronoqError, InvalidInput, LeaseLost
from chronoq.job import Reservation, validate_topic
from chronoq.queue import Queue
from chronoq.states import State
from chronoq.testing.report import Outcome, Run
from chronoq.testing.timeline import RunError
from chronoq.worker import Bury, Retry, Worker
from chronoq.worker.outcomes import error_of, log_outcome
from chronoq.worker.worker import topic_backoffs

__all__ = ["Caller", "Handler", "Handlers", "handle"]

Handler = Callable[[Reservation], Any]
STOPPED = "run_due stopped before its handler ended"


@dataclass(frozen=True, slots=True)
class Handlers:
    """Each topic's handler and backoff (a topic left out nacks with the queue's)."""

    by_topic: Mapping[str, Handler]
    backoffs: Mapping[str, Backoff]

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self.by_topic)

    @classmethod
    def of(
        cls,
        handlers: Mapping[str, Handler] | Worker,
        backoff: Backoff | Mapping[str, Backoff] | None,
    ) -> Handlers:
        if isinstance(handlers, Worker):
            by_topic = dict(handlers.handlers)
            backoffs = dict(handlers.settings.backoffs) if backoff is None else {}
        elif isinstance(handlers, Mapping) and handlers:
            by_topic, backoffs = dict(handlers), {}
        else:
            raise InvalidInput(
                "handlers must be a non-empty mapping of topic to callable, or a "
                f"chronoq.Worker, got {handlers!r}"
            )
        for topic, handler in by_topic.items():
            validate_topic(topic)
            if not callable(handler):
                raise InvalidInput(f"the handler of topic {topic!r} is not callable: {handler!r}")
        if backoff is not None:
            backoffs = topic_backoffs(backoff, by_topic)
        return cls(by_topic, backoffs)


class Caller:
    """Runs what ``async def`` handlers return, on an event loop made at the
    first (one per ``run_due`` call, closed at its end)."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None

    def __enter__(self) -> Caller:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            self._runner.close()

    def call(self, handler: Handler, job: Reservation) -> Exception | None:
        """What the handler raised (None: it returned). ``RunError`` when an
        async handler's result cannot be awaited here."""
        try:
            result = handler(job)
        except Exception as exc:
            return exc
        if not inspect.isawaitable(result):
            return None
        runner = self._runner_for(result)
        try:
            runner.run(_awaited(result))
        except Exception as exc:
            return exc
        return None

    def _runner_for(self, result: Awaitable[Any]) -> asyncio.Runner:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._runner is None:
                self._runner = asyncio.Runner()
            return self._runner
        if inspect.iscoroutine(result):
            result.close()  # never to be awaited: say so without a warning
        raise RunError(
            "an async handler ran, and run_due awaits it on an event loop of its own, "
            "but this thread runs one already: from async code, call "
            "`await asyncio.to_thread(run_due, ...)`"
        )


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result


def handle(
    queue: Queue, handlers: Handlers, job: Reservation, caller: Caller, due: int, at: int
) -> Run:
    """Run the job's handler and settle the job as the worker does: ack when
    it returns; bury on ``Bury``; else nack, after ``Retry.delay`` or the
    topic's backoff (dead when its attempts are used up). ``due``: its due
    time on the run's clock; ``at``: the run's clock now."""
    started = time.perf_counter()
    try:
        error = caller.call(handlers.by_topic[job.topic], job)
    except BaseException:  # not the handler failing (Ctrl-C, RunError): ready again at once
        with contextlib.suppress(ChronoqError):  # settled by the handler, or the store is down
            queue.release(job, error=STOPPED)
        raise
    elapsed_ms = (time.perf_counter() - started) * 1000
    outcome = _settle(queue, job, error, handlers.backoffs.get(job.topic))
    log_outcome(job, elapsed_ms, outcome, error)
    return Run(job.topic, job.id, job.attempts, due, at, outcome, error, job.payload)


def _settle(
    queue: Queue, job: Reservation, error: Exception | None, backoff: Backoff | None
) -> Outcome:
    try:
        if error is None:
            queue.ack(job)
            return "ack"
        text = error_of(error)
        if isinstance(error, Bury):
            queue.bury(job, error=text)
            return "bury"
        delay = error.delay if isinstance(error, Retry) else None
        state = queue.nack(job, delay=delay, error=text, backoff=backoff)
        return "dead" if state is State.DEAD else "retry"
    except LeaseLost:
        return "lost"
