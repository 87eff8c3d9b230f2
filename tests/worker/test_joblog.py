"""The line of each run written without a LogRecord (cli/joblog.py) is the
line the text format makes of the record; it is used only while the CLI's
handler alone hears the ``chronoq`` logger."""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from chronoq.cli.joblog import BurstHandler, TextFormatter
from chronoq.job import Reservation
from chronoq.worker import outcomes
from chronoq.worker.outcomes import log_outcome

JOB = Reservation("mail", "order-7", {"n": 1}, 3, "lease", 0, 0, 0, 5, 30.0, 0)
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


@contextmanager
def text_log() -> Iterator[io.StringIO]:
    """The CLI's text log alone on the ``chronoq`` logger (pytest's own
    capturing handlers set aside meanwhile), as configure_logging leaves it."""
    log = logging.getLogger("chronoq")
    saved = (list(log.handlers), log.level, log.propagate, outcomes.line_sink)
    stream = io.StringIO()
    handler = BurstHandler(stream)
    handler.setFormatter(TextFormatter())
    for old in saved[0]:
        log.removeHandler(old)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    outcomes.line_sink = handler.job_line
    try:
        yield stream
    finally:
        log.removeHandler(handler)
        for old in saved[0]:
            log.addHandler(old)
        log.setLevel(saved[1])
        log.propagate = saved[2]
        outcomes.line_sink = saved[3]


def lines(stream: io.StringIO) -> list[str]:
    return [STAMP.sub("", line) for line in stream.getvalue().splitlines()]


def test_the_line_without_a_record_is_the_records_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with text_log() as stream:
        lines_both_ways(stream, monkeypatch)


def lines_both_ways(stream: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    log = logging.getLogger("chronoq")
    made: list[str] = []
    make = log.makeRecord
    monkeypatch.setattr(log, "makeRecord", lambda *a, **k: made.append("record") or make(*a, **k))
    log_outcome(JOB, 1.234, "ack", None)
    log_outcome(JOB, 0.5, "retry", ValueError("it's 'bad'"))
    assert made == []  # no record made
    fast = stream.getvalue().splitlines()
    assert all(STAMP.match(line) for line in fast)
    # a filter on the logger: the records go the usual way
    logging.getLogger("chronoq").addFilter(lambda record: True)
    try:
        log_outcome(JOB, 1.234, "ack", None)
        log_outcome(JOB, 0.5, "retry", ValueError("it's 'bad'"))
    finally:
        logging.getLogger("chronoq").filters.clear()
    assert made == ["record", "record"]
    got = lines(stream)
    assert got[:2] == got[2:]
    assert got[0] == (
        f"INFO chronoq[{os.getpid()}] job topic=mail id=order-7 attempt=3 outcome=ack "
        "duration_ms=1.23"
    )
    assert got[1].endswith("outcome=retry duration_ms=0.50 error=\"ValueError: it's 'bad'\"")


def test_a_handler_above_info_gets_no_job_line() -> None:
    with text_log() as stream:
        handler = logging.getLogger("chronoq").handlers[0]
        handler.setLevel(logging.WARNING)
        log_outcome(JOB, 1.0, "ack", None)
        assert stream.getvalue() == ""


def test_another_handler_on_the_logger_gets_the_record() -> None:
    with text_log() as stream:
        another_handler(stream)


def another_handler(stream: io.StringIO) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    extra = Keep()
    logging.getLogger("chronoq").addHandler(extra)
    try:
        log_outcome(JOB, 2.0, "ack", None)
    finally:
        logging.getLogger("chronoq").removeHandler(extra)
    assert [r.chronoq["id"] for r in records] == ["order-7"]  # type: ignore[attr-defined]
    assert lines(stream) == [
        f"INFO chronoq[{os.getpid()}] job topic=mail id=order-7 attempt=3 outcome=ack "
        "duration_ms=2.00"
    ]
