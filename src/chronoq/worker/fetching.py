"""A worker's fetchers, one per topic: each reserves due jobs for the free
slots and up to a prefetch more, through the facade's single reserve attempt
and watcher, and waits the facade's way when nothing is due."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from chronoq.aio.queue import AsyncQueue
from chronoq.backends.base import AsyncWatcher, ReserveResult
from chronoq.errors import BackendUnavailable, ChronoqError
from chronoq.worker.pause import Pause
from chronoq.worker.settings import Settings
from chronoq.worker.slots import Lot, Slots

__all__ = ["HOLD_S", "Fetcher"]

log = logging.getLogger("chronoq")

HOLD_S = 0.05  # an automatic prefetch holds what the slots run in about this long
IDLE_WAIT_S = 5.0  # a waiting fetcher checks that it should still wait this often


class Fetcher:
    """Reserves jobs into ``slots``; ``renew`` is called ttr / 3 after each
    reserve, for the lot of jobs it leased."""

    def __init__(
        self,
        settings: Settings,
        queue: AsyncQueue,
        slots: Slots,
        stopping: asyncio.Event,
        renew: Callable[[Lot], None],
        held_back: Callable[[], int] = lambda: 0,
    ) -> None:
        """``held_back``: finished jobs whose acks cannot go out now (acks.py):
        they take room, as running jobs do."""
        self.settings = settings
        self.q = queue
        self.slots = slots
        self.stopping = stopping
        self.renew = renew
        self.held_back = held_back
        self.claimed = 0  # room taken by reserves on the wire (held jobs: slots.running)

    async def fetch(self, topic: str) -> None:
        pause = Pause()
        watcher: AsyncWatcher | None = None
        try:
            while not self.stopping.is_set():
                try:
                    if watcher is None:
                        watcher = await self.q.watch(topic)
                    await self.fetch_once(topic, watcher)
                    pause.reset()
                except ChronoqError as exc:
                    if not isinstance(exc, BackendUnavailable):
                        log.error("reserving from %s failed: %s", topic, exc)
                    else:
                        log.warning(
                            "store unavailable while reserving %s, retrying: %s", topic, exc
                        )
                    if watcher is not None:
                        with contextlib.suppress(ChronoqError):
                            await watcher.close()
                        watcher = None
                    await pause.sleep()
        finally:
            if watcher is not None:
                with contextlib.suppress(ChronoqError):
                    await watcher.close()

    async def fetch_once(self, topic: str, watcher: AsyncWatcher) -> None:
        slots, settings = self.slots, self.settings
        while True:
            capacity = settings.concurrency + self.prefetch()
            room = capacity - len(slots.running) - self.claimed - self.held_back()
            # while jobs wait for a slot, wait for half the room: one reserve of
            # many jobs rather than one round trip per freed slot
            if room > 0 and not (slots.waiting and room < max(1, capacity // 2)):
                break
            slots.room_freed.clear()
            await slots.room_freed.wait()
            if self.stopping.is_set():
                return
        claimed = min(room, settings.batch)
        self.claimed += claimed  # other topics' fetchers do not take this room meanwhile
        started = 0
        # before the call: the store starts the leases after this, so the
        # local ends below are never later than the store's, however long the
        # answer took (or the process was frozen) on the way back
        sent = time.monotonic()
        try:
            result, cancel = await self.lease(topic, claimed, watcher)
            lots: dict[float, Lot] = {}
            for job in result.jobs:
                lot = lots.get(job.ttr)
                if lot is None:
                    lot = lots[job.ttr] = Lot(job.ttr / 3, [])
                slots.hold(job, lot, sent + job.ttr)
                started += 1
            loop = asyncio.get_running_loop()
            for lot in lots.values():
                lot.timer = loop.call_later(lot.period, self.renew, lot)
        finally:
            self.claimed -= claimed
            if claimed > started:
                slots.room_freed.set()
        if cancel is not None:
            raise cancel
        if not result.jobs:
            await self.q.wait_for_jobs(watcher, result, IDLE_WAIT_S)

    def prefetch(self) -> int:
        """Jobs to hold beyond the running ones: the worker's setting, or, when
        automatic, what the slots run in about HOLD_S at the recent run time (none
        until a job has ended): many for tiny jobs, none for long ones, so a job
        never waits long here while another worker is free."""
        settings = self.settings
        if settings.prefetch is not None:
            return settings.prefetch
        mean_run_s = self.slots.mean_run_s
        if mean_run_s is None:
            return 0
        return min(settings.batch, int(settings.concurrency * HOLD_S / max(mean_run_s, 1e-6)))

    async def lease(
        self, topic: str, count: int, watcher: AsyncWatcher
    ) -> tuple[ReserveResult, asyncio.CancelledError | None]:
        """Reserve; if the worker stops meanwhile, the jobs and the cancellation."""
        call = asyncio.ensure_future(
            self.q.reserve_once(topic, count, ttr=self.settings.ttr, watcher=watcher)
        )
        try:
            result = await asyncio.shield(call)
        except asyncio.CancelledError as cancel:
            # the call may lease jobs: they run within the grace like the others.
            # Giving them back would use up an attempt of jobs that never ran
            # (and a job on its last attempt would go dead)
            return await call, cancel
        return result, None
