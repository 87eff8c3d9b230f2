"""``AsyncQueue.reserve`` cancelled at any point leaves no job leased: here,
while it closes its watcher with the jobs already in hand."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import chronoq.aio
from chronoq import State
from chronoq.backends.base import AsyncWatcher


class SlowToClose(AsyncWatcher):
    def __init__(self, inner: AsyncWatcher, closing: asyncio.Event) -> None:
        self.inner = inner
        self.closing = closing

    async def wait(self, timeout: float) -> bool:
        return await self.inner.wait(timeout)

    async def close(self) -> None:
        self.closing.set()
        await asyncio.sleep(0.5)  # the reserve is cancelled here
        await self.inner.close()


def test_a_reserve_cancelled_while_closing_its_watcher_gives_the_jobs_back(
    store_url: str, topic: str
) -> None:
    async def main() -> None:
        async with chronoq.aio.connect(store_url) as q:
            closing = asyncio.Event()
            watch = q.backend.watch

            async def slow_watch(*args: Any) -> AsyncWatcher:
                return SlowToClose(await watch(*args), closing)

            q.backend.watch = slow_watch  # type: ignore[method-assign]
            await q.put(topic, "x", id="x", max_attempts=1)
            reserving = asyncio.ensure_future(q.reserve(topic, wait=5))
            await closing.wait()  # leased, and closing the watcher
            reserving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reserving
            for _ in range(200):  # the give-back runs in a task of its own
                info = await q.get(topic, "x")
                if info is not None and info.state is State.READY:
                    break
                await asyncio.sleep(0.01)
            assert info is not None
            assert (info.state, info.attempts, info.last_error) == (
                State.READY,
                1,
                "the reserve was cancelled",
            )

    asyncio.run(main())
