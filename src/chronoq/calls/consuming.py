"""Reserving jobs, and the calls of a lease: ack, nack, release, touch, bury."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable

from chronoq.backends.base import AsyncWatcher, ReserveResult, Watcher
from chronoq.backoff import Backoff
from chronoq.calls.call import (
    Call,
    Close,
    GiveBack,
    Lease,
    StoreSide,
    StoreSteps,
    Use,
    Wait,
    known,
)
from chronoq.calls.checks import (
    LeaseRef,
    error_text,
    lease_args,
    leases_of,
    nack_args,
    optional_ttr_ms,
    reserve_args,
)
from chronoq.errors import LeaseLost
from chronoq.job import JobLease, Reservation
from chronoq.states import State

__all__ = ["Ack", "AckMany", "Bury", "Nack", "Release", "Reserve", "ReserveOnce", "Touch"]


class Reserve(Call[list[Reservation]]):
    """Lease up to ``count`` due jobs, highest priority first.

    With ``wait`` > 0 and nothing due, sleep until a job becomes due or is
    put (no polling interval), at most ``wait`` seconds; then ``[]``.
    ``ttr`` overrides the jobs' own lease length. On asyncio, cancelling a
    waiting reserve is safe: no job is leased by a call that did not return.
    Over HTTP it is a long poll, answered as soon as a job is due."""

    __slots__ = ("count", "topic", "ttr", "ttr_ms", "wait_s")

    def __init__(
        self, topic: str, count: int = 1, *, wait: float = 0.0, ttr: float | None = None
    ) -> None:
        self.wait_s, self.ttr_ms = reserve_args(topic, count, wait, ttr)
        self.topic = topic
        self.count = count
        self.ttr = ttr

    def store(self, side: StoreSide) -> StoreSteps[list[Reservation]] | Use:
        if self.wait_s <= 0:  # one attempt
            return Lease(self.topic, self.count, self.ttr_ms, None, _jobs_of)
        return self._waiting()

    def _waiting(self) -> StoreSteps[list[Reservation]]:
        end = time.monotonic() + self.wait_s
        watcher = yield Use("watch", (self.topic,))
        try:
            while True:
                result: ReserveResult = yield Lease(self.topic, self.count, self.ttr_ms, watcher)
                remaining = end - time.monotonic()
                if result.jobs or remaining <= 0:
                    break
                yield Wait(watcher, result, remaining)
        except (
            BaseException
        ):  # nothing leased yet (or a closed coroutine's wind-up): close, then the failure goes on
            yield Close(watcher)
            raise
        try:
            yield Close(watcher)
        except BaseException:  # cancelled with the jobs in hand
            yield GiveBack(result.jobs)
            raise
        return result.jobs


def _jobs_of(result: ReserveResult) -> list[Reservation]:
    return result.jobs


class ReserveOnce(Call[ReserveResult]):
    """One reserve attempt, without waiting: the jobs leased, and when
    there are none, how long until the topic's next timed change (ms, or
    None). ``watcher``: the one the caller will wait with (``watch``). On
    asyncio, cancelling it may leave jobs leased (``reserve`` gives them
    back)."""

    __slots__ = ("count", "topic", "ttr_ms", "watcher")

    def __init__(
        self,
        topic: str,
        count: int = 1,
        *,
        ttr: float | None = None,
        watcher: Watcher | AsyncWatcher | None = None,
    ) -> None:
        _, self.ttr_ms = reserve_args(topic, count, 0.0, ttr)
        self.topic = topic
        self.count = count
        self.watcher = watcher

    def store(self, side: StoreSide) -> Use:
        return Use("reserve", (self.topic, self.count, self.ttr_ms, self.watcher))


class Ack(Call[None]):
    """Finish a reserved job: it is gone. Raises ``LeaseLost`` if the lease
    is not live. The job is a ``Reservation``, or its topic, id and lease."""

    __slots__ = ("held",)

    def __init__(self, job: LeaseRef, id: str | None = None, lease: str | None = None) -> None:
        self.held = lease_args(job, id, lease)

    def store(self, side: StoreSide) -> Use:
        return Use("ack_many", ([self.held],), self._lost)

    def _lost(self, lost: list[str]) -> None:
        if lost:
            raise LeaseLost(self.held.topic, self.held.id)


class AckMany(Call[list[str]]):
    """Ack every job still leased (reservations, or ``JobLease`` values of
    any topics); returns the ids whose lease was lost. Over HTTP, one
    request per topic and ``max_batch`` leases."""

    __slots__ = ("leases",)

    def __init__(self, jobs: Iterable[Reservation | JobLease]) -> None:
        self.leases = leases_of(jobs)

    def store(self, side: StoreSide) -> StoreSteps[list[str]] | Use:
        return Use("ack_many", (self.leases,)) if self.leases else known([])


class Nack(Call[State]):
    """Give a reserved job back to run again after ``delay`` seconds
    (default: exponential backoff with jitter, ``backoff`` or the queue's),
    or to dead when its attempts are used up. Returns the state it went to.
    Over HTTP, without ``delay``, the server's backoff (a ``backoff`` is
    refused: it is the server's setting)."""

    __slots__ = ("backoff", "delay_ms", "error", "held")

    def __init__(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        delay: float | None = None,
        error: object = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.held = lease_args(job, id, lease)
        self.delay_ms, self.backoff = nack_args(delay, backoff)
        self.error = error_text(error)

    def store(self, side: StoreSide) -> Use:
        curve = self.backoff or side.backoff
        return Use("nack", (self.held, self.delay_ms, self.error, curve, random.random()))


class _Settle(Call[None]):
    """A lease call that settles the job, with the error kept as ``last_error``."""

    __slots__ = ("error", "held")
    method = ""  # the backend's

    def __init__(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        self.held = lease_args(job, id, lease)
        self.error = error_text(error)

    def store(self, side: StoreSide) -> Use:
        return Use(self.method, (self.held, self.error))


class Release(_Settle):
    """Give back a reserved job that was not run to the end (a consumer
    shutting down): ready at once, never dead for it, even on its last
    attempt. Raises ``LeaseLost`` if the lease is not live."""

    __slots__ = ()
    method = "release"


class Touch(Call[int]):
    """Extend the lease to now + ``ttr`` (default: the job's ttr).

    Returns the new deadline in ms since the epoch."""

    __slots__ = ("held", "ttr_ms")

    def __init__(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        ttr: float | None = None,
    ) -> None:
        self.held = lease_args(job, id, lease)
        self.ttr_ms = optional_ttr_ms(ttr)

    def store(self, side: StoreSide) -> Use:
        return Use("touch", (self.held, self.ttr_ms))


class Bury(_Settle):
    """Move a reserved job to dead (kept for inspection and ``requeue``)."""

    __slots__ = ()
    method = "bury"
