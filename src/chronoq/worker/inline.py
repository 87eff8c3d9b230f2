"""Quick plain-function handlers run on the event loop, one after another.

A job handed to a handler thread costs two thread switches and the GIL
passing back and forth: for a handler that runs in a few µs that is most of
the job's cost (a drain of tiny jobs ran at a third of what one thread
reaching the store alone did). So a plain function that is quick runs on the
loop itself, its waiting jobs in turn, yielding to the loop every ``TURN_S``.

Quick is told on the loop, not in the threads, whose timings include their
waits for the GIL: while its runs in threads average under ``SLOW_S``, a
handler has a round of ``PROBES`` jobs run on the loop as probes; if none
raised, none took over ``LONG_S`` and their median is under ``QUICK_S`` (a
median: a probe may wait for the GIL behind a busy thread), it runs on the
loop from then on. A run there longer than ``LONG_S``, or runs that average
over ``SLOW_S``, send it back to the threads, and the next round comes ten
times later: a handler that is sometimes slow stalls the loop (its lease
renewals, its fetches) for one run at a time, ever more rarely. A probe
that raises sends it back too: some code refuses to run where an event
loop runs (Django's ORM, ``asyncio.run``) and would fail every job there.
Every change of state starts an epoch: a run started in an earlier one (a
job queued on the loop before its handler went back to the threads) is not
counted. ``Worker(inline=False)`` (``chronoq worker --no-inline``) keeps
every plain function in the threads.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["LONG_S", "PROBES", "QUICK_S", "SLOW_S", "InlineRuns", "Quickness"]

QUICK_S = 0.0002  # a run this short costs less than its hand-off to a thread
SLOW_S = 0.002  # runs this long on average delay everything else on the loop
LONG_S = 0.01  # one run this long on the loop: back to the threads at once
PROBES = 21  # jobs run on the loop as probes, in a row
FIRST_PROBE = 100  # jobs in threads before the first probes
MOST_BETWEEN = 1_000_000  # the longest wait between two rounds of probes, in jobs
TURN_S = 0.002  # inline runs between two looks at the rest of the loop

#: told on the loop when a job ran inline: (token, error, chained=False)
Ended = Callable[[int, BaseException | None, bool], None]


class _Topic:
    __slots__ = ("between", "countdown", "epoch", "handed", "inline", "mean_s", "probes")

    def __init__(self) -> None:
        self.inline = False
        self.mean_s = SLOW_S  # a moving average of the runs' wall time
        self.between = FIRST_PROBE  # jobs in threads between two rounds of probes
        self.countdown = FIRST_PROBE
        self.handed = 0  # probes of this round handed out (0: no round)
        self.probes: list[float] = []  # their times, as they come
        self.epoch = 0  # counts the changes of state


class Quickness:
    """Which topics' handlers run on the loop. ``threaded`` is told from the
    handler threads; a lost update under a race only delays a switch."""

    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}

    def _of(self, topic: str) -> _Topic:
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = _Topic()
        return state

    def on_loop(self, topic: str) -> bool:
        """Whether the next job of ``topic`` runs on the loop (inline or as a probe)."""
        state = self._of(topic)
        if state.inline:
            return True
        if state.handed:  # a round under way: its probes, then threads until it is judged
            if state.handed >= PROBES:
                return False
            state.handed += 1
            return True
        state.countdown -= 1
        if state.countdown > 0 or state.mean_s >= SLOW_S:
            return False
        state.handed, state.probes = 1, []
        state.epoch += 1
        return True

    def thread_may_take(self, topic: str) -> bool:
        """Whether a handler thread that ended a job may go on to the next of
        ``topic`` itself; else the job starts from the loop, which asks
        ``on_loop`` (so that each job is counted once)."""
        state = self._of(topic)
        if state.inline:
            return False
        if state.handed:
            return state.handed >= PROBES
        if state.countdown <= 1 and state.mean_s < SLOW_S:
            return False  # a round starts with this job: on_loop starts it
        state.countdown -= 1
        return True

    def epoch(self, topic: str) -> int:
        return self._of(topic).epoch

    def threaded(self, topic: str, seconds: float) -> None:
        state = self._of(topic)
        if not state.inline:
            state.mean_s += 0.1 * (seconds - state.mean_s)

    def ran(self, topic: str, epoch: int, seconds: float, failed: bool = False) -> None:
        """A run on the loop, handed out in ``epoch``, took ``seconds`` (and raised)."""
        state = self._of(topic)
        if epoch != state.epoch:
            return  # handed out before the state changed: says nothing of this one
        if state.inline:
            state.mean_s += 0.05 * (seconds - state.mean_s)
            if seconds > LONG_S or state.mean_s > SLOW_S:
                self._back_to_threads(state)
            return
        if failed or seconds > LONG_S:
            self._back_to_threads(state)
            return
        state.probes.append(seconds)
        if len(state.probes) < PROBES:
            return
        if sorted(state.probes)[PROBES // 2] <= QUICK_S:
            state.inline, state.handed, state.probes = True, 0, []
            state.mean_s = QUICK_S
            state.epoch += 1
        else:
            self._back_to_threads(state)

    @staticmethod
    def _back_to_threads(state: _Topic) -> None:
        state.inline, state.handed, state.probes = False, 0, []
        state.mean_s = SLOW_S  # measured afresh in the threads
        state.between = min(state.between * 10, MOST_BETWEEN)
        state.countdown = state.between
        state.epoch += 1

    def inline(self, topic: str) -> bool:
        state = self._topics.get(topic)
        return state is not None and state.inline


class InlineRuns:
    """The jobs started inline, run in turn from the loop. A job given back
    before its turn is refused then (``refusal``: it is no longer held)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        quickness: Quickness,
        ended: Ended,
        refusal: Callable[[int], BaseException | None],
        await_result: Callable[[int, Any], None],
    ) -> None:
        self._loop = loop
        self._quickness = quickness
        self._ended = ended
        self._refusal = refusal
        self._await_result = await_result
        self._queue: deque[tuple[Callable[[Any], Any], Any, int, int]] = deque()
        self._scheduled = False

    def submit(self, fn: Callable[[Any], Any], job: Any, token: int) -> None:
        self._queue.append((fn, job, token, self._quickness.epoch(job.topic)))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def _run(self) -> None:
        queue = self._queue
        clock = time.perf_counter
        turn_ends = clock() + TURN_S
        try:
            while queue and clock() <= turn_ends:
                self._run_one(*queue.popleft())
        finally:  # a bug in what follows a run must not leave the rest waiting for ever
            if queue:  # the rest after a turn of the loop
                self._loop.call_soon(self._run)
            else:
                self._scheduled = False

    def _run_one(self, fn: Callable[[Any], Any], job: Any, token: int, epoch: int) -> None:
        # asked here, as a thread asks just before its call
        error = self._refusal(token)
        if error is None:
            started = time.perf_counter()
            try:
                result = fn(job)
            except BaseException as exc:  # reported to the worker, which decides
                error = exc
            else:
                if inspect.isawaitable(result):
                    # a plain function that returned a coroutine: awaited in a
                    # task, which reports it; this handler is not one for the loop
                    self._quickness.ran(job.topic, epoch, LONG_S * 2)
                    self._await_result(token, result)
                    return
            self._quickness.ran(job.topic, epoch, time.perf_counter() - started, error is not None)
        self._ended(token, error, False)  # may start the next job: queued here
