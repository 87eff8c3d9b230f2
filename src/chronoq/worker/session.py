"""One run of a Worker on one event loop: its fetchers (fetching.py), the
jobs it holds and their slots (slots.py), their leases (leases.py), acks in
batches (acks.py), recurring occurrences, and the shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine
from typing import Any

from chronoq.aio.queue import AsyncQueue
from chronoq.errors import ChronoqError
from chronoq.job import Reservation
from chronoq.worker.acks import AckBatcher
from chronoq.worker.fetching import Fetcher
from chronoq.worker.leases import Leases
from chronoq.worker.outcomes import log_outcome, outcome_of
from chronoq.worker.pause import Pause
from chronoq.worker.settings import Counts, Handler, Settings
from chronoq.worker.slots import LeaseRanOut, Slots

__all__ = ["Session"]

log = logging.getLogger("chronoq")

RECURRING_REFRESH_S = 1.0  # schedules added by other processes are seen this soon
SETTLE_TIMEOUT_S = 5.0  # at shutdown, for the last acks, nacks and releases


class Session:
    """One run of a worker, on one event loop."""

    def __init__(self, settings: Settings, counts: Counts, loop: asyncio.AbstractEventLoop) -> None:
        self.settings = settings
        self.counts = counts
        self.loop = loop
        if isinstance(settings.queue, AsyncQueue):
            self.q, self._owns_queue = settings.queue, False
        else:
            self.q, self._owns_queue = AsyncQueue.from_queue(settings.queue), True
        self.stopping = asyncio.Event()
        self.hurry = asyncio.Event()  # a second signal: no grace
        self.side_tasks: set[asyncio.Task[Any]] = set()
        self.signals = 0
        self.slots = Slots(settings, loop, self.stopping, self.finished, self.run_async)
        self.leases = Leases(settings, counts, self.q, self.slots, self.spawn, self.hurry)
        self.fetcher = Fetcher(
            settings, self.q, self.slots, self.stopping, self.leases.renew, self._acks_held_back
        )

    def _acks_held_back(self) -> int:  # asked by the fetchers, which run() starts after acks
        return self.acks.held_back()

    # -- stopping --------------------------------------------------------------------

    def on_signal(self, signum: int) -> None:
        self.signals += 1
        log.info(
            "%s received: %s",
            signal.Signals(signum).name,
            "stopping now" if self.signals > 1 else "stopping after the running jobs",
        )
        self.request_stop(self.signals > 1)

    def request_stop(self, now: bool = False) -> None:
        self.stopping.set()
        self.slots.room_freed.set()
        if now:
            self.hurry.set()

    # -- the session ------------------------------------------------------------------

    async def run(self) -> None:
        self.acks = AckBatcher(self.q, self.leases.lost, self.slots.room_freed.set)
        topics = sorted(self.settings.handlers)
        loops = [
            self.loop.create_task(self.fetcher.fetch(t), name=f"chronoq-fetch-{t}") for t in topics
        ]
        if self.settings.recurring:
            loops += [
                self.loop.create_task(self.schedule(t), name=f"chronoq-recurring-{t}")
                for t in topics
            ]
        log.info(
            "worker started: topics %s, concurrency %d, store %s",
            ", ".join(topics),
            self.settings.concurrency,
            self.q.url,
        )
        # these tasks end only when stopping, or on a bug: then the worker
        # stops and raises it, rather than going on without a fetcher
        stopped = self.loop.create_task(self.stopping.wait())
        try:
            done, _ = await asyncio.wait(
                [stopped, *loops, self.acks.task], return_when=asyncio.FIRST_COMPLETED
            )
            failure = _failure(done - {stopped})
            if failure is not None:
                log.error("the worker stops: %s failed", failure[0], exc_info=failure[1])
                self.request_stop()
        finally:
            stopped.cancel()
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self.shut_down()
        if failure is not None:
            raise failure[1]

    async def shut_down(self) -> None:
        slots = self.slots
        # jobs that never started go back at once, where another worker may be free
        for token in slots.take_waiting():
            self.leases.release(token)
        if slots.running and not self.hurry.is_set():
            log.info(
                "waiting up to %g s for %d running jobs", self.settings.grace, len(slots.running)
            )
            waits = [
                self.loop.create_task(slots.idle.wait()),
                self.loop.create_task(self.hurry.wait()),
            ]
            await asyncio.wait(
                waits, timeout=self.settings.grace, return_when=asyncio.FIRST_COMPLETED
            )
            for task in waits:
                task.cancel()
        for token in list(slots.running):
            self.leases.release(token)
        if self.side_tasks:
            await asyncio.wait(set(self.side_tasks), timeout=SETTLE_TIMEOUT_S)
        if not await self.acks.flush(SETTLE_TIMEOUT_S):
            log.warning("some acks did not reach the store; those jobs will be redelivered")
        await self.acks.close()
        slots.threads.close()
        for task in set(self.side_tasks):
            task.cancel()
        if self._owns_queue:
            await self.q.close()
        counts = self.counts
        log.info(
            "worker stopped: %d acked, %d retried, %d buried, %d released, "
            "%d not started (lease ran out)",
            counts.acked,
            counts.retried,
            counts.buried,
            counts.released,
            counts.skipped,
        )

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coroutine)
        self.side_tasks.add(task)
        task.add_done_callback(self.side_tasks.discard)

    # -- handlers ending ---------------------------------------------------------------

    def run_async(self, handler: Handler, job: Reservation, token: int) -> asyncio.Task[None]:
        return self.loop.create_task(self._run_async(handler, job, token))

    async def _run_async(self, handler: Handler, job: Reservation, token: int) -> None:
        # here, not when the task was made: the loop may have stalled since
        refusal = self.slots.refusal(token)
        if refusal is not None:
            self.finished(token, refusal)
            return
        try:
            await handler(job)
        except asyncio.CancelledError:
            # cancelled by someone else than release(): a failed run, unless the
            # loop is ending in a hurry (asyncio cancels every task), when the
            # shutdown that follows releases the job as it does the others
            if token in self.slots.running and not self.hurry.is_set():
                self.finished(token, RuntimeError("the handler was cancelled"))
            raise
        except (KeyboardInterrupt, SystemExit):
            # asyncio ends the loop with them, and the shutdown that follows
            # would wait the whole grace for this job: skip it, and let the
            # shutdown release this job and the others at once
            self.request_stop(now=True)
            raise
        except Exception as exc:
            self.finished(token, exc)
        else:
            self.finished(token, None)

    def finished(self, token: int, error: BaseException | None, chained: bool = False) -> None:
        """A handler ended (on the loop): free its slot (unless its thread went
        on to the next job, ``chained``) and settle its job. A ``LeaseRanOut``
        error: the handler was not called (``Slots.refusal``)."""
        if isinstance(error, LeaseRanOut):
            refused = self.slots.end(token, chained, ran=False)
            if refused is not None:
                self.leases.not_started(refused[0].job, error)
            return
        ended = self.slots.end(token, chained)
        if ended is None:
            return
        run, ran_s = ended
        job = run.job
        outcome = outcome_of(job, error)
        if error is None:
            self.acks.add(job)
            self.counts.acked += 1
        else:  # a nack of a job on its last attempt moves it to dead
            self.spawn(self.leases.settle(job, bury=outcome == "bury", error=error))
        if log.isEnabledFor(logging.INFO):
            log_outcome(job, ran_s * 1000, outcome, error)

    # -- recurring jobs -----------------------------------------------------------------

    async def schedule(self, topic: str) -> None:
        """Put the topic's recurring occurrences as they fall due."""
        pause = Pause()
        while not self.stopping.is_set():
            try:
                run = await self.q.run_recurring(topic)
                pause.reset()
                sleep = RECURRING_REFRESH_S
                if run.next_in is not None:  # the store's clock: not time.time()
                    sleep = min(sleep, max(run.next_in, 0.0))
            except ChronoqError as exc:
                log.warning("could not put the recurring jobs of %s: %s", topic, exc)
                sleep = pause.take()
            await asyncio.sleep(sleep)


def _failure(tasks: set[asyncio.Task[Any]]) -> tuple[str, BaseException] | None:
    """The name and exception of a task that failed, if one did."""
    for task in tasks:
        if not task.cancelled() and (exc := task.exception()) is not None:
            return task.get_name(), exc
    return None
