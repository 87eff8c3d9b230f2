"""Waking asyncio consumers of a Redis store: the protocol of watcher.py on
redis.asyncio. BLPOP on the shards' wake lists; the due-time wake-up timed in
the client (an asyncio timeout), then ``CLIENT UNBLOCK`` of the blocked
connection from another one, so that the connection is kept; the timers this
waiter holds handed on at ``close``.

The BLPOP runs on a connection of the waiter's own, not one of the pool's:
a burst of waits (a thousand long polls on a thousand topics) would
otherwise leave as many idle connections in the pool for the life of the
process. When the waiter closes, its connection is kept for the next one
among a few ``Spares``, and closed beyond them, so a consumer that waits
again and again does not connect each time. One BLPOP takes the wake lists
of several topics, so a request that waits on N topics blocks one
connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from chronoq.backends.redis.aio_link import AsyncLink, is_cut
from chronoq.backends.redis.steps import errors
from chronoq.backends.redis.timers import TimerHolder
from chronoq.backends.redis.watcher import blocking_pop
from chronoq.backends.watchers import AsyncWatcher, TopicsWatcher

__all__ = ["AsyncRedisWatcher", "RedisTopicsWatcher", "Spares", "WakeLists"]

_LATE_S = 5.0  # a read outlives the server's own timeout by this much
SPARES = 4  # idle blocking connections kept for the next waiters


class Spares:
    """The idle connections of one store for waiters to block on: at most
    ``most`` are kept; one given back beyond them is closed."""

    def __init__(self, link: AsyncLink, most: int = SPARES) -> None:
        self._link = link
        self._most = most
        self._idle: list[Any] = []

    def take(self) -> Any:
        """A kept connection, or a new one (it connects as it sends)."""
        return self._idle.pop() if self._idle else self._link.pool.make_connection()

    async def give(self, conn: Any) -> None:
        """``conn`` is free, with nothing unread on it."""
        if len(self._idle) < self._most and conn.is_connected and not is_cut(conn):
            self._idle.append(conn)
        else:
            await conn.disconnect(nowait=True)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.disconnect(nowait=True)


class WakeLists:
    """BLPOP on some wake lists, on a connection of its own (opened at the
    first wait, closed by ``close``); ``on_wake`` after each token popped."""

    def __init__(
        self,
        link: AsyncLink,
        spares: Spares,
        keys: list[str],
        url: str,
        on_wake: Callable[[], None] | None = None,
    ) -> None:
        self._link = link
        self._spares = spares
        self._keys = keys
        self._url = url
        self._on_wake = on_wake
        self._conn: Any = None

    async def wait(self, timeout: float) -> bool:
        with errors(self._url):
            return await self._wait(timeout)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._spares.give(conn)

    def _woken(self, reply: Any) -> bool:
        if reply is None:
            return False
        if self._on_wake is not None:
            self._on_wake()
        return True

    async def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self._spares.take()
        if is_cut(self._conn):  # the server closed it while nobody waited
            await self._conn.disconnect(nowait=True)
        return self._conn  # it connects as it sends

    async def _wait(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        timer = asyncio.timeout_at(loop.time() + max(timeout, 0.0))  # from now
        conn = await self._connection()
        try:
            await conn.send_packed_command(
                conn.pack_commands(blocking_pop(self._keys, timeout)), check_health=False
            )
            client_id = await conn.read_response()
            try:
                async with timer:
                    # cancelled by our timer, the read leaves the connection as it
                    # was: the BLPOP reply is still to come
                    reply = await conn.read_response(
                        timeout=timeout + _LATE_S, disconnect_on_error=False
                    )
                if reply is None:  # a timeout later than ours, the server's or redis-py's
                    await conn.disconnect(nowait=True)  # which one left nothing unread?
                return self._woken(reply)
            except TimeoutError:
                if not timer.expired():
                    raise
            await self._link.call("CLIENT", "UNBLOCK", client_id)
            # nil after the unblock, or a token that arrived just before it
            return self._woken(await conn.read_response())
        except BaseException:
            # cancelled or cut: a BLPOP may still be pending on it
            await conn.disconnect(nowait=True)
            raise


class AsyncRedisWatcher(AsyncWatcher, TimerHolder):
    """A waiter of one topic: its timers, and the wake lists it waits on
    (its own, closed with it, unless ``owns_lists`` is False: a part of a
    ``RedisTopicsWatcher``)."""

    def __init__(
        self,
        lists: WakeLists,
        hand_over: Callable[[set[int], str], Awaitable[None]],
        *,
        owns_lists: bool = True,
    ) -> None:
        TimerHolder.__init__(self)
        self._lists = lists
        self._hand_over = hand_over
        self._owns_lists = owns_lists

    async def wait(self, timeout: float) -> bool:
        return await self._lists.wait(timeout)

    async def close(self) -> None:
        try:
            await self.hand_on_async(self._hand_over)
        finally:
            if self._owns_lists:
                await self._lists.close()


class RedisTopicsWatcher(TopicsWatcher):
    """Several topics' waiters on one BLPOP over all their wake lists."""

    def __init__(self, parts: Mapping[str, AsyncRedisWatcher], lists: WakeLists) -> None:
        super().__init__(parts)
        self._lists = lists

    async def wait(self, timeout: float) -> bool:
        return await self._lists.wait(timeout)

    async def close(self) -> None:
        try:
            await super().close()  # each part hands on its timers
        finally:
            await self._lists.close()
