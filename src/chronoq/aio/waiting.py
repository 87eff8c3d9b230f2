"""How an asyncio consumer waits after a reserve attempt that leased
nothing: on the store's watcher until something changes, and the last
stretch before the next due time on the event loop's clock (the worker's
fetchers to the tick; ``AsyncQueue.reserve`` on the loop's timer alone)."""

from __future__ import annotations

import asyncio

from chronoq.backends.base import AsyncWatcher, ReserveResult

__all__ = ["WAKE_EARLY_S", "sleep_until", "wait_for_jobs"]

# A consumer due to wake for a job wakes this long before its due time and
# times the rest here, to the tick: the event loop's own timers wake up to 1 ms
# late (epoll counts whole ms), and ending a wait on the store takes round trips.
WAKE_EARLY_S = 0.002
SPIN_S = 0.0012  # the last stretch of such a wait, spent yielding to the loop


async def wait_for_jobs(
    watcher: AsyncWatcher,
    result: ReserveResult,
    limit: float,
    *,
    early: float = WAKE_EARLY_S,
    to_the_tick: bool = True,
) -> None:
    """After ``result`` leased nothing: return when a job may be available,
    that is when ``watcher`` sees a change or at the next due time it told
    of, and after ``limit`` seconds at the most. The watcher's wait ends
    ``early`` seconds before a due time (0: it times the whole wait), and
    the rest is slept on the event loop with no store attempt between:
    ``to_the_tick``, its last SPIN_S in turns of the loop (a loop timer wakes
    up to 1 ms late); else on the loop's timer alone, which spends no CPU
    when many waiters wait for one due time."""
    limit = max(limit, 0.0)
    if result.wake_in_ms is None:
        await watcher.wait(limit)
        return
    loop = asyncio.get_running_loop()
    wake_in = result.wake_in_ms / 1000
    deadline = loop.time() + min(wake_in, limit)
    if early <= 0 or wake_in > early:
        woken = await watcher.wait(min(limit, wake_in - early))
        # ended by a change, or interrupted long before the due time
        if woken or early <= 0 or deadline - loop.time() > early:
            return
    if to_the_tick:
        await sleep_until(loop, deadline)
    elif (left := deadline - loop.time()) > 0:
        await asyncio.sleep(left)


async def sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep until ``deadline`` (``loop.time()``) and not a tick later: the
    loop's timer for all but the last SPIN_S, then turns of the loop."""
    coarse = deadline - loop.time() - SPIN_S
    if coarse > 0:
        await asyncio.sleep(coarse)
    while loop.time() < deadline:
        await asyncio.sleep(0)
