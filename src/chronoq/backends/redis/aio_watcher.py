"""Waking asyncio consumers of a Redis store: the protocol of watcher.py on
redis.asyncio. BLPOP on the shards' wake lists; the due-time wake-up timed in
the client (an asyncio timeout), then ``CLIENT UNBLOCK`` of the blocked
connection from another one, so that the connection is kept; the timers this
waiter holds handed on at ``close``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from chronoq.backends.base import AsyncWatcher
from chronoq.backends.redis.aio_link import AsyncLink
from chronoq.backends.redis.steps import errors
from chronoq.backends.redis.timers import TimerHolder
from chronoq.backends.redis.watcher import blocking_pop, woken

__all__ = ["AsyncRedisWatcher"]

_LATE_S = 5.0  # a read outlives the server's own timeout by this much


class AsyncRedisWatcher(AsyncWatcher, TimerHolder):
    def __init__(
        self,
        link: AsyncLink,
        wake_keys: list[str],
        url: str,
        hand_over: Callable[[set[int], str], Awaitable[None]],
        on_wake: Callable[[int], None] | None = None,
    ) -> None:
        TimerHolder.__init__(self)
        self._on_wake = on_wake
        self._link = link
        self._keys = wake_keys
        self._url = url
        self._hand_over = hand_over

    async def close(self) -> None:
        await self.hand_on_async(self._hand_over)

    async def wait(self, timeout: float) -> bool:
        with errors(self._url):
            return await self._wait(timeout)

    async def _wait(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        timer = asyncio.timeout_at(loop.time() + max(timeout, 0.0))  # from now
        pool = self._link.pool
        conn = await self._link.connection()
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
                    return False
                woken(self._keys, self._on_wake)
                return True
            except TimeoutError:
                if not timer.expired():
                    raise
            await self._link.call("CLIENT", "UNBLOCK", client_id)
            # nil after the unblock, or a token that arrived just before it
            reply = await conn.read_response()
            if reply is None:
                return False
            woken(self._keys, self._on_wake)
            return True
        except BaseException:
            # cancelled or cut: a BLPOP still pending must not go back to the pool
            await conn.disconnect(nowait=True)
            raise
        finally:
            await pool.release(conn)
