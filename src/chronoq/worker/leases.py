"""The leases a worker holds: renewed every ttr / 3 while their jobs run,
settled when a handler fails (nack with the topic's backoff, or bury), and
given back at shutdown. While the store is down, settling retries."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from chronoq.aio.queue import AsyncQueue
from chronoq.errors import BackendUnavailable, ChronoqError, LeaseLost
from chronoq.job import Reservation
from chronoq.worker.outcomes import Retry, error_of
from chronoq.worker.pause import Pause
from chronoq.worker.settings import Counts, Settings
from chronoq.worker.slots import Lot, Slots

__all__ = ["Leases"]

log = logging.getLogger("chronoq")

Spawn = Callable[[Coroutine[Any, Any, None]], None]


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
        self.spawn(self.give_back(run.job))

    async def give_back(self, job: Reservation) -> None:
        try:
            await self.q.release(job, error="the worker stopped before its handler ended")
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
        try:
            await self.q.touch(job, ttr=job.ttr)
        except LeaseLost:
            run = self.slots.running.get(token)
            if run is None:  # it finished (and was acked) while this touch was on the wire
                return
            run.renewing = False
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
