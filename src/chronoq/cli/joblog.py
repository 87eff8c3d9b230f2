"""The worker's log: its records to stderr as text or JSON lines, written a
turn of the event loop at a time, and the line of each job run written
without a ``logging.LogRecord`` when nothing else listens to the logger."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from chronoq.job import Reservation
from chronoq.worker import outcomes

__all__ = ["TEXT_FORMAT", "BurstHandler", "JsonFormatter", "TextFormatter", "configure_logging"]

log = logging.getLogger("chronoq")

TEXT_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s chronoq[%(process)d] %(message)s"
_PID = [os.getpid()]  # a forked worker process's own, as %(process)d
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, pid, message, then the fields of
    the record's ``chronoq`` extra (topic, id, attempt, outcome, duration_ms, ...)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        doc: dict[str, Any] = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "pid": record.process,
            "message": record.getMessage(),
        }
        fields = getattr(record, "chronoq", None)
        if isinstance(fields, Mapping):
            doc.update((k, v) for k, v in fields.items() if k not in doc)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT in UTC; the date and time of a second made once, not per line
    (strftime was a tenth of a job line's cost)."""

    converter = staticmethod(time.gmtime)

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT, "%Y-%m-%dT%H:%M:%S")
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return self.second(record.created)

    def second(self, created: float) -> str:
        """The date and time of ``created`` to the second, as ``%(asctime)s``."""
        second = int(created)
        cached = self._second  # one read: another thread may replace it meanwhile
        if cached[0] != second:
            text = time.strftime(self.datefmt or "%Y-%m-%dT%H:%M:%S", self.converter(created))
            cached = self._second = (second, text)
        return cached[1]


def text_formatter() -> logging.Formatter:
    return TextFormatter()


class BurstHandler(logging.Handler):
    """Log lines to a stream, written once per turn of the event loop.

    One write (a system call) per job line was a quarter of a busy worker
    loop's time at concurrency 4. Lines logged on the loop gather and go out
    together at the start of its next turn; lines logged elsewhere (start-up,
    handler threads) go out at once, after any gathered before them."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self._lines: list[str] = []
        self._pending = False

    def emit(self, record: logging.LogRecord) -> None:  # called under self.lock
        try:
            self._add(self.format(record) + "\n")
        except Exception:
            self.handleError(record)

    def _add(self, line: str) -> None:
        self._lines.append(line)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write()
            return
        if not self._pending:
            self._pending = True
            loop.call_soon(self.flush)

    def job_line(
        self, job: Reservation, elapsed_ms: float, outcome: str, error: str | None
    ) -> bool:
        """The line of one run, as the text format writes its record, made
        without the record (a third of a busy worker's time went to logging's
        records): only while this handler alone hears the logger, with no
        filter. False: log it the usual way."""
        formatter = self.formatter
        if (
            log.handlers != [self]
            or log.filters
            or self.filters
            or type(formatter) is not TextFormatter
            or self.level > logging.INFO
            or not log.isEnabledFor(logging.INFO)
            or log.propagate
        ):
            return False
        now = time.time()
        line = "%s.%03dZ INFO chronoq[%d] %s\n" % (  # noqa: UP031  # as TEXT_FORMAT
            formatter.second(now),
            int((now - int(now)) * 1000),
            _PID[0],
            outcomes.job_message(job, elapsed_ms, outcome, error),
        )
        self.acquire()
        try:
            self._add(line)
        finally:
            self.release()
        return True

    def flush(self) -> None:
        self.acquire()
        try:
            self._write()
        finally:
            self.release()

    def _write(self) -> None:
        self._pending = False
        if self._lines:
            text = "".join(self._lines)
            self._lines.clear()
            self.stream.write(text)
            self.stream.flush()


def configure_logging(log_format: str, verbose: bool) -> Callable[[], None]:
    """The ``chronoq`` logger to stderr alone (replacing ``-v``'s handler); returns
    the function that puts it back as it was."""
    handler = BurstHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else text_formatter())
    outcomes.line_sink = handler.job_line
    saved = (list(log.handlers), log.level, log.propagate)
    for old in saved[0]:
        log.removeHandler(old)
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False

    def restore() -> None:
        if outcomes.line_sink == handler.job_line:
            outcomes.line_sink = None
        handler.flush()
        log.removeHandler(handler)
        for old in saved[0]:
            log.addHandler(old)
        log.setLevel(saved[1])
        log.propagate = saved[2]

    return restore
