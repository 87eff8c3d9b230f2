"""Group commit: calls of one kind that arrive while one of them is at the
store go there together, as one call, when it returns. Under load a put, an
ack or a reserve then costs a share of one transaction (SQLite) or of one
script call (Redis) instead of one each; alone, a call goes at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Coalescer"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[K, T, R]):
    """``run(key, items)`` answers a list of results, one per item, in order.
    ``unclaimed(result)`` gets the result of an item whose caller was
    cancelled meanwhile (a reserve's jobs, to give back)."""

    def __init__(
        self,
        run: Callable[[K, list[T]], Awaitable[list[R]]],
        *,
        most: int = 1000,
        unclaimed: Callable[[R], None] | None = None,
    ) -> None:
        self._run = run
        self._most = most
        self._unclaimed = unclaimed
        self._waiting: dict[K, list[tuple[T, asyncio.Future[R]]]] = {}
        self._draining: dict[K, asyncio.Task[None]] = {}

    async def call(self, key: K, item: T) -> R:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[R] = loop.create_future()
        self._waiting.setdefault(key, []).append((item, answer))
        if key not in self._draining:
            self._draining[key] = loop.create_task(self._drain(key))
        return await answer

    async def _drain(self, key: K) -> None:
        try:
            while batch := self._take(key):
                try:
                    results = await self._run(key, [item for item, _ in batch])
                except Exception as exc:  # each caller hears of it
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                except asyncio.CancelledError:  # the server stops: nobody waits for ever
                    for _, answer in batch + self._waiting.pop(key, []):
                        answer.cancel()
                    raise
                for (_, answer), result in zip(batch, results, strict=True):
                    if not answer.done():
                        answer.set_result(result)
                    elif self._unclaimed is not None:
                        self._unclaimed(result)
        finally:
            del self._draining[key]

    def _take(self, key: K) -> list[tuple[T, asyncio.Future[R]]]:
        waiting = self._waiting.get(key)
        if not waiting:
            self._waiting.pop(key, None)
            return []
        batch, waiting[:] = waiting[: self._most], waiting[self._most :]
        return batch
