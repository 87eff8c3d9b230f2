"""The jobs that a cancelled ``AsyncQueue.reserve`` leased (or will, when
its call is still at the store), released at once in tasks of their own
that a further cancel does not stop: nobody would see them until their ttr
ran out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from chronoq.backends.base import ReserveResult
from chronoq.errors import ChronoqError
from chronoq.job import Reservation

__all__ = ["GivingBack"]


class GivingBack:
    """``release(job)`` for each job given to it, in a task of its own."""

    def __init__(self, release: Callable[[Reservation], Awaitable[None]]) -> None:
        self._release = release
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, leased: list[Reservation] | asyncio.Future[ReserveResult]) -> None:
        if isinstance(leased, list) and not leased:
            return

        async def give_back() -> None:
            with contextlib.suppress(ChronoqError):
                jobs = leased if isinstance(leased, list) else (await leased).jobs
                for job in jobs:
                    with contextlib.suppress(ChronoqError):
                        await self._release(job)

        task = asyncio.get_running_loop().create_task(give_back())
        self._tasks.add(task)  # a task nobody refers to may be collected
        task.add_done_callback(self._tasks.discard)
