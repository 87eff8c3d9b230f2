"""What a handler may raise to choose what happens to its job, and the log
line of each run."""

from __future__ import annotations

import logging
from collections.abc import Callable

from chronoq.calls.checks import error_text
from chronoq.job import Reservation, duration_ms

__all__ = ["Bury", "Retry", "error_of", "job_message", "line_sink", "log_outcome", "outcome_of"]

log = logging.getLogger("chronoq")


class Retry(Exception):
    """Raise in a handler to run the job again after ``delay`` seconds (None:
    the job's backoff). Counts as an attempt: once they are used up, it is dead."""

    def __init__(self, delay: float | None = None, reason: str | None = None) -> None:
        if delay is not None:
            # checked here, so that a bad delay fails in the handler (and is
            # its last_error) rather than in the nack, after the handler ended
            duration_ms(delay, "delay")
        super().__init__(reason or ("retry requested" if delay is None else f"retry in {delay} s"))
        self.delay = delay


class Bury(Exception):
    """Raise in a handler to move the job to dead at once, with ``reason`` kept
    as its ``last_error`` (for inspection and ``requeue``)."""

    def __init__(self, reason: str = "buried by its handler") -> None:
        super().__init__(reason)
        self.reason = reason


def outcome_of(job: Reservation, error: BaseException | None) -> str:
    """What the worker does with a job whose handler ended with ``error``:
    ack, bury, or a nack, which moves a job on its last attempt to dead."""
    if error is None:
        return "ack"
    if isinstance(error, Bury):
        return "bury"
    return "dead" if job.attempts >= job.max_attempts else "retry"


def error_of(exc: BaseException) -> str:
    """The ``last_error`` text of a failed run: the exception's type and message."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not keep the job from being settled
        text = "(its str() failed)"
    if not isinstance(exc, Retry | Bury):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return error_text(text) or ""  # cut to the length every last_error is cut to


_FORMAT = "job topic=%s id=%s attempt=%d outcome=%s duration_ms=%.2f%s"

#: a handler that writes job lines without a LogRecord (the CLI's, cli/joblog.py):
#: (job, elapsed_ms, outcome, error text) -> whether it wrote the line
line_sink: Callable[[Reservation, float, str, str | None], bool] | None = None


def job_message(job: Reservation, elapsed_ms: float, outcome: str, error: str | None) -> str:
    """The message of a run's line."""
    tail = "" if error is None else f" error={error!r}"
    return _FORMAT % (job.topic, job.id, job.attempts, outcome, elapsed_ms, tail)


def log_outcome(
    job: Reservation, elapsed_ms: float, outcome: str, error: BaseException | None
) -> None:
    """The INFO line of one run, with its fields also as ``record.chronoq``."""
    text = None if error is None else error_of(error)
    sink = line_sink
    if sink is not None and sink(job, elapsed_ms, outcome, text):
        return
    fields = {
        "topic": job.topic,
        "id": job.id,
        "attempt": job.attempts,
        "outcome": outcome,
        "duration_ms": round(elapsed_ms, 2),
        "error": text,
    }
    args = (
        job.topic,
        job.id,
        job.attempts,
        outcome,
        elapsed_ms,
        "" if text is None else f" error={text!r}",
    )
    # log.info() less its search of the stack for the caller (a fifth of a line's
    # cost at thousands of lines a second): the caller is always this function
    record = log.makeRecord(
        log.name,
        logging.INFO,
        __file__,
        _LINE,
        _FORMAT,
        args,
        None,
        "log_outcome",
        {"chronoq": fields},
    )
    log.handle(record)


_LINE = log_outcome.__code__.co_firstlineno  # the record's lineno: this function
