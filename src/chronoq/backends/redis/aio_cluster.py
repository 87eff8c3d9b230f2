"""The Redis Cluster backend on redis.asyncio: the routing of cluster_link.py
(the same slot map rules, redirect plan and WAIT per node) on the event loop,
each node's share of a round trip sent side by side; waiting consumers share
the process's bells (bells.py) with the blocking side."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import redis
import redis.asyncio

from chronoq.backends.base import AsyncWatcher
from chronoq.backends.redis.aio_backend import AsyncRedisBackend
from chronoq.backends.redis.aio_link import AsyncLink
from chronoq.backends.redis.bells import Bells
from chronoq.backends.redis.cluster_link import (
    RedirectPlan,
    commands_of,
    refused,
    settle,
)
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.slotmap import Address, SlotMap, Unit, parse_slots, units_of
from chronoq.backends.redis.timers import TimerHolder

__all__ = ["AsyncClusterBackend", "AsyncClusterLink"]


class AsyncClusterLink:
    """A cluster's primaries, each through an ``AsyncLink`` of its own."""

    def __init__(
        self,
        seeds: list[Address],
        connect: Callable[[str, int], redis.asyncio.Redis],
        library: str,
        redirect_budget: float,
    ) -> None:
        self.slots = SlotMap(seeds)
        self._connect = connect
        self._library = library
        self._budget = redirect_budget
        self._nodes: dict[Address, tuple[redis.asyncio.Redis, AsyncLink]] = {}

    def node(self, address: Address) -> tuple[redis.asyncio.Redis, AsyncLink]:
        found = self._nodes.get(address)
        if found is None:
            client = self._connect(*address)
            found = self._nodes[address] = (client, AsyncLink(client))
        return found

    async def refresh(self) -> None:
        error: Exception | None = None
        for address in self.slots.candidates():
            try:
                reply = await self.node(address)[1].call("CLUSTER", "SLOTS")
            except (redis.RedisError, OSError) as exc:
                error = exc
                continue
            ranges = parse_slots(reply, address[0])
            if ranges:
                fresh = {a for _, _, a in ranges} - set(self.slots.primaries())
                self.slots.load(ranges)
                for primary in fresh:  # else loaded when a call finds it missing there
                    with contextlib.suppress(redis.RedisError, OSError):
                        await self._load_library(primary)
                return
        if error is not None:
            raise error
        raise redis.ConnectionError("no node of the cluster serves any slot")

    async def _load_library(self, address: Address) -> None:
        await self.node(address)[1].call("FUNCTION", "LOAD", "REPLACE", self._library)

    async def pipeline(
        self,
        commands: Iterable[tuple[Any, ...]],
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """As ``ClusterLink.pipeline`` with ``raise_on_error=False``."""
        listed = list(commands)
        wait = listed.pop() if listed and str(listed[-1][0]).upper() == "WAIT" else None
        if self.slots.stale:
            await self.refresh()
        replies: list[Any] = [None] * len(listed)
        confirmed: list[int] = []
        plan = RedirectPlan(self.slots, self._budget)
        pending = units_of(listed)
        while pending:
            pending = await self._pass(plan, pending, listed, wait, replies, confirmed, on_reply)
            if pending:
                pause = plan.pause()
                if pause is None:
                    for unit in pending:
                        refused(unit, replies)
                    break
                await asyncio.sleep(pause)
                if self.slots.stale:
                    await self.refresh()
                for address in plan.load_on:
                    await self._load_library(address)
                plan.load_on.clear()
        if wait is not None:
            replies.append(min(confirmed) if confirmed else 0)
        return replies

    async def _pass(
        self,
        plan: RedirectPlan,
        pending: list[Unit],
        commands: list[tuple[Any, ...]],
        wait: tuple[Any, ...] | None,
        replies: list[Any],
        confirmed: list[int],
        on_reply: Callable[[int, Any], None] | None,
    ) -> list[Unit]:
        groups = plan.route(pending)
        try:
            answers = await asyncio.gather(
                *(
                    self.node(node)[1].pipeline(commands_of(units, commands, wait))
                    for node, units in groups.items()
                )
            )
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            self.slots.stale = True
            raise
        again: list[Unit] = []
        for (node, units), node_replies in zip(groups.items(), answers, strict=True):
            again += settle(plan, node, units, node_replies, wait, replies, confirmed, on_reply)
        return again

    async def command(self, *args: Any) -> Any:
        [reply] = await self.pipeline([args])
        if isinstance(reply, Exception):
            raise reply
        client = next(iter(self._nodes.values()))[0]
        callback = client.response_callbacks.get(str(args[0]).upper())
        return callback(reply) if callback is not None else reply

    async def close(self) -> None:
        for client, _ in list(self._nodes.values()):
            await client.aclose()
        self._nodes.clear()


class AsyncClusterWatcher(AsyncWatcher, TimerHolder):
    def __init__(self, bells: Bells, hand_over: Callable[[set[int], str], Awaitable[None]]):
        TimerHolder.__init__(self)
        self._bells = bells
        self._hand_over = hand_over
        bells.attach()

    async def wait(self, timeout: float) -> bool:
        return await self._bells.wait_async(timeout)

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

    async def close(self) -> None:
        await self._link.close()  # type: ignore[attr-defined]
        self._loop = None
        if self._owner is not None:
            self._owner.close()
