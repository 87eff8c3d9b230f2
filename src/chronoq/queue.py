"""Queue: the synchronous facade over a Backend. It validates input, applies
defaults and runs the wait loop of ``reserve``; the backend does the rest."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from chronoq.backends import Backend, StoreURL, open_backend
from chronoq.backoff import Backoff
from chronoq.errors import InvalidInput, InvalidJob, LeaseLost
from chronoq.job import (
    DEFAULT_MAX_PAYLOAD,
    EventPage,
    Job,
    JobInfo,
    PutResult,
    Reservation,
    duration_ms,
    prepare_job,
    run_at_ms,
    validate_id,
    validate_topic,
)
from chronoq.states import State

__all__ = ["Queue", "connect"]

MAX_COUNT = 10_000
MAX_WAIT_S = 3600.0
MAX_ERROR_CHARS = 10_000
LeaseRef = Reservation | str


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


def _error_text(error: object) -> str | None:
    if error is None:
        return None
    text = str(error)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


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
        try:
            validate_topic(topic)
        except InvalidInput as exc:
            raise InvalidJob(str(exc)) from None
        prepared = [
            prepare_job(job, self.max_payload, index if batch else None)
            for index, job in enumerate(jobs)
        ]
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
        validate_topic(topic)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise InvalidInput(f"count must be an integer from 1 to {MAX_COUNT}, got {count!r}")
        wait_s = duration_ms(wait, "wait") / 1000
        if wait_s > MAX_WAIT_S:
            raise InvalidInput(f"wait must be at most {MAX_WAIT_S:g} seconds, got {wait!r}")
        ttr_ms = None if ttr is None else duration_ms(ttr, "ttr", minimum_ms=1)
        end = time.monotonic() + wait_s
        watcher = self.backend.watch(topic) if wait_s > 0 else None
        try:
            while True:
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

    def ack(self, job: LeaseRef, id: str | None = None, lease: str | None = None) -> None:
        """Finish a reserved job: it is gone. Raises ``LeaseLost`` if the lease is not live."""
        topic, job_id, token = self._lease(job, id, lease)
        if self.backend.ack_many(topic, [(job_id, token)]):
            raise LeaseLost(topic, job_id)

    def ack_many(self, jobs: Iterable[Reservation]) -> list[str]:
        """Ack every job still leased; returns the ids whose lease was lost."""
        by_topic: dict[str, list[tuple[str, str]]] = {}
        for job in jobs:
            topic, job_id, token = self._lease(job, None, None)
            by_topic.setdefault(topic, []).append((job_id, token))
        lost: list[str] = []
        for topic, leases in by_topic.items():
            lost.extend(self.backend.ack_many(topic, leases))
        return lost

    def nack(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        delay: float | None = None,
        error: object = None,
    ) -> State:
        """Give a reserved job back to run again after ``delay`` seconds (default:
        exponential backoff with jitter), or to dead when its attempts are used
        up. Returns the state it went to."""
        topic, job_id, token = self._lease(job, id, lease)
        delay_ms = None if delay is None else duration_ms(delay, "delay")
        return self.backend.nack(
            topic, job_id, token, delay_ms, _error_text(error), self.backoff, random.random()
        )

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
        topic, job_id, token = self._lease(job, id, lease)
        ttr_ms = None if ttr is None else duration_ms(ttr, "ttr", minimum_ms=1)
        return self.backend.touch(topic, job_id, token, ttr_ms)

    def bury(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """Move a reserved job to dead (kept for inspection and ``requeue``)."""
        topic, job_id, token = self._lease(job, id, lease)
        self.backend.bury(topic, job_id, token, _error_text(error))

    @staticmethod
    def _lease(job: LeaseRef, job_id: str | None, lease: str | None) -> tuple[str, str, str]:
        if isinstance(job, Reservation):
            if job_id is not None or lease is not None:
                raise InvalidInput("pass a Reservation, or topic, id and lease; not both")
            return job.topic, job.id, job.lease
        if job_id is None or lease is None:
            raise InvalidInput("pass a Reservation, or all three of topic, id and lease")
        if not isinstance(lease, str) or not lease:
            raise InvalidInput(f"lease must be the token of a reservation, got {lease!r}")
        return validate_topic(job), validate_id(job_id), lease

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
        validate_topic(topic)
        validate_id(id)
        if (delay is None) == (run_at is None):
            raise InvalidInput("reschedule takes exactly one of delay or run_at")
        delay_ms = 0 if delay is None else duration_ms(delay, "delay")
        at_ms = None if run_at is None else run_at_ms(run_at)
        return self.backend.reschedule(topic, id, delay_ms, at_ms)

    # -- topic-wide --------------------------------------------------------------

    def stats(self, topic: str) -> dict[str, Any]:
        """Counts by state and more: delayed, ready, reserved, dead, total,
        paused, next_due_at (ms or None)."""
        return self.backend.stats(validate_topic(topic))

    def topics(self) -> list[str]:
        """Topics that hold jobs or are paused, sorted."""
        return self.backend.topics()

    def dead(self, topic: str, limit: int = 100) -> list[JobInfo]:
        """Dead jobs, oldest death first."""
        _check_limit(limit)
        return self.backend.dead(validate_topic(topic), limit)

    def requeue(self, topic: str, ids: Sequence[str] | None = None) -> int:
        """Move dead jobs (all, or those in ``ids``) back to ready with attempts
        reset; returns how many moved."""
        validate_topic(topic)
        if isinstance(ids, str):
            raise InvalidInput("ids must be a list of ids, not one string")
        if ids is not None:
            ids = [validate_id(job_id) for job_id in ids]
        return self.backend.requeue(topic, ids)

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
        _check_limit(limit)
        return self.backend.events(None if topic is None else validate_topic(topic), cursor, limit)


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100_000:
        raise InvalidInput(f"limit must be an integer from 1 to 100000, got {limit!r}")
