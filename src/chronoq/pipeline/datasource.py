"""The ``chronoq`` PySpark data source (PySpark 4.2+): DataFrames in as jobs,
jobs and events out, in batch and streaming. The work is in rows.py,
writing.py and reading.py, which need no Spark; this module fits them to
``pyspark.sql.datasource``.

Spark pickles the source, its readers and writers to the executors, so they
hold options only: each ``read``/``write`` call opens its own connection,
and ``commit`` runs on the driver with the commit messages alone."""

from __future__ import annotations

import gc
import logging
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from chronoq.errors import InvalidInput
from chronoq.job import LogShard
from chronoq.pipeline.options import ReadOptions, WriteOptions, read_options, write_options
from chronoq.pipeline.reading import (
    JOBS_DDL,
    LogRange,
    capped,
    heads,
    jobs_batches,
    plan_ranges,
    range_batches,
    spans,
    starts,
)
from chronoq.pipeline.rows import Columns, plan_columns
from chronoq.pipeline.schema import EVENT_DDL
from chronoq.pipeline.writing import WriteCounts, write_batches
from chronoq.queue import connect

__all__ = ["ChronoqDataSource"]

log = logging.getLogger("chronoq.pipeline")
#: seqs per partition of a batch read of one log shard (SQLite keeps one)
CHUNK = 500_000


class ChronoqDataSource(DataSource):
    """``format("chronoq")``: see docs/pipeline.md for the options and columns."""

    @classmethod
    def name(cls) -> str:
        return "chronoq"

    def schema(self) -> str:
        return JOBS_DDL if read_options(self.options).what == "jobs" else EVENT_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        options = read_options(self.options)
        _check_store(options.store)
        if options.what == "jobs":
            return JobsReader(options)
        return EventsReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = read_options(self.options)
        if options.what != "events":
            raise InvalidInput("a stream reads events: remove option what=jobs")
        _check_store(options.store)
        return EventStream(options)

    def writer(self, schema: StructType, overwrite: bool) -> JobWriter:
        if overwrite:
            raise InvalidInput(
                "chronoq only adds jobs: use mode('append') (a job with an id that is "
                "already there is left as it is)"
            )
        options, columns = _plan_write(self.options, schema)
        return JobWriter(options, columns, uuid.uuid4().hex[:12])

    def streamWriter(self, schema: StructType, overwrite: bool) -> JobStreamWriter:
        options, columns = _plan_write(self.options, schema)
        return JobStreamWriter(options, columns, uuid.uuid4().hex[:12])


def _check_store(url: str) -> None:
    """A bad store URL fails on the driver, before any task."""
    connect(url).close()


def _plan_write(options: Any, schema: StructType) -> tuple[WriteOptions, Columns]:
    checked = write_options(options)
    fields = [(field.name, field.dataType.typeName()) for field in schema.fields]
    columns = plan_columns(fields, checked.topic, generate_ids=checked.generate_ids)
    _check_store(checked.store)
    return checked, columns


# -- writing -------------------------------------------------------------------------


@dataclass
class WriteReport(WriterCommitMessage):
    """What one task wrote: the message each task sends to ``commit``."""

    created: int
    present: int
    rejected: int


def _settle_heap() -> None:
    """Set aside what the Python worker holds before a task (PySpark, pyarrow,
    its modules: objects that live as long as the process), so that the
    collector stops walking them again and again while the task allocates a
    few objects per row: 1,000,000 rows into Redis from local[2], ~95k -> ~110k
    jobs/s here (bench/spark.py). What is garbage already is collected first;
    a reused worker does so again at each task."""
    gc.collect()
    gc.freeze()


def _task_name(write_id: str) -> str:
    """Names the file of a task's rows left out: the same for every attempt
    of a task, and, in a stream, for a micro-batch replayed after a restart
    (its query id and batch id are Spark's, kept in the checkpoint)."""
    context = TaskContext.get()
    if context is None:
        return f"{write_id}-local"
    query = context.getLocalProperty("sql.streaming.queryId")
    batch = context.getLocalProperty("streaming.sql.batchId")
    if query is not None and batch is not None:
        return f"{query}-{batch}-{context.partitionId()}"
    return f"{write_id}-{context.stageId()}-{context.partitionId()}"


def _totals(messages: Sequence[WriterCommitMessage | None]) -> tuple[WriteCounts, int]:
    totals, failed = WriteCounts(), 0
    for message in messages:
        if isinstance(message, WriteReport):
            totals.add(WriteCounts(message.created, message.present, message.rejected))
        else:
            failed += 1
    return totals, failed


def _report(what: str, options: WriteOptions, totals: WriteCounts) -> None:
    where = f" (rows left out are in {options.errors_path})" if totals.rejected else ""
    _driver_log().info(
        "%s to %s: %d job(s) created, %d already present, %d row(s) rejected%s",
        what,
        options.store.split("?", 1)[0],
        totals.created,
        totals.present,
        totals.rejected,
        where,
    )


def _driver_log() -> logging.Logger:
    """The pipeline's logger; in a Python process Spark started for the
    driver, where nothing set logging up, its INFO lines go to stderr."""
    if not logging.getLogger().handlers and not log.handlers and log.level == logging.NOTSET:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log


class _TaskWrites:
    """What a batch and a streaming write share: a task puts its rows."""

    def __init__(self, options: WriteOptions, columns: Columns, write_id: str) -> None:
        self.options = options
        self.columns = columns
        self.write_id = write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        _settle_heap()
        counts = write_batches(iterator, self.options, self.columns, _task_name(self.write_id))
        return WriteReport(counts.created, counts.present, counts.rejected)


class JobWriter(_TaskWrites, DataSourceArrowWriter):
    """``df.write.format("chronoq")``: each task puts its rows in batches."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        totals, _ = _totals(messages)
        _report("chronoq write", self.options, totals)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        totals, failed = _totals(messages)
        _driver_log().warning(
            "chronoq write failed in %d task(s); the others put %d job(s) (%d already "
            "present): running the write again puts only the missing ones",
            failed,
            totals.created,
            totals.present,
        )


class JobStreamWriter(_TaskWrites, DataSourceStreamArrowWriter):
    """``df.writeStream.format("chronoq")``: the batch writer's rules per
    micro-batch; a replayed micro-batch puts nothing twice (ids)."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        totals, _ = _totals(messages)
        _report(f"chronoq stream write, micro-batch {batchId}", self.options, totals)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _driver_log().warning("chronoq stream write: micro-batch %d failed", batchId)


# -- reading --------------------------------------------------------------------------


class RangePartition(InputPartition):
    def __init__(self, part: LogRange) -> None:
        super().__init__(part)
        self.part = part


class ShardPartition(InputPartition):
    def __init__(self, topic: str, shard: int) -> None:
        super().__init__((topic, shard))
        self.topic = topic
        self.shard = shard


class EventsReader(DataSourceReader):
    """A snapshot of the event log: what it holds when the read is planned,
    a partition per log shard (SQLite's one log in chunks)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        with connect(self.options.store) as queue:
            found = spans(queue, self.options.topic)
        parts = plan_ranges(
            {name: shard for name, (shard, _, _) in found.items()},
            {name: first for name, (_, first, _) in found.items()},
            {name: head for name, (_, _, head) in found.items()},
            CHUNK,
        )
        return [RangePartition(part) for part in parts] or [RangePartition(_NOTHING)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if partition.part.upto == 0:
            return
        with connect(self.options.store) as queue:
            yield from range_batches(queue, partition.part, self.options.allow_gaps)


_NOTHING = LogRange(LogShard("", None, 0), 0, 0)  # Spark wants at least one partition


class JobsReader(DataSourceReader):
    """A snapshot of a topic's jobs, a partition per shard."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        assert self.options.topic is not None
        with connect(self.options.store) as queue:
            shards = queue.shards
        return [ShardPartition(self.options.topic, shard) for shard in range(shards)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ShardPartition)
        with connect(self.options.store) as queue:
            yield from jobs_batches(queue, partition.topic, partition.shard, self.options.state)


class EventStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The event log as a stream. Offsets: the seq read last, by log shard
    name. ``maxEventsPerTrigger`` caps a micro-batch (shared evenly among
    shards); ``Trigger.AvailableNow`` reads up to the heads at its start."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        with connect(self.options.store) as queue:
            return starts(queue, self.options.topic, self.options.start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_events is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_events)

    def prepareForTriggerAvailableNow(self) -> None:
        with connect(self.options.store) as queue:
            self.target = {
                name: head for name, (_, head) in heads(queue, self.options.topic).items()
            }

    def _heads(self) -> dict[str, int]:
        with connect(self.options.store) as queue:
            return {name: head for name, (_, head) in heads(queue, self.options.topic).items()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        end = self._heads()
        for name, head in end.items():
            if head < start.get(name, 0):
                raise InvalidInput(
                    f"the event log {name} ends at seq {head}, before the {start[name]} this "
                    "query read: the store lost or replaced its log; start the query again "
                    "with a new checkpoint"
                )
        if self.target is not None:
            end = {name: min(head, self.target.get(name, 0)) for name, head in end.items()}
        end = {name: max(seq, start.get(name, 0)) for name, seq in end.items()}
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return {**start, **capped(start, end, rows)}

    def reportLatestOffset(self) -> dict[str, int]:
        return self._heads()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        with connect(self.options.store) as queue:
            shards = {shard.name: shard for shard in queue.log_shards(self.options.topic)}
        missing = sorted(set(end) - set(shards))
        if missing:
            raise InvalidInput(f"the event log(s) {', '.join(missing)} are gone from the store")
        return [RangePartition(part) for part in plan_ranges(shards, start, end, CHUNK)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        with connect(self.options.store) as queue:
            yield from range_batches(queue, partition.part, self.options.allow_gaps)
