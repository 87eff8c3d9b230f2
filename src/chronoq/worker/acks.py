"""Acks in batches: whatever finished while the previous ``ack_many`` was on
the wire goes in the next one, so a busy worker acks a hundred jobs per round
trip and an idle one acks each job at once (no timer, no added latency).

A finished job's lease is no longer renewed: its ack must land within its
ttr, or the job runs again elsewhere. So when the store does not take acks,
they are tried again after at most a third of the shortest ttr waiting (and
at once when another job finishes: the store may be back), not after the
reconnect backoff (up to 5 s); and the jobs they hold count against the
fetcher's room (``held_back``), so that a worker does not go on running jobs
whose acks cannot go out (the fault suite saw hundreds run twice after a
3 s cut)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from chronoq.aio.queue import AsyncQueue
from chronoq.errors import BackendUnavailable, ChronoqError
from chronoq.job import Reservation
from chronoq.worker.pause import Pause

__all__ = ["AckBatcher"]

log = logging.getLogger("chronoq")

#: an ack_many on the wire this long (a failover, a slot migration) holds back fetching
STUCK_S = 0.5


class AckBatcher:
    def __init__(
        self,
        queue: AsyncQueue,
        on_lost: Callable[[list[str]], None],
        on_clear: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_clear``: acks that were held back went out (room for the fetcher)."""
        self._queue = queue
        self._on_lost = on_lost
        self._on_clear = on_clear
        self._pending: list[Reservation] = []
        self._sending = 0  # jobs in the ack_many on the wire
        self._sent_at: float | None = None  # when it was sent
        self._failing = False  # the last ack_many met an unavailable store
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.task = asyncio.get_running_loop().create_task(self._run(), name="chronoq-acks")

    def add(self, job: Reservation) -> None:
        self._pending.append(job)
        self._idle.clear()
        self._wake.set()

    def held_back(self) -> int:
        """Finished jobs whose acks the store is not taking now (0 while acks flow)."""
        sent_at = self._sent_at
        stuck = sent_at is not None and time.monotonic() - sent_at > STUCK_S
        return len(self._pending) + self._sending if self._failing or stuck else 0

    async def _run(self) -> None:
        pause = Pause()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                held = self.held_back() > 0  # the fetchers may be waiting for these
                batch, self._pending = self._pending, []
                sent_at = time.monotonic()
                self._sending, self._sent_at = len(batch), sent_at
                try:
                    lost = await self._queue.ack_many(batch)
                except BackendUnavailable as exc:
                    # keep them: once the store is back the acks go through
                    # (or report lost leases, whose jobs are redelivered)
                    self._pending[:0] = batch
                    self._failing = True
                    log.warning("could not ack %d jobs, will retry: %s", len(batch), exc)
                    await self._retry_pause(pause)
                    continue
                except ChronoqError as exc:  # not the store's fault: do not spin on it
                    log.error(
                        "acking %d jobs failed; they will be redelivered: %s", len(batch), exc
                    )
                    continue
                finally:
                    self._sending, self._sent_at = 0, None
                self._failing = False
                pause.reset()
                if held or time.monotonic() - sent_at > STUCK_S:
                    self._on_clear()
                if lost:
                    self._on_lost(lost)
            self._idle.set()

    async def _retry_pause(self, pause: Pause) -> None:
        """The backoff, cut to a third of the shortest ttr waiting, and ended
        early when another job finishes."""
        wait = min(pause.take(), min(job.ttr for job in self._pending) / 3)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), wait)

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
