"""Capped exponential pauses between attempts to reach a store that is down."""

from __future__ import annotations

import asyncio
import random

__all__ = ["Pause"]

FIRST_S = 0.05
CAP_S = 5.0


class Pause:
    def __init__(self, first: float = FIRST_S, cap: float = CAP_S) -> None:
        self._first = first
        self._cap = cap
        self._next = first

    def reset(self) -> None:
        self._next = self._first

    def take(self) -> float:
        """The next pause in seconds (with jitter, so that workers spread out)."""
        delay = self._next * (0.5 + random.random() / 2)
        self._next = min(self._next * 2, self._cap)
        return delay

    async def sleep(self) -> None:
        await asyncio.sleep(self.take())
