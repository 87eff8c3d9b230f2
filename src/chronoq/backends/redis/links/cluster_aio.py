"""Round trips on Redis Cluster on redis.asyncio: the routing of cluster.py
(the same slot map rules, redirect plan and WAIT per node) on the event
loop, each node's share of a round trip sent side by side."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import redis
import redis.asyncio

from chronoq.backends.redis.links.plan import Address, SlotMap, parse_slots
from chronoq.backends.redis.links.redirects import (
    RedirectPlan,
    RoundTrip,
)
from chronoq.backends.redis.links.single_aio import AsyncLink
from chronoq.backends.redis.packing import Packed, Wired

__all__ = ["AsyncClusterLink"]


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
        commands: Iterable[Wired],
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """As ``ClusterLink.pipeline`` with ``raise_on_error=False``: each
        node's share sent side by side on the event loop."""
        trip = RoundTrip(self.slots, self._budget, commands, on_reply)
        if self.slots.stale:
            await self.refresh()
        while trip.pending:
            shares = trip.shares()
            try:
                answers = await asyncio.gather(
                    *(self.node(node)[1].pipeline(sent) for node, _, sent in shares)
                )
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self.slots.stale = True  # a primary may have failed: read the map again
                raise
            pause = trip.settle(
                (node, units, replies)
                for (node, units, _), replies in zip(shares, answers, strict=True)
            )
            if pause is not None:
                await asyncio.sleep(pause)
                await self._mend(trip.plan)
        return trip.result()

    async def _mend(self, plan: RedirectPlan) -> None:
        """As ``ClusterLink._mend``."""
        if self.slots.stale:
            await self.refresh()
        for address in plan.load_on:
            await self._load_library(address)
        plan.load_on.clear()

    async def roundtrip(self, command: Packed) -> Any:
        """As ``ClusterLink.roundtrip``."""
        return (await self.pipeline([command]))[0]

    async def command(self, *args: Any) -> Any:
        [reply] = await self.pipeline([args])
        if isinstance(reply, Exception):
            raise reply
        client = next(iter(self._nodes.values()))[0]
        callback = client.response_callbacks.get(str(args[0]).upper())
        return callback(reply) if callback is not None else reply

    async def close(self) -> None:
        for client, link in list(self._nodes.values()):
            await link.release_idle()
            await client.aclose()
        self._nodes.clear()
