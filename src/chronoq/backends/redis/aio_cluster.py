"""The Redis Cluster backend on redis.asyncio: the routing of links/cluster_aio.py
(the same slot map rules, redirect plan and WAIT per node) on the event loop,
each node's share of a round trip sent side by side; waiting consumers share
the process's bells (bells.py) with the blocking side."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from chronoq.backends.base import AsyncWatcher, TopicsWatcher
from chronoq.backends.redis.aio_backend import AsyncRedisBackend
from chronoq.backends.redis.bells import Bells
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.links.cluster_aio import AsyncClusterLink
from chronoq.backends.redis.timers import TimerHolder
from chronoq.backends.watchers import watch_each

__all__ = ["AsyncClusterBackend"]


class AsyncClusterWatcher(AsyncWatcher, TimerHolder):
    def __init__(self, bells: Bells, hand_over: Callable[[set[int], str], Awaitable[None]]):
        TimerHolder.__init__(self)
        self._bells = bells
        self._hand_over = hand_over
        bells.attach()

    async def wait(self, timeout: float) -> bool:
        return await self._bells.wait_async(timeout)

    async def unused(self) -> None:
        self._bells.pass_on()  # to another waiter of this process, or kept for the next

    async def close(self) -> None:
        self._bells.detach()
        await self.hand_on_async(self._hand_over)


class AsyncClusterBackend(AsyncRedisBackend):
    """``core``'s operations on a cluster, on the event loop; ``bells(topic)``
    gives the process's bells of a topic (the blocking backend's)."""

    def __init__(
        self,
        core: RedisCore,
        link: AsyncClusterLink,
        bells: Callable[[str], Bells],
        *,
        owner: Any = None,
    ) -> None:
        self.url = core.url
        self.shards = core.shards
        self._core = core
        self._owner = owner
        self._link = link  # type: ignore[assignment]  # the same calls as AsyncLink's
        self._bells = bells
        self._loop = None

    async def watch(self, topic: str) -> AsyncWatcher:
        async def hand_over(shards: set[int], token: str) -> None:
            await self._drive(self._core.hand_over(topic, shards, token))

        self._check_loop()
        return AsyncClusterWatcher(self._bells(topic), hand_over)

    async def watch_topics(self, topics: Sequence[str]) -> TopicsWatcher:
        """Each topic's own bells, side by side: one BLPOP cannot span slots
        (the bells are the process's, shared with every other waiter)."""
        return await watch_each(self.watch, topics)

    async def close(self) -> None:
        await self._link.close()  # type: ignore[attr-defined]
        self._loop = None
        if self._owner is not None:
            self._owner.close()
