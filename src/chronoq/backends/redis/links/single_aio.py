"""Round trips on redis.asyncio connections, for the asyncio driver.

Each round trip takes a connection from the client's pool and gives it back,
so the calls of concurrent tasks run side by side, each on its own
connection. Only connections fit to send on are used: one the server closed
while it was idle is opened again before anything is sent (the pool's own
check misses an end of file the event loop has not read yet)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis.asyncio
from redis.exceptions import ResponseError

from chronoq.backends.redis.links.single import readable
from chronoq.backends.redis.packing import Packed, Wired

__all__ = ["AsyncLink", "is_cut"]


def is_cut(conn: Any) -> bool:
    """Whether an idle connection's socket has something to read: the end of
    file of a server that closed it, or bytes nobody asked for."""
    writer = getattr(conn, "_writer", None)
    sock = None if writer is None else writer.get_extra_info("socket")
    return sock is not None and readable(sock)  # not connected: it connects before sending


# Connections a link keeps between its round trips rather than give them back
# to the pool: redis-py's get_connection and release (a lock, a probing read,
# its metrics) cost as much of a single put as its own Python.
KEEP = 8


class AsyncLink:
    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._client = client
        self.pool = client.connection_pool
        self._idle: list[Any] = []  # the pool's, in use as far as it knows

    async def connection(self) -> Any:
        """A connection fit to send on; give it back with ``give_back``."""
        conn = self._idle.pop() if self._idle else await self.pool.get_connection()
        if is_cut(conn):
            try:
                await conn.disconnect()
                await conn.connect()
            except BaseException:
                await self.pool.release(conn)
                raise
        return conn

    async def give_back(self, conn: Any) -> None:
        """After a round trip: kept for the next one, or back to the pool."""
        if len(self._idle) < KEEP and conn.is_connected:
            self._idle.append(conn)
        else:
            await self.pool.release(conn)

    async def release_idle(self) -> None:
        """Every kept connection back to the pool (before it is closed)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await self.pool.release(conn)

    async def command(self, *args: Any) -> Any:
        """One command, its reply parsed the redis-py way (a set for
        SMEMBERS…). On a connection of ``connection()``, not through the
        client: the connections kept here count against the pool's
        ``max_connections``."""
        conn = await self.connection()
        try:
            await conn.send_packed_command(conn.pack_command(*args), check_health=False)
            reply = await conn.read_response()
        except ResponseError:
            raise  # the reply was read whole: the connection is fine
        except BaseException:
            await conn.disconnect(nowait=True)  # as in pipeline
            raise
        finally:
            await self.give_back(conn)
        callback = self._client.response_callbacks.get(str(args[0]).upper())
        return callback(reply) if callback is not None else reply

    async def call(self, *args: Any) -> Any:
        """One command, one round trip; its reply (an error reply is raised)."""
        [reply] = await self.pipeline([args])
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def roundtrip(self, command: Packed) -> Any:
        """As ``Link.roundtrip``: one packed command, its reply (an error reply
        in its place)."""
        conn = await self.connection()
        try:
            await conn.send_packed_command([command.wire()], check_health=False)
            try:
                return await conn.read_response()
            except ResponseError as exc:
                return exc
        except BaseException:
            await conn.disconnect(nowait=True)  # as in pipeline
            raise
        finally:
            await self.give_back(conn)

    async def pipeline(
        self,
        commands: Iterable[Wired],
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """As ``Link.pipeline`` with ``raise_on_error=False``: each command sent
        as ``commands`` yields it, then a reply per command (an error reply in
        its place), each seen by ``on_reply`` as it is read. Commands are never
        sent twice: after a cut the caller hears of it, Redis may have run them."""
        conn = await self.connection()
        try:
            count = 0
            for command in commands:
                packed = (
                    [command.wire()] if isinstance(command, Packed) else conn.pack_command(*command)
                )
                await conn.send_packed_command(packed, check_health=False)
                count += 1
            replies = []
            for index in range(count):
                try:
                    reply = await conn.read_response()
                except ResponseError as exc:  # the next reply is still to be read
                    reply = exc
                replies.append(reply)
                if on_reply is not None:
                    on_reply(index, reply)
            return replies
        except BaseException:
            # a half-read reply (a cut, a cancelled task) must not be read as the next one
            await conn.disconnect(nowait=True)
            raise
        finally:
            await self.give_back(conn)
