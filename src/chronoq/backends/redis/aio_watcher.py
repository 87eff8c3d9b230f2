"""Waking asyncio consumers of a Redis store: the protocol of watcher.py on
redis.asyncio. BLPOP on the shards' wake lists; the due-time wake-up timed in
the client (an asyncio timeout), then ``CLIENT UNBLOCK`` of the blocked
connection from another one, so that the connection is kept; the timers this
waiter holds handed on at ``close``.

The BLPOP runs on a connection of the waiter's own, not one of the pool's:
a burst of waits (a thousand long polls on a thousand topics) would
otherwise leave as many idle connections in the pool for the life of the
process. When the waiter closes, its connection is kept for the next one
(``Spares``); those beyond a few are closed once idle for a few seconds, so
waiters that come and go do not connect each time, and a burst leaves
nothing behind. One BLPOP takes the wake lists of several topics, so a
request that waits on N topics blocks one connection.

A wake token wakes one waiter. One that then looks at another topic first
(or has nobody left to serve) gives the token back (``unused``), or the job
it stood for would wait for some other change to be seen."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from chronoq.backends.redis.links.single_aio import AsyncLink, is_cut
from chronoq.backends.redis.steps import errors
from chronoq.backends.redis.timers import TimerHolder
from chronoq.backends.redis.watcher import blocking_pop
from chronoq.backends.watchers import AsyncWatcher, TopicsWatcher

__all__ = ["SPARES", "AsyncRedisWatcher", "RedisTopicsWatcher", "Spares", "WakeLists"]

_LATE_S = 5.0  # a read outlives the server's own timeout by this much
SPARES = 4  # idle blocking connections kept however long they wait
SPARE_IDLE_S = 5.0  # how long more than SPARES are kept idle


class Spares:
    """The idle connections of one store for waiters to block on: any number
    while they are used again within ``SPARE_IDLE_S``, at most ``SPARES``
    beyond that; one given back after ``close`` is closed."""

    def __init__(self, link: AsyncLink) -> None:
        self._link = link
        self._idle: list[tuple[Any, float]] = []  # (connection, idle since), newest last
        self._trim: asyncio.Task[None] | None = None
        self._closed = False

    def take(self) -> Any:
        """The newest kept connection, or a new one (not connected yet)."""
        return self._idle.pop()[0] if self._idle else self._link.pool.make_connection()

    async def give(self, conn: Any) -> None:
        """``conn`` is free, with nothing unread on it."""
        if self._closed or not conn.is_connected or is_cut(conn):
            await conn.disconnect(nowait=True)
            return
        self._idle.append((conn, time.monotonic()))
        if len(self._idle) > SPARES and self._trim is None:
            self._trim = asyncio.get_running_loop().create_task(self._trimming())

    async def _trimming(self) -> None:
        try:
            while len(self._idle) > SPARES:
                await asyncio.sleep(SPARE_IDLE_S / 2)
                stale = time.monotonic() - SPARE_IDLE_S
                while len(self._idle) > SPARES and self._idle[0][1] < stale:
                    conn, _ = self._idle.pop(0)  # the one idle longest
                    await conn.disconnect(nowait=True)
        finally:
            self._trim = None

    async def close(self) -> None:
        self._closed = True
        if self._trim is not None:
            self._trim.cancel()
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await conn.disconnect(nowait=True)


class WakeLists:
    """BLPOP on some wake lists, on a connection taken from ``spares`` at the
    first wait and given back by ``close``; ``on_wake`` after each token.
    ``topic_of`` names the topic of each list, for ``give_back``."""

    def __init__(
        self,
        link: AsyncLink,
        spares: Spares,
        topic_of: Mapping[str, str],
        url: str,
        on_wake: Callable[[], None] | None = None,
    ) -> None:
        self._link = link
        self._spares = spares
        self._topic_of = topic_of
        self._keys = list(topic_of)
        self._url = url
        self._on_wake = on_wake
        self._conn: Any = None
        self._token: tuple[str, Any] | None = None  # the last wait's (list, token)
        self._timer: asyncio.Timeout | None = None  # the running wait's own timer
        self._interrupted = False

    async def wait(self, timeout: float) -> bool:
        self._token = None
        try:
            with errors(self._url):
                return await self._wait(timeout)
        finally:
            self._interrupted = False

    def interrupt(self) -> None:
        """End the running wait now (or the next, if it has not begun), the
        way its own timer does (``CLIENT UNBLOCK``): the connection is kept,
        and a token that came meanwhile is not lost, where cancelling the
        wait would lose both."""
        self._interrupted = True
        if self._timer is not None:
            with contextlib.suppress(RuntimeError):  # its time is up already
                self._timer.reschedule(asyncio.get_running_loop().time())

    async def give_back(self, tried: Collection[str]) -> None:
        """The token that ended the last wait goes back to its list (at the
        front: the next waiter takes it) unless its topic is in ``tried``."""
        token, self._token = self._token, None
        if token is not None and self._topic_of[token[0]] not in tried:
            with errors(self._url):
                await self._link.call("LPUSH", *token)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._spares.give(conn)

    def _woken(self, reply: Any) -> bool:
        if reply is None:
            return False
        key, token = reply
        self._token = (key.decode() if isinstance(key, bytes) else key, token)
        if self._on_wake is not None:
            self._on_wake()
        return True

    async def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self._spares.take()
        if is_cut(self._conn):  # the server closed it while nobody waited
            await self._conn.disconnect(nowait=True)
        # connected here, as the pool does, not as it sends: a Sentinel's
        # connection finds the primary in connect(); sending connects to its
        # default address, localhost:6379
        await self._conn.connect()
        return self._conn

    async def _wait(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        timer = asyncio.timeout_at(loop.time() + max(timeout, 0.0))  # from now
        conn = self._conn
        try:
            # inside the try: a cancel during the handshake must not leave a
            # half-connected connection to the next waiter
            conn = await self._connection()
            await conn.send_packed_command(
                conn.pack_commands(blocking_pop(self._keys, timeout)), check_health=False
            )
            client_id = await conn.read_response()
            try:
                async with timer:
                    self._timer = timer
                    if self._interrupted:
                        timer.reschedule(loop.time())
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
            finally:
                self._timer = None
            await self._link.call("CLIENT", "UNBLOCK", client_id)
            # nil after the unblock, or a token that arrived just before it
            return self._woken(await conn.read_response())
        except BaseException:
            # cancelled or cut: a BLPOP may still be pending on it
            if conn is not None:
                await conn.disconnect(nowait=True)
            raise


class _OnWakeLists:
    """A watcher whose waits are those of its ``WakeLists``."""

    _lists: WakeLists

    async def wait(self, timeout: float) -> bool:
        return await self._lists.wait(timeout)

    def interrupt(self) -> bool:
        self._lists.interrupt()
        return True


class AsyncRedisWatcher(_OnWakeLists, AsyncWatcher, TimerHolder):
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

    async def unused(self) -> None:
        await self._lists.give_back(())

    async def close(self) -> None:
        try:
            await self.hand_on_async(self._hand_over)
        finally:
            if self._owns_lists:
                await self._lists.close()


class RedisTopicsWatcher(_OnWakeLists, TopicsWatcher):
    """Several topics' waiters on one BLPOP over all their wake lists."""

    def __init__(self, parts: Mapping[str, AsyncRedisWatcher], lists: WakeLists) -> None:
        super().__init__(parts)
        self._lists = lists

    async def unused(self, tried: Collection[str] = ()) -> None:
        await self._lists.give_back(tried)

    async def close(self) -> None:
        try:
            await super().close()  # each part hands on its timers
        finally:
            await self._lists.close()
