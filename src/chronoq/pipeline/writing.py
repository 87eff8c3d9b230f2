"""Writing rows as jobs, one Spark task's share, without Spark: Arrow batches
in, ``put_many`` calls of ``batch_size`` jobs out, and the count of what each
put did. Idempotent on the job id: a task that runs twice, a write started
again, or a streaming micro-batch replayed, schedules nothing twice."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from chronoq.errors import InvalidInput, InvalidJob
from chronoq.job import Job, prepare_job
from chronoq.pipeline.options import WriteOptions
from chronoq.pipeline.rows import Columns, RowError, rows_to_jobs
from chronoq.queue import Queue, connect

__all__ = ["WriteCounts", "write_batches"]

log = logging.getLogger("chronoq.pipeline")


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
    written under a hidden name and renamed when the task ends (a task that
    fails or runs again leaves no half file and no second copy)."""

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
                os.path.join(self.directory, f".{self.name}.tmp"), "w"
            )
        doc = {
            "row": error.position,
            "id": error.id,
            "topic": topic,
            "error": error.reason,
            "data": {key: _plain(value) for key, value in error.row.items()},
        }
        self._out.write(json.dumps(doc, ensure_ascii=False) + "\n")

    def close(self, keep: bool) -> None:
        if self._out is None or self.directory is None:
            return
        self._out.close()
        temp = os.path.join(self.directory, f".{self.name}.tmp")
        if keep:
            os.replace(temp, os.path.join(self.directory, self.name))
        else:
            os.unlink(temp)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | dict | str | int | float | bool) or value is None:
        return value
    return str(value)


class _Writer:
    def __init__(self, queue: Queue, options: WriteOptions, rejects: _Rejects) -> None:
        self.queue = queue
        self.options = options
        self.rejects = rejects
        self.counts = WriteCounts()

    def reject(self, topic: str, error: RowError) -> None:
        if self.options.on_error == "fail":
            raise InvalidInput(
                f"chronoq write: {error.describe()}. This batch of up to "
                f"{self.options.batch_size} rows wrote nothing; fix the data and run the write "
                "again (jobs already written are not written twice), or set on_error=skip"
            )
        self.rejects.add(topic, error)
        self.counts.rejected += 1

    def put(self, topic: str, rows: list[tuple[int, Job, dict[str, Any]]]) -> None:
        """One ``put_many``. When chronoq refuses a job of it (nothing is
        written then), each job is checked alone to name the bad rows, and the
        others are put."""
        try:
            results = self.queue.put_many(topic, [job for _, job, _ in rows])
        except InvalidJob as exc:
            good = []
            for position, job, data in rows:
                why = str(exc) if exc.index is None else _why(job, self.queue)
                if why is None:
                    good.append((position, job, data))
                else:
                    self.reject(topic, RowError(position, job.id, why, data))
            if good:
                self.put(topic, good)
            return
        for result in results:
            if result.created:
                self.counts.created += 1
            else:
                self.counts.present += 1


def _why(job: Job, queue: Queue) -> str | None:
    """Why chronoq refuses ``job``, or None."""
    try:
        prepare_job(job, queue.max_payload)
    except InvalidInput as exc:
        return str(exc)
    return None


def write_batches(
    batches: Iterable[pa.RecordBatch], options: WriteOptions, columns: Columns, task: str
) -> WriteCounts:
    """Put the jobs of ``batches`` (one task's rows); ``task`` names the file
    of rows left out under on_error=skip."""
    queue = connect(options.store)
    rejects = _Rejects(options.errors_path, f"{task}.jsonl")
    writer = _Writer(queue, options, rejects)
    pending: dict[str, list[tuple[int, Job, dict[str, Any]]]] = {}
    done = False
    try:
        position = 0
        for batch in batches:
            for topic, at, job, data in rows_to_jobs(
                batch, columns, generate_ids=options.generate_ids, first=position
            ):
                if isinstance(job, RowError):
                    writer.reject(topic, job)
                    continue
                rows = pending.setdefault(topic, [])
                rows.append((at, job, data))
                if len(rows) >= options.batch_size:
                    writer.put(topic, rows)
                    pending[topic] = []
            position += batch.num_rows
        for topic, rows in pending.items():
            if rows:
                writer.put(topic, rows)
        done = True
    finally:
        rejects.close(keep=done)
        queue.close()
    return writer.counts
