"""``run_due``: every job due before a given time, through its handler, in
due order, without waiting (the model is in timeline.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from chronoq.backoff import Backoff
from chronoq.errors import InvalidInput
from chronoq.job import YEAR_10000
from chronoq.queue import Queue
from chronoq.testing.handling import Caller, Handler, Handlers, handle
from chronoq.testing.report import Report, Run
from chronoq.testing.timeline import RunError, Timeline, wall_ms
from chronoq.worker import Bury, Retry, Worker

__all__ = ["RunError", "run_due"]


def run_due(
    queue: Queue,
    handlers: Mapping[str, Handler] | Worker,
    *,
    until: float | timedelta | datetime = 0.0,
    backoff: Backoff | Mapping[str, Backoff] | None = None,
    raise_errors: bool = False,
    max_runs: int = 10_000,
) -> Report:
    """Run every job of the handlers' topics that is due at or before
    ``until`` through its handler, one at a time, in due order, at once
    (docs/testing.md).

    ``until``: seconds from now, a ``timedelta`` from now, or a ``datetime``
    (naive means UTC, as for ``put``); 0 runs what is due now. ``handlers``:
    topic -> callable taking a ``Reservation`` (as for a ``Worker``), or a
    ``Worker`` (its handlers and backoffs).

    The run keeps a clock of its own: it starts at now, jumps to the next
    due time when nothing is due (never past ``until``), is never behind the
    wall clock between handler calls, and stands still while a handler
    runs. A job runs when due on it: one that a handler puts or retries is
    due its delay after the clock's time then, and one due after ``until``
    never runs. Among jobs due together, a topic's run in the order its
    reserve hands them out (highest priority first); of several topics, the
    one whose next job was due soonest goes first. Handlers see the job as
    the store hands it out (``job.due_at`` is the store's).

    Outcomes follow the worker: a return acks; ``chronoq.Retry(delay)`` and
    any other exception nack (after ``delay``, or the topic's ``backoff``,
    else the queue's), or move the job to dead on its last attempt;
    ``chronoq.Bury`` buries. With ``raise_errors``, the first exception
    other than ``Retry`` and ``Bury`` is raised once its job is settled.

    Afterwards every job left delayed in the store, of any topic, is due
    ``report.skipped`` seconds sooner than before: the store shows, on the
    wall clock, what it would at ``until``. Jobs of paused topics do not
    run; jobs reserved by another consumer are left alone. Raises
    ``RunError`` after ``max_runs`` handler calls (a handler that puts a job
    due at once on every run never ends), or when a due job is not handed
    out (another consumer is taking jobs)."""
    if not isinstance(queue, Queue):
        raise InvalidInput(
            f"queue must be a chronoq.Queue (chronoq.connect), got {queue!r}; for an "
            "AsyncQueue, open a Queue on the same store URL for the test"
        )
    table = Handlers.of(handlers, backoff)
    start = wall_ms()
    end = _until_ms(until, start)
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise InvalidInput(f"max_runs must be an integer >= 1, got {max_runs!r}")
    timeline = Timeline(queue, table.topics, start, end)
    runs: list[Run] = []
    reached = False
    try:
        with Caller() as caller:
            while (job := timeline.next_job()) is not None:
                if len(runs) >= max_runs:
                    raise RunError(_runaway(runs, max_runs))
                leased = timeline.lease(job)
                if leased is None:
                    continue
                reservation, due = leased
                run = handle(queue, table, reservation, caller, due, timeline.clock)
                runs.append(run)
                timeline.follow((run.topic, run.id))
                error = run.error
                if raise_errors and error is not None and not isinstance(error, Retry | Bury):
                    raise error
        reached = True
    finally:
        # an early end (an error) leaves the run's clock where it got to
        skipped = timeline.close(end if reached else None)
    return Report(runs, end, skipped / 1000)


def _runaway(runs: list[Run], max_runs: int) -> str:
    topics = sorted({run.topic for run in runs[-100:]})
    return (
        f"run_due ran {max_runs} jobs and more are due (lately of {', '.join(topics)}): "
        "a handler may put a job due at once on every run. Pass a larger max_runs "
        "if that many are expected, or an earlier until"
    )


def _until_ms(until: object, now: int) -> int:
    """The time asked for, ms since the epoch."""
    if isinstance(until, datetime):
        moment = until if until.tzinfo else until.replace(tzinfo=UTC)
        at_ms = math.floor(moment.timestamp() * 1000)
    else:
        if isinstance(until, timedelta):
            seconds = until.total_seconds()
        elif isinstance(until, int | float) and not isinstance(until, bool):
            seconds = float(until)
        else:
            seconds = math.nan
        if not (math.isfinite(seconds) and 0 <= seconds < YEAR_10000):
            raise InvalidInput(
                "until must be seconds from now (>= 0), a timedelta from now or a "
                f"datetime, got {until!r}"
            )
        at_ms = now + round(seconds * 1000)
    if not 0 <= at_ms < YEAR_10000 * 1000:
        raise InvalidInput(f"until must fall between 1970 and the year 10000, got {until!r}")
    return at_ms
