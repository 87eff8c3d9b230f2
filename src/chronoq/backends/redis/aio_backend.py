"""The Redis backend on redis.asyncio: the operations of core.py (the same
ones the blocking backend runs), their round trips made on the event loop."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import redis.asyncio

from chronoq.backends.base import AsyncBackend, AsyncWatcher, Backend, TopicsWatcher
from chronoq.backends.forwarding import fill_contract
from chronoq.backends.redis.aio_watcher import (
    AsyncRedisWatcher,
    RedisTopicsWatcher,
    Spares,
    WakeLists,
)
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.links.single_aio import AsyncLink
from chronoq.backends.redis.operations import operation
from chronoq.backends.redis.packing import Packed
from chronoq.backends.redis.steps import REDIS_ERRORS, Pipeline, Steps, translated
from chronoq.backends.redis.watcher import woken
from chronoq.errors import ChronoqError

__all__ = ["AsyncRedisBackend"]

T = TypeVar("T")


class AsyncRedisBackend(AsyncBackend):
    """``core``'s operations on ``client``; ``owner``, when given, is the
    blocking backend this one was made from, closed with it. The methods of
    the contract not written here run the core's operation of the same name
    (``fill_contract`` below)."""

    def __init__(
        self, core: RedisCore, client: redis.asyncio.Redis, *, owner: Backend | None = None
    ) -> None:
        self.url = core.url
        self.shards = core.shards
        self._core = core
        self._client = client
        self._owner = owner
        self._link = AsyncLink(client)
        self._spares = Spares(self._link)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _check_loop(self) -> None:
        """redis.asyncio's connections belong to the loop that opened them:
        used from another loop they fail with a bare RuntimeError, or mix two
        loops' sockets in one pool. Say so, and what to do."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop  # created outside any loop is fine: bound at first use
        elif loop is not self._loop:
            raise ChronoqError(
                f"{self.url}: this AsyncQueue was first used on another event loop; "
                "its connections belong to that loop. Open one AsyncQueue per event "
                "loop (chronoq.aio.connect inside it), and close it there"
            )

    async def _drive(self, steps: Steps[T], *, decode_off_loop: bool = False) -> T:
        """Run an operation of the core: make each round trip it asks for.
        With ``decode_off_loop``, the core reads each reply in a thread."""
        self._check_loop()
        reply: Any = None
        try:
            while True:
                if decode_off_loop:
                    finished, request = await asyncio.to_thread(_advance, steps, reply)
                    if finished:
                        return cast(T, request)
                else:
                    request = steps.send(reply)
                if type(request) is Packed:
                    reply = await self._link.roundtrip(request)
                elif isinstance(request, Pipeline):
                    reply = await self._link.pipeline(request.commands, request.on_reply)
                else:
                    reply = await self._link.command(*request.args)
        except StopIteration as done:
            return cast(T, done.value)
        except REDIS_ERRORS as exc:
            raise translated(self.url, exc) from None

    async def watch(self, topic: str) -> AsyncWatcher:
        self._check_loop()
        return AsyncRedisWatcher(self._wake_lists([topic]), self._hand_over(topic))

    async def watch_topics(self, topics: Sequence[str]) -> TopicsWatcher:
        """One BLPOP over every topic's wake lists: one blocked connection."""
        self._check_loop()
        lists = self._wake_lists(topics)
        parts = {
            topic: AsyncRedisWatcher(lists, self._hand_over(topic), owns_lists=False)
            for topic in topics
        }
        return RedisTopicsWatcher(parts, lists)

    def _wake_lists(self, topics: Sequence[str]) -> WakeLists:
        keys = {topic: self._core.wake_keys(topic) for topic in topics}
        topic_of = {key: topic for topic, its in keys.items() for key in its}
        on_wake = None
        if self.shards > 1:
            marks = [
                (its, functools.partial(self._core.hints.mark, topic))
                for topic, its in keys.items()
            ]

            def on_wake() -> None:
                for its, mark in marks:
                    woken(its, mark)  # every shard of every topic: see woken()

        return WakeLists(self._link, self._spares, topic_of, self.url, on_wake)

    def _hand_over(self, topic: str) -> Callable[[set[int], str], Awaitable[None]]:
        async def hand_over(shards: set[int], token: str) -> None:
            await self._drive(self._core.hand_over(topic, shards, token))

        return hand_over

    async def close(self) -> None:
        spares, self._spares = self._spares, Spares(self._link)  # for a use on another loop
        await spares.close()  # a watcher still open gives its connection to it: closed
        await self._link.release_idle()
        await self._client.aclose()
        # a Sentinel-managed primary: the sentinels' own connections too
        manager = getattr(self._client.connection_pool, "sentinel_manager", None)
        for sentinel in getattr(manager, "sentinels", ()):
            await sentinel.aclose()
        self._loop = None  # no connection left open: another loop may use it now
        if self._owner is not None:
            self._owner.close()


# Bulk reads decode thousands of records per reply (the dashboard's log tail
# and page scans, export): in a thread, so that the loop goes on serving and
# a waiting consumer still gets its job within milliseconds.
_BULK_READS = frozenset({"jobs", "log_read", "events", "dead"})


def _advance(steps: Steps[Any], reply: Any) -> tuple[bool, Any]:
    """``steps.send(reply)`` as (finished, the next request or the result):
    a StopIteration may not cross into a future."""
    try:
        return False, steps.send(reply)
    except StopIteration as done:
        return True, done.value


def _driven(name: str) -> Callable[..., Any]:
    op = operation(name)
    off_loop = name in _BULK_READS

    async def method(self: AsyncRedisBackend, *args: Any, **kwargs: Any) -> Any:
        return await self._drive(op(self._core, *args, **kwargs), decode_off_loop=off_loop)

    return method


# every other operation: the core's, driven on the event loop
fill_contract(AsyncRedisBackend, _driven)
