"""Queue: the synchronous facade over a Backend. It validates input, applies
defaults and runs the wait loop of ``reserve``; the backend does the rest."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from chronoq.backends import StoreURL, open_backend
from chronoq.backends.base import Backend, ReserveResult, Watcher
from chronoq.backoff import Backoff
from chronoq.calls import (
    SEQ_BEYOND,
    LeaseRef,
    check_limit,
    error_text,
    jobs_args,
    lease_args,
    leases_of,
    log_shard_arg,
    nack_args,
    optional_ttr_ms,
    put_args,
    requeue_ids,
    reschedule_args,
    reserve_args,
    seq_arg,
)
from chronoq.errors import LeaseLost
from chronoq.job import (
    DEFAULT_MAX_PAYLOAD,
    EventPage,
    Job,
    JobInfo,
    JobLease,
    JobPage,
    LogRead,
    LogShard,
    PutResult,
    Reservation,
    shard_of,
    validate_id,
    validate_topic,
)
from chronoq.recurring import (
    Recurring,
    RecurringRun,
    check_name,
    encode_spec,
    find_recurring,
    plan_run,
    recurring_list,
)
from chronoq.states import State

__all__ = ["Queue", "connect"]


def connect(url: str | None = None, *, backoff: Backoff | None = None) -> Queue:
    """Open a queue on the store at ``url``.

    ``None`` means ``$CHRONOQ_STORE``, else ``sqlite:///chronoq.db`` (a file in
    the working directory). Schemes: ``sqlite:///relative.db``,
    ``sqlite:////absolute.db``, ``sqlite://:memory:``; a bare path is a SQLite
    file. ``?max_payload=BYTES`` changes the payload limit (1 MiB).
    """
    parsed = StoreURL.parse(url)
    max_payload = parsed.pop_int("max_payload", DEFAULT_MAX_PAYLOAD, minimum=1)
    return Queue(open_backend(parsed), max_payload=max_payload, backoff=backoff)


class Queue:
    """A delay queue on one store. Safe to share between threads."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        backoff: Backoff | None = None,
    ) -> None:
        self.backend = backend
        self.max_payload = max_payload
        self.backoff = backoff or Backoff()

    @property
    def url(self) -> str:
        """The store URL, without any password."""
        return self.backend.url

    def __repr__(self) -> str:
        return f"<chronoq.Queue {self.url}>"

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- producing -----------------------------------------------------------

    def put(
        self,
        topic: str,
        payload: Any = None,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
        id: str | None = None,
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
        unique_for: float = 0.0,
        replace: bool = False,
    ) -> PutResult:
        """Put one job; due after ``delay`` seconds or at ``run_at`` (else now).

        An existing job with the same id is left as it is (``created=False``)
        unless ``replace=True`` and it is not reserved.
        """
        job = Job(payload, delay, run_at, id, priority, ttr, max_attempts, unique_for)
        return self._put(topic, [job], replace, batch=False)[0]

    def put_many(
        self, topic: str, jobs: Iterable[Job], *, replace: bool = False
    ) -> list[PutResult]:
        """Put many jobs in one transaction; one result per job, in order.

        Every job is validated first: one invalid job raises ``InvalidJob``
        naming its index, and nothing is written.
        """
        return self._put(topic, list(jobs), replace, batch=True)

    def _put(self, topic: str, jobs: list[Job], replace: bool, batch: bool) -> list[PutResult]:
        prepared = put_args(topic, jobs, self.max_payload, batch)
        return self.backend.put_many(topic, prepared, bool(replace)) if prepared else []

    # -- consuming -------------------------------------------------------------

    def reserve(
        self, topic: str, count: int = 1, *, wait: float = 0.0, ttr: float | None = None
    ) -> list[Reservation]:
        """Lease up to ``count`` due jobs, highest priority first.

        With ``wait`` > 0 and nothing due, sleep until a job becomes due or is
        put (no polling interval), at most ``wait`` seconds; then ``[]``.
        ``ttr`` overrides the jobs' own lease length.
        """
        wait_s, ttr_ms = reserve_args(topic, count, wait, ttr)
        end = time.monotonic() + wait_s
        watcher = self.backend.watch(topic) if wait_s > 0 else None
        try:
            while True:  # reserve_once's attempt, its arguments checked once above
                result = self.backend.reserve(topic, count, ttr_ms, watcher)
                remaining = end - time.monotonic()
                if result.jobs or watcher is None or remaining <= 0:
                    return result.jobs
                if result.wake_in_ms is not None:
                    remaining = min(remaining, result.wake_in_ms / 1000)
                watcher.wait(remaining)
        finally:
            if watcher is not None:
                watcher.close()

    def watch(self, topic: str) -> Watcher:
        """A watcher of the topic, for a consumer with its own wait loop: take
        it before ``reserve_once``; its ``wait(timeout)`` returns when a job
        may have become available since. ``close`` it when done."""
        return self.backend.watch(validate_topic(topic))

    def reserve_once(
        self,
        topic: str,
        count: int = 1,
        *,
        ttr: float | None = None,
        watcher: Watcher | None = None,
    ) -> ReserveResult:
        """One reserve attempt, without waiting: the jobs leased, and when
        there are none, how long until the topic's next timed change (ms, or
        None). ``watcher``: the one the caller will wait with (``watch``)."""
        _, ttr_ms = reserve_args(topic, count, 0.0, ttr)
        return self.backend.reserve(topic, count, ttr_ms, watcher)

    def ack(self, job: LeaseRef, id: str | None = None, lease: str | None = None) -> None:
        """Finish a reserved job: it is gone. Raises ``LeaseLost`` if the lease is not live."""
        held = lease_args(job, id, lease)
        if self.backend.ack_many([held]):
            raise LeaseLost(held.topic, held.id)

    def ack_many(self, jobs: Iterable[Reservation | JobLease]) -> list[str]:
        """Ack every job still leased (reservations, or ``JobLease`` values of
        any topics); returns the ids whose lease was lost."""
        leases = leases_of(jobs)
        return self.backend.ack_many(leases) if leases else []

    def nack(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        delay: float | None = None,
        error: object = None,
        backoff: Backoff | None = None,
    ) -> State:
        """Give a reserved job back to run again after ``delay`` seconds (default:
        exponential backoff with jitter, ``backoff`` or the queue's), or to dead
        when its attempts are used up. Returns the state it went to."""
        held = lease_args(job, id, lease)
        delay_ms, curve = nack_args(delay, backoff, self.backoff)
        return self.backend.nack(held, delay_ms, error_text(error), curve, random.random())

    def release(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """Give back a reserved job that was not run to the end (a consumer
        shutting down): ready at once, never dead for it, even on its last
        attempt. Raises ``LeaseLost`` if the lease is not live."""
        self.backend.release(lease_args(job, id, lease), error_text(error))

    def touch(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        ttr: float | None = None,
    ) -> int:
        """Extend the lease to now + ``ttr`` (default: the job's ttr).

        Returns the new deadline in ms since the epoch."""
        return self.backend.touch(lease_args(job, id, lease), optional_ttr_ms(ttr))

    def bury(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """Move a reserved job to dead (kept for inspection and ``requeue``)."""
        self.backend.bury(lease_args(job, id, lease), error_text(error))

    # -- by id -------------------------------------------------------------------

    def get(self, topic: str, id: str) -> JobInfo | None:
        """The job with this id, or None when there is none."""
        return self.backend.get(validate_topic(topic), validate_id(id))

    def delete(self, topic: str, id: str) -> bool:
        """Delete the job in any state; True if it existed."""
        return self.backend.delete(validate_topic(topic), validate_id(id))

    def reschedule(
        self,
        topic: str,
        id: str,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
    ) -> bool:
        """Move a delayed or ready job to a new due time; False when the job is
        absent, reserved or dead."""
        delay_ms, at_ms = reschedule_args(topic, id, delay, run_at)
        return self.backend.reschedule(topic, id, delay_ms, at_ms)

    # -- topic-wide --------------------------------------------------------------

    def stats(self, topic: str, *, per_shard: bool = False) -> dict[str, Any]:
        """Counts by state and more: delayed, ready, reserved, dead, total,
        paused, next_due_at (ms or None); with ``per_shard``, also ``shards``:
        for each shard in order, its delayed, ready, reserved, dead and next_due_at."""
        return self.backend.stats(validate_topic(topic), per_shard)

    def topics(self) -> list[str]:
        """Topics that hold jobs or are paused, sorted."""
        return self.backend.topics()

    def dead(self, topic: str, limit: int = 100) -> list[JobInfo]:
        """Dead jobs, oldest death first."""
        check_limit(limit)
        return self.backend.dead(validate_topic(topic), limit)

    def requeue(self, topic: str, ids: Sequence[str] | None = None) -> int:
        """Move dead jobs (all, or those in ``ids``) back to ready with attempts
        reset; returns how many moved."""
        return self.backend.requeue(topic, requeue_ids(topic, ids))

    def purge(self, topic: str) -> int:
        """Delete every job of the topic (and its remembered ids); returns how many jobs."""
        return self.backend.purge(validate_topic(topic))

    def pause(self, topic: str) -> None:
        """Stop handing out jobs of the topic; puts are still accepted."""
        self.backend.set_paused(validate_topic(topic), True)

    def resume(self, topic: str) -> None:
        """Hand out jobs of a paused topic again."""
        self.backend.set_paused(validate_topic(topic), False)

    def events(
        self, topic: str | None = None, *, cursor: str | None = None, limit: int = 1000
    ) -> EventPage:
        """The event log after ``cursor`` (None: the oldest kept), oldest first.
        Pass ``page.cursor`` back to resume where the page ended."""
        check_limit(limit)
        return self.backend.events(None if topic is None else validate_topic(topic), cursor, limit)

    # -- reading in bulk: chronoq export, the Spark pipeline ----------------------------

    @property
    def shards(self) -> int:
        """How many shards the store spreads a topic's jobs over (SQLite: 1)."""
        return self.backend.shards

    def shard_of(self, job_id: str) -> int:
        """The shard a job of this id is kept in (DESIGN §2: jobs are ordered within a shard)."""
        return shard_of(job_id, self.backend.shards)

    def jobs(
        self, topic: str, *, shard: int = 0, cursor: str | None = None, limit: int = 1000
    ) -> JobPage:
        """A page of the jobs of one shard of the topic, in no set order; pass
        ``page.cursor`` back for the next (None: that was the last). A job
        there for the whole scan is in some page, maybe twice on Redis; one
        that moves meanwhile may be missed."""
        jobs_args(shard, cursor, limit)
        return self.backend.jobs(validate_topic(topic), shard, cursor, limit)

    def log_shards(self, topic: str | None = None) -> list[LogShard]:
        """The separately numbered parts of the event log (DESIGN §7) that
        hold the events of ``topic`` (None: every topic): one for SQLite, one
        per topic and shard for Redis."""
        return self.backend.log_shards(None if topic is None else validate_topic(topic))

    def log_read(self, shard: LogShard, after: int = 0, *, limit: int = 10_000) -> LogRead:
        """About ``limit`` events of a log shard with a seq above ``after``,
        oldest first, and how many the store trimmed before they could be
        read (``lost``). Readers that must see every event, such as ``chronoq
        export``, pass ``page.upto`` as the next ``after``."""
        check_limit(limit)
        return self.backend.log_read(log_shard_arg(shard), seq_arg(after), limit)

    def log_head(self, shard: LogShard) -> int:
        """The seq of the newest event of a log shard (0: none yet), read
        without reading events."""
        return self.backend.log_read(log_shard_arg(shard), SEQ_BEYOND, 1).head

    def log_trim(self, shard: LogShard, upto: int) -> None:
        """Drop the events of a log shard up to seq ``upto``, once they are
        safely elsewhere (``chronoq export --trim``)."""
        self.backend.log_trim(log_shard_arg(shard), seq_arg(upto))

    # -- recurring jobs ----------------------------------------------------------------

    def recurring(
        self,
        topic: str,
        *,
        name: str,
        cron: str | None = None,
        every: float | None = None,
        payload: Any = None,
        tz: str = "UTC",
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
    ) -> Recurring:
        """Define the recurring job ``name`` of the topic, or redefine it (its
        creation time and last occurrence are kept: calling this at every
        start-up is safe). ``cron``: 5 fields in the time zone ``tz``; or
        ``every``: seconds, counted from the Unix epoch. Each occurrence is put
        by ``run_recurring`` (workers call it) as a job with the id
        ``<name>@<occurrence ms>`` and this payload, priority, ttr and
        max_attempts. Occurrences before the definition are not put; missed
        ones (no worker ran) collapse into one job, the latest one due.
        Schedules are not jobs: ``purge`` keeps them, ``topics`` does not list
        a topic for them, and they appear in no event."""
        spec = encode_spec(
            topic, name, cron, every, payload, tz, priority, ttr, max_attempts, self.max_payload
        )
        self.backend.schedules_put(topic, name, spec)
        return find_recurring(topic, name, *self.backend.schedules_list(topic))

    def recurring_list(self, topic: str) -> list[Recurring]:
        """The topic's recurring jobs, by name."""
        validate_topic(topic)
        return recurring_list(topic, *self.backend.schedules_list(topic))

    def recurring_remove(self, topic: str, name: str) -> bool:
        """Forget a recurring job; True if it existed. Occurrences already put
        stay (``delete`` them by id)."""
        return self.backend.schedules_remove(validate_topic(topic), check_name(name))

    def run_recurring(self, topic: str) -> RecurringRun:
        """Put the occurrences of the topic's recurring jobs that are due and
        not yet put; returns those created and when the next one falls. Safe
        to call from any number of threads and processes at once: each
        occurrence is created once."""
        validate_topic(topic)
        plan = plan_run(topic, *self.backend.schedules_list(topic))
        results = self.backend.put_many(topic, plan.jobs, False) if plan.jobs else []
        for name, at_ms in plan.marks:
            self.backend.schedules_mark(topic, name, at_ms)
        return plan.done(results)
