"""One Redis connection per thread, kept while the thread lives.

redis-py's ``Redis.execute_command`` takes a connection from the pool and
gives it back on every call, checking its health each time; on this 2-vCPU
machine that cost about 30 µs of a ~110 µs round trip. A backend makes many
small calls from few threads, so each thread keeps its own connection; a
script call comes packed (packing.py) and its reply is read with hiredis on
the socket (``roundtrip``), other commands go through the connection.
"""

from __future__ import annotations

import os
import select
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, cast

import redis
from redis._parsers.base import BaseParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import SentinelManagedConnection

from chronoq.backends.redis.packing import Packed, Wired

hiredis: Any
try:  # the redis extra installs it
    import hiredis
except ImportError:  # pragma: no cover - exercised only without hiredis
    hiredis = None

__all__ = ["Link", "Sent"]


_forks = 0  # how many forks this process is from the one that imported this


def _forked() -> None:
    global _forks
    _forks += 1


# a child's connections are its own: counted rather than os.getpid() per call
# (a system call; glibc does not cache it)
os.register_at_fork(after_in_child=_forked)


class _Held:
    """A thread's connection, kept in its thread-local storage: when the thread
    ends, this is freed and the connection goes back to the pool."""

    __slots__ = (
        "__weakref__", "buffer", "conn", "forks", "open", "polled", "poller",
        "reader", "reader_sock",
    )  # fmt: skip

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.forks = _forks
        self.open = False  # connected and used by a call that went through
        self.poller = select.poll()
        self.polled: Any = None  # the socket the poller watches
        self.reader: Any = None  # roundtrip's reply parser (hiredis) ...
        self.reader_sock: Any = None  # ... made for this socket
        self.buffer = bytearray(1 << 16)

    def cut(self) -> bool:
        """Whether the idle connection has something to read: the end of file
        of a server that closed it, or bytes nobody asked for. Either way it is
        not fit to send on. One poll of the socket (redis-py's ``can_read``
        tries a read: a tenth of a single put's client time)."""
        sock = self.conn._sock
        if sock is None:
            return False  # not connected: it connects before sending
        if sock is not self.polled:
            if self.polled is not None:
                self.poller = select.poll()
            try:
                self.poller.register(sock, select.POLLIN)
            except (OSError, ValueError):
                return True
            self.polled = sock
        try:
            return bool(self.poller.poll(0))
        except (OSError, ValueError):
            return True


def readable(sock: Any) -> bool:
    """Whether a socket has something to read now (poll, not select: a
    descriptor above 1024 is fine); an unusable one counts as readable."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


_INCOMPLETE = object()  # what the reader's gets() answers until a reply is whole


def _reader() -> Any:
    """A hiredis reply parser that makes replies as redis-py's does (an error
    reply as redis-py's exception for it, returned); None without hiredis."""
    if hiredis is None:
        return None
    return hiredis.Reader(
        protocolError=InvalidResponse,
        replyError=BaseParser.parse_error,
        notEnoughData=_INCOMPLETE,
    )


def _cuts(conn: Any, reply: Exception) -> bool:
    """Whether an error reply ends the connection, as redis-py's read_response
    has it: one it maps to ConnectionError (NOAUTH, ...), and READONLY on a
    Sentinel-managed connection, so that the next connect asks the sentinels
    where the primary is now."""
    if isinstance(reply, RedisConnectionError):
        return True
    return isinstance(reply, ReadOnlyError) and isinstance(conn, SentinelManagedConnection)


class Sent:
    """Commands sent on a connection, their replies still to be read."""

    __slots__ = ("count", "held")

    def __init__(self, held: _Held, count: int) -> None:
        self.held = held
        self.count = count


class Link:
    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._pool = client.connection_pool
        self._local = threading.local()

    def _held(self) -> _Held:
        """This thread's connection (a child process opens its own)."""
        held = getattr(self._local, "held", None)
        if held is not None and held.forks == _forks:
            return cast(_Held, held)
        fresh = self._local.held = _Held(self._pool.get_connection())
        # a thread pool or a server with a thread per request must not leak
        # one connection per thread that ever ran
        weakref.finalize(fresh, self._pool.release, fresh.conn)
        return fresh

    def command(self, *args: Any) -> Any:
        """One command through the client: its reply parsed the redis-py way."""
        return self._client.execute_command(*args)

    def call(self, *args: Any) -> Any:
        """One command, one round trip; its reply (an error reply is raised)."""
        return self.pipeline([args])[0]

    def pipeline(
        self,
        commands: Iterable[Wired],
        raise_on_error: bool = True,
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """Several commands in one round trip; their replies in order. With
        ``raise_on_error=False`` an error reply is returned in its place.

        Each command is sent as soon as ``commands`` yields it, so Redis runs
        the first while the caller still builds the next (a put_many of 1,000
        jobs is five calls), and ``on_reply(index, reply)`` sees each reply as
        it is read, while Redis runs the next."""
        replies = self.collect(self.send(commands), on_reply)
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    def send(self, commands: Iterable[Wired]) -> Sent:
        """The first half of a round trip: send ``commands`` on this thread's
        connection; ``collect`` reads their replies. Between the two, other
        connections may send theirs (a cluster's nodes work side by side)."""
        held = self._ready()
        conn = held.conn
        count = 0
        try:
            for command in commands:
                if isinstance(command, Packed):
                    conn.send_packed_command([command.wire()], check_health=False)
                else:
                    conn.send_packed_command(conn.pack_command(*command), check_health=False)
                count += 1
        except BaseException:
            conn.disconnect()  # a half-sent command must not be followed by the next
            raise
        return Sent(held, count)

    def _ready(self) -> _Held:
        """This thread's connection, fit to send on."""
        held = self._held()
        conn = held.conn
        # Commands are never sent twice: Redis may have run them before a cut
        # (a put of a generated id would be stored twice). A connection that
        # was cut while idle (a restart) shows it as end of file: open it again.
        if held.open and held.cut():
            conn.disconnect()
        held.open = False
        if conn._sock is None:
            # connected through connect(), which a Sentinel-managed connection
            # overrides to ask where the primary is now (sending connects
            # without it, to the address of the last primary)
            conn.connect()
        return held

    def roundtrip(self, command: Packed) -> Any:
        """One packed command, one round trip: its reply (an error reply in its
        place). ``pipeline`` for one command, without its bookkeeping: a single
        put spent more time in that than in Redis."""
        held = self._ready()
        conn = held.conn
        sock = conn._sock
        if held.reader_sock is not sock:
            held.reader, held.reader_sock = _reader(), sock
        reader = held.reader
        try:
            sock.sendall(command.wire())
            if reader is None:
                reply = self._reply(conn)
            else:  # the reply read here, without redis-py's layers around hiredis
                reply = reader.gets()
                while reply is _INCOMPLETE:
                    size = sock.recv_into(held.buffer)
                    if not size:
                        raise RedisConnectionError("the server closed the connection")
                    reader.feed(held.buffer, 0, size)
                    reply = reader.gets()
        except BaseException as exc:
            conn.disconnect()  # half sent or half read: not fit for the next command
            held.reader_sock = None
            if isinstance(exc, TimeoutError):  # the socket's, as redis-py says it
                raise RedisTimeoutError("Timeout: no reply within socket_timeout") from None
            raise
        if isinstance(reply, Exception) and _cuts(conn, reply):
            conn.disconnect()  # as redis-py's read_response does with such replies
            held.reader_sock = None
            raise reply
        held.open = True
        return reply

    def collect(self, sent: Sent, on_reply: Callable[[int, Any], None] | None = None) -> list[Any]:
        """The second half: a reply per command sent (an error reply in its place)."""
        conn = sent.held.conn
        replies = []
        try:
            for index in range(sent.count):
                replies.append(self._reply(conn))
                if on_reply is not None:
                    on_reply(index, replies[-1])
        except BaseException:
            conn.disconnect()  # a half-read reply must not be read as the next one
            raise
        sent.held.open = True
        return replies

    @staticmethod
    def _reply(conn: Any) -> Any:
        try:
            return conn.read_response()
        except ResponseError as exc:  # the next reply is still to be read
            return exc

    def close(self) -> None:
        """Disconnect this thread's connection (the client's pool closes the rest)."""
        held = getattr(self._local, "held", None)
        if held is not None:
            held.conn.disconnect()
