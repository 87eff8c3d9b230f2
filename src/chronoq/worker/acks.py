"""Acks in batches: whatever finished while the previous ``ack_many`` was on
the wire goes in the next one, so a busy worker acks a hundred jobs per round
trip and an idle one acks each job at once (no timer, no added latency)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from chronoq.aio.queue import AsyncQueue
from chronoq.errors import BackendUnavailable, ChronoqError
from chronoq.job import Reservation
from chronoq.worker.pause import Pause

__all__ = ["AckBatcher"]

log = logging.getLogger("chronoq")


class AckBatcher:
    def __init__(self, queue: AsyncQueue, on_lost: Callable[[list[str]], None]) -> None:
        self._queue = queue
        self._on_lost = on_lost
        self._pending: list[Reservation] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.task = asyncio.get_running_loop().create_task(self._run(), name="chronoq-acks")

    def add(self, job: Reservation) -> None:
        self._pending.append(job)
        self._idle.clear()
        self._wake.set()

    async def _run(self) -> None:
        pause = Pause()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    lost = await self._queue.ack_many(batch)
                except BackendUnavailable as exc:
                    # keep them: once the store is back the acks go through
                    # (or report lost leases, whose jobs are redelivered)
                    self._pending[:0] = batch
                    log.warning("could not ack %d jobs, will retry: %s", len(batch), exc)
                    await pause.sleep()
                    continue
                except ChronoqError as exc:  # not the store's fault: do not spin on it
                    log.error(
                        "acking %d jobs failed; they will be redelivered: %s", len(batch), exc
                    )
                    continue
                pause.reset()
                if lost:
                    self._on_lost(lost)
            self._idle.set()

    async def flush(self, timeout: float) -> bool:
        """Wait until every ack added so far went out; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
