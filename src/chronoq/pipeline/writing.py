"""Writing rows as jobs, one Spark task's share, without Spark: Arrow batches
in, ``put_many`` calls of ``batch_size`` jobs out, and the count of what each
put did. Idempotent on the job id: a task that runs twice, a write started
again, or a streaming micro-batch replayed, schedules nothing twice."""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from chronoq.errors import InvalidInput, InvalidJob
from chronoq.job import Job, prepare_job
from chronoq.pipeline.options import WriteOptions
from chronoq.pipeline.rows import Columns, RowError, Rows, rows_to_jobs
from chronoq.queue import Queue, connect

__all__ = ["WriteCounts", "write_batches"]

log = logging.getLogger("chronoq.pipeline")
#: a job waiting for its put: its row's position, and where the row is (for a refusal)
Pending = tuple[int, Job, Rows, int]


@dataclass
class WriteCounts:
    """What one task's rows became."""

    created: int = 0
    present: int = 0
    rejected: int = 0

    def add(self, other: WriteCounts) -> None:
        self.created += other.created
        self.present += other.present
        self.rejected += other.rejected


class _Rejects:
    """Rows left out under on_error=skip, as JSON lines in one file per task,
    written under a hidden name of this process's and renamed when the task
    ends (a task that fails or runs again leaves no half file and no second
    copy, even when two attempts of it run at once)."""

    def __init__(self, directory: str | None, name: str) -> None:
        self.directory = directory
        self.name = name
        self._out: IO[str] | None = None

    def add(self, topic: str, error: RowError) -> None:
        if self.directory is None:
            raise AssertionError("rows are only left out under on_error=skip")
        if self._out is None:
            Path(self.directory).mkdir(parents=True, exist_ok=True)
            self._out = open(  # noqa: SIM115 - kept open for the task, closed in close()
                self._temp(), "w"
            )
        doc = {
            "row": error.position,
            "id": error.id,
            "topic": topic,
            "error": error.reason,
            "data": error.row,
        }
        self._out.write(json.dumps(doc, ensure_ascii=False, default=_plain) + "\n")

    def _temp(self) -> str:
        assert self.directory is not None
        return os.path.join(self.directory, f".{self.name}.{os.getpid()}.tmp")

    def close(self, keep: bool) -> None:
        if self._out is None or self.directory is None:
            return
        self._out.close()
        temp = self._temp()
        if keep:
            os.replace(temp, os.path.join(self.directory, self.name))
        else:
            os.unlink(temp)


def _plain(value: Any) -> Any:
    """A value of a row that JSON has no type for (a timestamp, bytes, a
    decimal, at any depth), as text."""
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


class _Writer:
    def __init__(self, store: Queue, options: WriteOptions, rejects: _Rejects) -> None:
        self.store = store
        self.options = options
        self.rejects = rejects
        self.counts = WriteCounts()
        self._lock = threading.Lock()  # rows are refused by both threads of a task

    def reject(self, topic: str, error: RowError) -> None:
        if self.options.on_error == "fail":
            raise InvalidInput(
                f"chronoq write: {error.describe()}. This batch of up to "
                f"{self.options.batch_size} rows wrote nothing; fix the data and run the write "
                "again (jobs already written are not written twice), or set on_error=skip"
            )
        with self._lock:
            self.rejects.add(topic, error)
            self.counts.rejected += 1

    def put(self, topic: str, rows: list[Pending]) -> None:
        """One ``put_many``. When chronoq refuses a job of it (nothing is
        written then), each job is checked alone to name the bad rows, and the
        others are put."""
        try:
            results = self.store.put_many(topic, [row[1] for row in rows])
        except InvalidJob as exc:
            good = []
            for row in rows:
                position, job, source, n = row
                why = str(exc) if exc.index is None else _why(job, self.store)
                if why is None:
                    good.append(row)
                else:
                    self.reject(topic, RowError(position, job.id, why, source.row(n)))
            if good:
                self.put(topic, good)
            return
        for result in results:
            if result.created:
                self.counts.created += 1
            else:
                self.counts.present += 1


class _Putter:
    """Runs the writer's puts in a thread of its own, in order, while the task
    turns the next rows into jobs: a put mostly waits for the store (the
    GIL is free then), so the two overlap: one task alone, 200,000 rows into
    Redis, ~80k -> ~95k jobs/s here."""

    def __init__(self, writer: _Writer) -> None:
        self._writer = writer
        self._todo: queue.Queue[tuple[str, list[Pending]] | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="chronoq-put", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            if self._error is None:  # after a failure, the rest is not put
                try:
                    self._writer.put(*item)
                except BaseException as exc:  # raised in the task's thread
                    self._error = exc

    def put(self, topic: str, rows: list[Pending]) -> None:
        self._raise()
        self._todo.put((topic, rows))

    def close(self) -> None:
        """Wait for the puts; raise what failed in them."""
        self._todo.put(None)
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error


def _why(job: Job, store: Queue) -> str | None:
    """Why chronoq refuses ``job``, or None."""
    try:
        prepare_job(job, store.max_payload)
    except InvalidInput as exc:
        return str(exc)
    return None


def write_batches(
    batches: Iterable[pa.RecordBatch], options: WriteOptions, columns: Columns, task: str
) -> WriteCounts:
    """Put the jobs of ``batches`` (one task's rows); ``task`` names the file
    of rows left out under on_error=skip."""
    store = connect(options.store)
    rejects = _Rejects(options.errors_path, f"{task}.jsonl")
    writer = _Writer(store, options, rejects)
    putter = _Putter(writer)
    pending: dict[str, list[Pending]] = {}
    done = False
    try:
        position = 0
        for batch in batches:
            for topic, at, job, source, n in rows_to_jobs(
                batch, columns, generate_ids=options.generate_ids, first=position
            ):
                if isinstance(job, RowError):
                    writer.reject(topic, job)
                    continue
                rows = pending.setdefault(topic, [])
                rows.append((at, job, source, n))
                if len(rows) >= options.batch_size:
                    putter.put(topic, rows)
                    pending[topic] = []
            position += batch.num_rows
        for topic, rows in pending.items():
            if rows:
                putter.put(topic, rows)
        putter.close()
        done = True
    finally:
        if not done:
            with suppress(BaseException):  # the task fails with the first error
                putter.close()
        rejects.close(keep=done)
        store.close()
    return writer.counts
