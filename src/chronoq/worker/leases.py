"""The leases a worker holds: renewed every ttr / 3 while their jobs are
held, settled when a handler fails (nack with the topic's backoff, or bury),
and given back at shutdown or when a held job's lease ran out before its
handler started. While the store is down, settling retries."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from chronoq.aio.queue import AsyncQueue
from chronoq.errors import BackendUnavailable, ChronoqError, LeaseLost
from chronoq.job import Reservation
from chronoq.worker.outcomes import Retry, error_of
from chronoq.worker.pause import Pause
from chronoq.worker.settings import Counts, Settings
from chronoq.worker.slots import LeaseRanOut, Lot, Slots

__all__ = ["Leases"]

log = logging.getLogger("chronoq")

Spawn = Callable[[Coroutine[Any, Any, None]], None]

STOPPED = "the worker stopped before its handler ended"
NOT_STARTED = "its lease ran out before the worker started its handler"


class Leases:
    def __init__(
        self,
        settings: Settings,
        counts: Counts,
        queue: AsyncQueue,
        slots: Slots,
        spawn: Spawn,
        hurry: asyncio.Event,
    ) -> None:
        self.settings = settings
        self.counts = counts
        self.q = queue
        self.slots = slots
        self.spawn = spawn
        self.hurry = hurry

    async def settle(self, job: Reservation, *, bury: bool, error: BaseException) -> None:
        """Nack or bury a failed job, retrying while the store is down."""
        pause = Pause()
        text = error_of(error)
        delay = error.delay if isinstance(error, Retry) else None
        while True:
            try:
                if bury:
                    await self.q.bury(job, error=text)
                    self.counts.buried += 1
                else:
                    # the topic's own backoff (None: the queue's)
                    backoff = self.settings.backoffs.get(job.topic)
                    await self.q.nack(job, delay=delay, error=text, backoff=backoff)
                    self.counts.retried += 1
                return
            except LeaseLost:
                self.lost([job.id])
                return
            except BackendUnavailable as exc:
                if self.hurry.is_set():
                    return
                log.warning("could not settle job %s, retrying: %s", job.id, exc)
                await pause.sleep()
            except ChronoqError as exc:  # not the store being down: it would fail again
                log.error(
                    "could not %s job %s/%s (it runs again when its lease ends): %s",
                    "bury" if bury else "nack",
                    job.topic,
                    job.id,
                    exc,
                )
                return

    def release(self, token: int) -> None:
        """Give a held job (running, or waiting for a slot) back to the queue at once."""
        run = self.slots.take_back(token)
        self.counts.released += 1
        self.spawn(self.give_back(run.job, STOPPED))

    def not_started(self, job: Reservation, refusal: LeaseRanOut) -> None:
        """A held job was not started: its lease ran out first (``Slots.refusal``)."""
        self.counts.skipped += 1
        late_ms = -refusal.left_s * 1000
        log.warning(
            "job %s/%s (attempt %d) not started: its lease %s; the store delivers it again",
            job.topic,
            job.id,
            job.attempts,
            f"ran out {late_ms:.0f} ms ago" if late_ms >= 0 else f"had only {-late_ms:.0f} ms left",
            extra={
                "chronoq": {
                    "topic": job.topic,
                    "id": job.id,
                    "attempt": job.attempts,
                    "outcome": "not started",
                    "late_ms": round(late_ms, 2),
                }
            },
        )
        # Usually the store has taken the lease back already (the release then
        # fails, quietly). If not (it had a few ms left, or this worker's clock
        # erred early), the job is ready again at once, for any worker, and
        # never goes dead for a run it did not have (an expiry on its last
        # attempt would send it there).
        self.spawn(self.give_back(job, NOT_STARTED))

    async def give_back(self, job: Reservation, reason: str) -> None:
        try:
            await self.q.release(job, error=reason)
        except LeaseLost:  # gone already: the store delivers the job again anyway
            log.debug("job %s/%s was not released: its lease had ended", job.topic, job.id)
        except ChronoqError as exc:
            log.warning(
                "could not release job %s/%s (it runs again when its lease ends): %s",
                job.topic,
                job.id,
                exc,
            )

    def renew(self, lot: Lot) -> None:
        running = self.slots.running
        lot.tokens = [t for t in lot.tokens if t in running and running[t].renewing]
        if not lot.tokens:
            return
        lot.timer = asyncio.get_running_loop().call_later(lot.period, self.renew, lot)
        for token in lot.tokens:
            self.spawn(self.touch(token, running[token].job))

    async def touch(self, token: int, job: Reservation) -> None:
        sent = time.monotonic()  # the store renewed the lease after this (see Slots.hold)
        try:
            await self.q.touch(job, ttr=job.ttr)
            run = self.slots.running.get(token)
            if run is not None and run.renewing:  # not after a later touch's LeaseLost
                run.leased_until = max(run.leased_until, sent + job.ttr)
        except LeaseLost:
            run = self.slots.running.get(token)
            if run is None:  # it finished (and was acked) while this touch was on the wire
                return
            run.renewing = False
            # a job still waiting for a slot is then never started: Slots.refusal
            run.leased_until = min(run.leased_until, sent)
            if run.started is None:
                return  # logged by the refusal
            log.warning("lost the lease of job %s/%s while its handler ran", job.topic, job.id)
        except ChronoqError as exc:  # the next renewal tries again
            log.warning("could not renew the lease of job %s/%s: %s", job.topic, job.id, exc)

    def lost(self, ids: list[str]) -> None:
        self.counts.lost += len(ids)
        log.warning(
            "%d jobs finished after their lease was lost (they run again): %s",
            len(ids),
            ", ".join(ids[:10]),
        )
