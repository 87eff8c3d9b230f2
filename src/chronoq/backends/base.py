"""The Backend contract: one method per transition of docs/contract.md §1, for blocking
callers (``Backend``) and for asyncio (``AsyncBackend``, the same methods as
coroutines). A backend receives validated, encoded input (topics checked,
durations in ms, payloads as bytes) and owns the store's clock: every ``now`` is
the store's. Each method is one atomic step that appends its events in that same
step. Above it, each operation is defined once (``chronoq.calls``) for the four
facades: ``Queue``, ``AsyncQueue`` and the HTTP clients.

Adding an operation (a transition or a read) touches the files listed under
"Adding an operation" in docs/architecture.md, this module first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from chronoq.backends.watchers import AsyncWatcher, TopicsWatcher, watch_each
from chronoq.backoff import Backoff
from chronoq.job import (
    EventPage,
    Forecast,
    JobInfo,
    JobLease,
    JobPage,
    LogRead,
    LogShard,
    NewJob,
    PutResult,
    Reservation,
)
from chronoq.limits import Limits, Rule
from chronoq.states import State

__all__ = [
    "AsyncBackend",
    "AsyncWatcher",
    "Backend",
    "ReserveResult",
    "StoredSchedule",
    "TopicsWatcher",
    "Watcher",
]


@dataclass(frozen=True, slots=True)
class ReserveResult:
    """Jobs reserved, and when empty, how long until the topic's next timed
    change (a delayed job becoming due, a lease expiring) in ms, or None."""

    jobs: list[Reservation]
    wake_in_ms: float | None


class StoredSchedule(NamedTuple):
    """A recurring schedule as a backend keeps it: ``spec`` is opaque to the
    backend (``chronoq.recurring`` encodes it); ``last_at`` is the latest
    occurrence put (ms), None before the first; ``created_at`` is when the name
    was first defined (ms, the store's clock), kept when it is redefined."""

    name: str
    spec: bytes
    last_at: int | None
    created_at: int


class Watcher(ABC):
    """Taken before a reserve attempt; ``wait`` returns as soon as anything that
    could make a job available happened since, or after ``timeout`` seconds."""

    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """True when woken by a change, False on timeout."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the watcher holds."""

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """End a ``wait`` running in another thread soon (it returns False);
        without this hook, that wait runs to its timeout."""


class Backend(ABC):
    """A store of jobs. Implementations: SQLite (default) and Redis."""

    #: the store URL with any password removed, for messages and logs
    url: str
    #: how many shards a topic's jobs are spread over (SQLite: 1)
    shards: int

    @abstractmethod
    def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> list[PutResult]:
        """Create jobs (deduplicated on id), one result per job in order."""

    @abstractmethod
    def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: Watcher | None = None
    ) -> ReserveResult:
        """Reclaim expired leases, then lease up to ``count`` due jobs, best first.

        ``waiter`` is the watcher the caller waits with when nothing is leased
        (from ``watch``): a backend may hand the timing of the next due job to
        one waiter and tell the others to sleep until woken."""

    @abstractmethod
    def watch(self, topic: str) -> Watcher:
        """A watcher for changes of ``topic`` from now on."""

    # -- the lease calls: each names its job by a JobLease -----------------------------

    @abstractmethod
    def ack_many(self, leases: Sequence[JobLease]) -> list[str]:
        """Remove jobs whose lease is live; returns the ids whose lease was lost."""

    @abstractmethod
    def nack(
        self,
        lease: JobLease,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State:
        """Release a reservation to run again later (``delay_ms`` None: the
        backoff for its attempts), or to dead once attempts are exhausted."""

    @abstractmethod
    def release(self, lease: JobLease, error: str | None) -> None:
        """Give a reserved job back that its consumer did not run to the end
        (a worker shutting down): ready at once, and never dead for it, even
        on its last attempt (its next run may show attempts above
        max_attempts: attempts counts reservations). Appends a nack event.
        Raises ``LeaseLost`` when the lease is not live."""

    @abstractmethod
    def touch(self, lease: JobLease, ttr_ms: int | None) -> int:
        """Push the lease deadline to now + ttr; returns the new deadline (ms)."""

    @abstractmethod
    def bury(self, lease: JobLease, error: str | None) -> None:
        """Move a reserved job to dead."""

    # -- by id ---------------------------------------------------------------------------

    @abstractmethod
    def get(self, topic: str, job_id: str) -> JobInfo | None: ...

    @abstractmethod
    def delete(self, topic: str, job_id: str) -> bool: ...

    @abstractmethod
    def reschedule(self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None) -> bool:
        """New due time for a delayed or ready job; False when absent or not movable."""

    # -- topic-wide ----------------------------------------------------------------------

    @abstractmethod
    def stats(self, topic: str, per_shard: bool = False, groups: bool = False) -> dict[str, Any]:
        """Counts by state; with ``per_shard``, also ``shards``: the counts of
        each; with ``groups``, also ``groups``: the counts of the groups with
        the largest backlogs (``GROUPS_SHOWN``), largest first."""

    @abstractmethod
    def forecast(self, topic: str, until_ms: int, step_ms: int) -> Forecast:
        """How many delayed jobs fall due per step of ``step_ms`` from the
        store's now until ``until_ms``, and after (docs/contract.md §3), read
        from an index of due times, never from the jobs' records. Raises
        ``InvalidInput`` when ``until_ms`` is not later than now or is over
        ``MAX_FORECAST_STEPS`` steps away (``job.forecast_steps``)."""

    @abstractmethod
    def topics(self) -> list[str]: ...

    @abstractmethod
    def dead(self, topic: str, limit: int) -> list[JobInfo]: ...

    @abstractmethod
    def requeue(self, topic: str, ids: Sequence[str] | None) -> int:
        """Move dead jobs (all, or those named) to ready with attempts reset."""

    @abstractmethod
    def purge(self, topic: str) -> int:
        """Delete every job of ``topic``; returns how many."""

    @abstractmethod
    def set_paused(self, topic: str, paused: bool) -> None: ...

    # -- flow control (docs/contract.md §10) -----------------------------------------

    @abstractmethod
    def limits(self, topic: str) -> Limits: ...

    @abstractmethod
    def set_limits(self, topic: str, group: str | None, given: Rule, defaults: Rule) -> Limits:
        """``limits.merged`` of the stored limits with what is given, stored in
        one step (a bucket whose rule changed is full again); the result."""

    @abstractmethod
    def clear_limits(self, topic: str, group: str | None) -> Limits:
        """``limits.cleared`` of the stored limits, stored in one step."""

    @abstractmethod
    def set_group_paused(self, topic: str, group: str, paused: bool) -> None: ...

    @abstractmethod
    def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage:
        """Events after ``cursor`` (None: from the oldest kept), oldest first."""

    # -- reading in bulk (chronoq export, the Spark pipeline, the dashboard) --------------

    @abstractmethod
    def jobs(self, topic: str, shard: int, cursor: str | None, limit: int) -> JobPage:
        """About ``limit`` jobs of one shard of the topic after ``cursor`` (None:
        from the start); the page's cursor is None at the end. A job that stays
        in the shard during the whole scan is returned at least once (Redis
        may return it twice; on Redis, a job rescheduled into the far tier
        during the scan may be missed)."""

    @abstractmethod
    def log_shards(self, topic: str | None) -> list[LogShard]:
        """The separately numbered parts of the event log that hold the
        events of ``topic`` (None: of every topic)."""

    @abstractmethod
    def log_read(self, shard: LogShard, after: int, limit: int) -> LogRead:
        """About ``limit`` events of the shard with a seq above ``after``,
        oldest first, with how many were trimmed before they could be read."""

    @abstractmethod
    def log_trim(self, shard: LogShard, upto: int) -> None:
        """Drop the shard's events up to seq ``upto`` (a store may keep some
        of them, never a later one)."""

    # -- recurring schedules (chronoq.recurring): no events, not jobs ----------------

    @abstractmethod
    def schedules_put(self, topic: str, name: str, spec: bytes) -> bool:
        """Define or redefine a schedule; True if the name is new. A
        redefinition replaces the spec and keeps ``last_at`` and ``created_at``."""

    @abstractmethod
    def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]:
        """The store's clock (ms) and the topic's schedules, in one read."""

    @abstractmethod
    def schedules_remove(self, topic: str, name: str) -> bool:
        """Forget a schedule; True if it existed."""

    @abstractmethod
    def schedules_mark(self, topic: str, name: str, at_ms: int) -> None:
        """Record that the occurrence at ``at_ms`` was put: ``last_at`` becomes
        ``max(last_at, at_ms)``. Nothing happens if the schedule is gone."""

    @abstractmethod
    def close(self) -> None: ...

    def asyncio_backend(self, *, owned: bool) -> AsyncBackend | None:
        """This store on a native asyncio driver (``owned``: closing it closes
        this backend), or None: then ``chronoq.backends.threaded`` runs this
        backend's calls in threads, off the event loop."""
        return None


class AsyncBackend(ABC):
    """The methods of ``Backend`` as coroutines: see
    ``Backend`` for what each does."""

    url: str
    #: how many shards a topic's jobs are spread over (as ``Backend.shards``)
    shards: int = 1

    @abstractmethod
    async def put_many(
        self, topic: str, jobs: Sequence[NewJob], replace: bool
    ) -> list[PutResult]: ...

    @abstractmethod
    async def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: AsyncWatcher | None = None
    ) -> ReserveResult: ...

    @abstractmethod
    async def watch(self, topic: str) -> AsyncWatcher: ...

    async def watch_topics(self, topics: Sequence[str]) -> TopicsWatcher:
        """One watcher of several topics that waits as one (watchers.py):
        here each topic's own, side by side."""
        return await watch_each(self.watch, topics)

    @abstractmethod
    async def ack_many(self, leases: Sequence[JobLease]) -> list[str]: ...

    @abstractmethod
    async def nack(
        self,
        lease: JobLease,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State: ...

    @abstractmethod
    async def release(self, lease: JobLease, error: str | None) -> None: ...

    @abstractmethod
    async def touch(self, lease: JobLease, ttr_ms: int | None) -> int: ...

    @abstractmethod
    async def bury(self, lease: JobLease, error: str | None) -> None: ...

    @abstractmethod
    async def get(self, topic: str, job_id: str) -> JobInfo | None: ...

    @abstractmethod
    async def delete(self, topic: str, job_id: str) -> bool: ...

    @abstractmethod
    async def reschedule(
        self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None
    ) -> bool: ...

    @abstractmethod
    async def stats(
        self, topic: str, per_shard: bool = False, groups: bool = False
    ) -> dict[str, Any]: ...

    @abstractmethod
    async def forecast(self, topic: str, until_ms: int, step_ms: int) -> Forecast: ...

    @abstractmethod
    async def topics(self) -> list[str]: ...

    @abstractmethod
    async def dead(self, topic: str, limit: int) -> list[JobInfo]: ...

    @abstractmethod
    async def requeue(self, topic: str, ids: Sequence[str] | None) -> int: ...

    @abstractmethod
    async def purge(self, topic: str) -> int: ...

    @abstractmethod
    async def set_paused(self, topic: str, paused: bool) -> None: ...

    @abstractmethod
    async def limits(self, topic: str) -> Limits: ...

    @abstractmethod
    async def set_limits(
        self, topic: str, group: str | None, given: Rule, defaults: Rule
    ) -> Limits: ...

    @abstractmethod
    async def clear_limits(self, topic: str, group: str | None) -> Limits: ...

    @abstractmethod
    async def set_group_paused(self, topic: str, group: str, paused: bool) -> None: ...

    @abstractmethod
    async def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage: ...

    @abstractmethod
    async def jobs(self, topic: str, shard: int, cursor: str | None, limit: int) -> JobPage: ...

    @abstractmethod
    async def log_shards(self, topic: str | None) -> list[LogShard]: ...

    @abstractmethod
    async def log_read(self, shard: LogShard, after: int, limit: int) -> LogRead: ...

    @abstractmethod
    async def log_trim(self, shard: LogShard, upto: int) -> None: ...

    @abstractmethod
    async def schedules_put(self, topic: str, name: str, spec: bytes) -> bool: ...

    @abstractmethod
    async def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]: ...

    @abstractmethod
    async def schedules_remove(self, topic: str, name: str) -> bool: ...

    @abstractmethod
    async def schedules_mark(self, topic: str, name: str, at_ms: int) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...
