"""``chronoq export``: the event log into Parquet files partitioned by topic and
UTC date (``DIR/topic=<topic>/date=<YYYY-MM-DD>/part-….parquet``), once each,
and never silently past events the store trimmed before they were exported.
How a flush survives a crash is in exportstate.py."""

from __future__ import annotations

import fcntl
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chronoq.errors import ChronoqError, InvalidInput
from chronoq.job import Event, LogShard
from chronoq.pipeline.durable import fsync_dir, fsync_file
from chronoq.pipeline.exportstate import STATE_DIR, TEMP_PREFIX, TEMP_SUFFIX, ExportState
from chronoq.pipeline.schema import events_batch
from chronoq.queue import Queue

__all__ = ["ExportGap", "ExportSummary", "Exporter", "partition_path"]

log = logging.getLogger("chronoq.export")
_DAY_MS = 86_400_000
# the characters Spark escapes in a partition value that a topic may hold
_ESCAPE = str.maketrans({":": "%3A"})


class ExportGap(ChronoqError):
    """Events were trimmed from the store before they were exported."""

    def __init__(self, gaps: list[dict[str, Any]]) -> None:
        self.gaps = gaps
        super().__init__("; ".join(describe_gap(gap) for gap in gaps))


def describe_gap(gap: dict[str, Any]) -> str:
    if gap.get("reset"):
        return (
            f"the event log of {gap['shard']} ends at seq {gap['head']}, before the "
            f"{gap['after']} already exported: the store lost or replaced its log"
        )
    what = f"{gap['lost']} event(s) of {gap['shard']}"
    if gap.get("topic"):  # a SQLite log is shared by every topic
        what += f" (of every topic: {gap['topic']}'s may be among them)"
    return f"{what} after seq {gap['after']} were trimmed from the store before they were exported"


@dataclass
class ExportSummary:
    """What one run did."""

    events: int = 0
    files: int = 0
    flushes: int = 0
    lost: int = 0
    gaps: list[dict[str, Any]] = field(default_factory=list)
    trimmed: bool = False
    seconds: float = 0.0
    offsets: dict[str, int] = field(default_factory=dict)

    def doc(self) -> dict[str, Any]:
        rate = self.events / self.seconds if self.seconds > 0 else 0.0
        return {
            "events": self.events,
            "files": self.files,
            "flushes": self.flushes,
            "lost": self.lost,
            "gaps": self.gaps,
            "trimmed": self.trimmed,
            "seconds": round(self.seconds, 3),
            "events_per_second": round(rate),
            "offsets": self.offsets,
        }


def partition_path(topic: str, day: int) -> str:
    """The hive partition directory of a topic's events of one UTC day
    (days since the epoch); ``:`` is escaped as Spark does."""
    date = datetime.fromtimestamp(day * 86_400, UTC).strftime("%Y-%m-%d")
    return f"topic={topic.translate(_ESCAPE)}/date={date}"


class _Buffer:
    """What was read since the last flush: events by partition with their
    shards, and gaps passed over (committed with them)."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, int], tuple[list[Event], list[int]]] = {}
        self.size = 0
        self.gaps: list[dict[str, Any]] = []
        self.moved = False  # an offset moved: past events, or past a stretch of none

    def __bool__(self) -> bool:
        """Whether there is anything to commit."""
        return bool(self.size or self.gaps or self.moved)

    def add(self, events: list[Event], shard: int) -> None:
        parts = self.parts
        for event in events:
            key = (event.topic, event.ts_ms // _DAY_MS)
            part = parts.get(key)
            if part is None:
                part = parts[key] = ([], [])
            part[0].append(event)
            part[1].append(shard)
        self.size += len(events)


class Exporter:
    """Exports a store's event log into ``directory``; one at a time per directory.

    ``flush_events``: events per flush at most (a flush writes a file per
    partition it touches and commits the offsets). ``on_events`` is called
    with the number of events read, for a progress bar."""

    def __init__(
        self,
        queue: Queue,
        directory: Path,
        *,
        topic: str | None = None,
        allow_gaps: bool = False,
        trim: bool = False,
        flush_events: int = 200_000,
        read_events: int = 10_000,
        on_events: Callable[[int], None] | None = None,
    ) -> None:
        if flush_events < 1 or read_events < 1:
            raise InvalidInput("flush_events and read_events must be at least 1")
        self.queue = queue
        self.root = Path(directory)
        self.topic = topic
        self.allow_gaps = allow_gaps
        self.trim = trim
        self.flush_events = flush_events
        self.read_events = read_events
        self.on_events = on_events or (lambda n: None)
        self._trimmed: dict[str, int] = {}

    def heads(self) -> dict[str, int]:
        """The seq of the newest event of each log shard now."""
        return {
            shard.name: self.queue.log_head(shard) for shard in self.queue.log_shards(self.topic)
        }

    def backlog(self) -> int:
        """Events in the store not exported yet (trimmed ones count too)."""
        state = ExportState(self.root, self.queue.url, self.topic)
        if state.path.exists():
            state = ExportState.load(self.root)
        return sum(max(head - state.offsets.get(name, 0), 0) for name, head in self.heads().items())

    # -- the run ----------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[ExportState]:
        if self.root.exists() and not self.root.is_dir():
            raise InvalidInput(f"{self.root} is not a directory")
        (self.root / STATE_DIR).mkdir(parents=True, exist_ok=True)
        with open(self.root / STATE_DIR / "lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InvalidInput(
                    f"another chronoq export is writing to {self.root}: one at a time"
                ) from None
            yield ExportState.open(self.root, self.queue.url, self.topic)

    def run(
        self,
        *,
        follow: bool = False,
        flush_interval: float = 10.0,
        poll: float = 0.5,
        stop: threading.Event | None = None,
    ) -> ExportSummary:
        """Export the events the log holds now (``follow``: and those that
        come, flushing at least every ``flush_interval`` seconds, until
        ``stop`` is set). Raises ``ExportGap`` for events lost, after
        committing every event read before them, unless gaps are allowed."""
        stop = stop or threading.Event()
        summary = ExportSummary()
        started = time.monotonic()
        with self._locked() as state:
            self._check_shards(state)
            if self.trim:
                self._trim(state)  # what an earlier run committed and did not trim
            buffer = _Buffer()
            targets = None if follow else self._targets(state, buffer)
            try:
                self._loop(state, buffer, summary, targets, flush_interval, poll, stop)
            finally:
                # what was read is committed when a gap, an error or a stop ends the run
                if buffer:
                    self._flush(state, buffer, summary)
                summary.seconds = time.monotonic() - started
                summary.offsets = dict(state.offsets)
        return summary

    def _check_shards(self, state: ExportState) -> None:
        """Every log shard exported before must still be read: fewer Redis
        shards in the store URL would leave the others' events behind."""
        missing = sorted(set(state.offsets) - {s.name for s in self.queue.log_shards(self.topic)})
        if missing:
            raise InvalidInput(
                f"{self.root} has exported the event log(s) {', '.join(missing)}, which this "
                "store URL does not read: give the shards (and prefix) the producers use"
            )

    def _targets(self, state: ExportState, buffer: _Buffer) -> dict[str, int]:
        """Each shard's newest event now, where a run without --follow stops; a
        log that restarted below the saved offset is a gap here already."""
        targets = {}
        for shard in self.queue.log_shards(self.topic):
            after = state.offsets.get(shard.name, 0)
            targets[shard.name] = head = self.queue.log_head(shard)
            if head < after:
                self._gap(state, buffer, shard, after, 0, head)
        return targets

    def _loop(
        self,
        state: ExportState,
        buffer: _Buffer,
        summary: ExportSummary,
        targets: dict[str, int] | None,
        flush_interval: float,
        poll: float,
        stop: threading.Event,
    ) -> None:
        last_flush = time.monotonic()
        while not stop.is_set():
            read = 0
            for shard in self.queue.log_shards(self.topic):
                target = None if targets is None else targets.get(shard.name, 0)
                read += self._drain(state, shard, buffer, target, stop)
                full = buffer.size >= self.flush_events
                due = targets is None and time.monotonic() - last_flush >= flush_interval
                if full or (due and buffer):
                    self._flush(state, buffer, summary)
                    last_flush = time.monotonic()
            if read == 0:
                if targets is not None:
                    return
                stop.wait(poll)

    def _drain(
        self,
        state: ExportState,
        shard: LogShard,
        buffer: _Buffer,
        target: int | None,
        stop: threading.Event,
    ) -> int:
        """Read one shard up to its newest event (or ``target``) or a full buffer."""
        read = 0
        while not stop.is_set() and buffer.size < self.flush_events:
            after = state.offsets.get(shard.name, 0)
            if target is not None and after >= target:
                break
            page = self.queue.log_read(shard, after, limit=self.read_events)
            if page.head < after:
                self._gap(state, buffer, shard, after, 0, page.head)
                continue
            if page.lost:  # raised unless allowed: what was read before it is committed
                self._gap(state, buffer, shard, after, page.lost, page.head)
            if page.upto <= after:
                break
            buffer.add(page.events, shard.shard)
            buffer.moved = True
            state.offsets[shard.name] = page.upto
            read += len(page.events)
            self.on_events(len(page.events))
        return read

    def _gap(
        self, state: ExportState, buffer: _Buffer, shard: LogShard, after: int, lost: int, head: int
    ) -> None:
        gap: dict[str, Any] = {"shard": shard.name, "after": after, "lost": lost, "head": head}
        if head < after:
            gap["reset"] = True
        if shard.shared and shard.topic is not None:
            gap["topic"] = shard.topic
        if not self.allow_gaps:
            raise ExportGap([gap])
        gap["at"] = datetime.now(UTC).isoformat(timespec="seconds")
        log.warning("export: %s (allowed: --allow-gaps)", describe_gap(gap))
        buffer.gaps.append(gap)
        if head < after:  # the log numbers from 1 again
            state.offsets[shard.name] = 0

    # -- a flush ------------------------------------------------------------------------

    def _flush(self, state: ExportState, buffer: _Buffer, summary: ExportSummary) -> None:
        """Write the buffer's files, commit them with the offsets, rename them
        into place (see exportstate.py). The buffer is emptied either way: a
        failed flush ends the run, and its events are after the saved offsets."""
        try:
            renames = self._write_files(buffer)
            state.pending = renames
            state.gaps += buffer.gaps
            state.events += buffer.size
            state.files += len(renames)
            state.save()  # the commit
            state.finish()  # the renames, then the state without them
            summary.events += buffer.size
            summary.files += len(renames)
            summary.flushes += 1
            summary.gaps += buffer.gaps
            summary.lost += sum(gap["lost"] for gap in buffer.gaps)
            if renames:
                log.info("export: %d event(s) in %d file(s)", buffer.size, len(renames))
        finally:
            buffer.parts, buffer.size, buffer.gaps, buffer.moved = {}, 0, [], False
        if self.trim:
            self._trim(state)

    def _write_files(self, buffer: _Buffer) -> list[tuple[str, str]]:
        """A hidden file per partition, on disk: (temporary, final) names."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        renames: list[tuple[str, str]] = []
        made: set[Path] = set()
        for n, ((topic, day), (events, shards)) in enumerate(sorted(buffer.parts.items())):
            directory = self.root / partition_path(topic, day)
            if not directory.is_dir():
                directory.mkdir(parents=True, exist_ok=True)
                made |= {directory.parent, self.root}  # the new names, on disk too
            name = f"{stamp}-{n:04d}.parquet"
            temp = directory / f"{TEMP_PREFIX}{name}{TEMP_SUFFIX}"
            table = pa.Table.from_batches([events_batch(events, shards, topic=False)])
            pq.write_table(table, temp, compression="zstd")
            fsync_file(temp)
            final = directory / f"part-{name}"
            renames.append((str(temp.relative_to(self.root)), str(final.relative_to(self.root))))
        for directory in {(self.root / temp).parent for temp, _ in renames} | made:
            fsync_dir(directory)
        return renames

    def _trim(self, state: ExportState) -> None:
        """Trim each shard up to its committed offset (once per offset), unless
        its log now ends below that offset: a log the store replaced holds
        events nobody exported."""
        for shard in self.queue.log_shards(self.topic):
            upto = state.offsets.get(shard.name, 0)
            if upto > self._trimmed.get(shard.name, 0):
                if self.queue.log_head(shard) < upto:
                    continue
                self.queue.log_trim(shard, upto)
                self._trimmed[shard.name] = upto
