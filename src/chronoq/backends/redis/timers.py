"""A waiter as the reserve script knows it: its token, and the shards whose
due-time timer it holds. The script hands a shard's timer to one waiter,
which times the shard's next due job for everyone (lua/reserve.lua); a waiter
that stops waiting hands its timers on (lua/handover.lua), so that another
waiter times them without waiting for the timer to lapse."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from chronoq.errors import ChronoqError

__all__ = ["TimerHolder"]

log = logging.getLogger("chronoq")


class TimerHolder:
    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.timers: set[int] = set()

    def take_timers(self) -> set[int]:
        timers, self.timers = self.timers, set()
        return timers

    def hand_on(self, hand_over: Callable[[set[int], str], None]) -> None:
        """Hand on the timers this waiter holds (it stops waiting)."""
        timers = self.take_timers()
        if timers:
            try:
                hand_over(timers, self.token)
            except ChronoqError as exc:
                _lapse(timers, exc)

    async def hand_on_async(self, hand_over: Callable[[set[int], str], Awaitable[None]]) -> None:
        """``hand_on`` on the event loop."""
        timers = self.take_timers()
        if timers:
            try:
                await hand_over(timers, self.token)
            except ChronoqError as exc:
                _lapse(timers, exc)


def _lapse(timers: set[int], exc: ChronoqError) -> None:
    # the timers lapse on their own (TIMER_LEASE after their time)
    log.debug("could not hand on the timer of %s: %s", sorted(timers), exc)
