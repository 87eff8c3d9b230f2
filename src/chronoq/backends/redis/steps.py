"""The I/O requests of the Redis backend's operations (core.py), and how
redis-py's errors become chronoq's.

Each operation is written once, as a generator that yields requests and gets
their replies back; a driver does the I/O: ``RedisBackend`` on its blocking
connections, ``AsyncRedisBackend`` on redis.asyncio."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chronoq.backends.redis.packing import Packed, Wired
from chronoq.errors import BackendUnavailable, ChronoqError

__all__ = ["REDIS_ERRORS", "Command", "Pipeline", "Request", "Steps", "errors", "translated"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Raw commands on one connection in one round trip, each sent as soon as
    ``commands`` yields it; ``on_reply(index, reply)`` sees each reply as it
    is read. Reply: the list of replies, an error reply as a ResponseError in
    its place. No command is ever sent twice."""

    commands: Iterable[Wired]
    on_reply: Callable[[int, Any], None] | None = None


@dataclass(frozen=True, slots=True)
class Command:
    """One command through the redis-py client (its reply parsed the client's
    way, as ``client.execute_command(*args)`` returns it)."""

    args: tuple[Any, ...]


#: a lone ``Packed`` command is a request too: one round trip, its reply (an
#: error reply in its place), on the drivers' shortest path
Request: TypeAlias = Pipeline | Command | Packed
#: an operation: yields requests, is sent their replies, returns its result
Steps: TypeAlias = Generator[Request, Any, T]

REDIS_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError, ResponseError)


def translated(url: str, exc: BaseException) -> ChronoqError:
    """The chronoq error for one of ``REDIS_ERRORS``, naming ``url`` (no password)."""
    if isinstance(exc, ResponseError):
        return ChronoqError(f"{url}: Redis refused a chronoq script: {exc}")
    return BackendUnavailable(f"{url}: {exc}")


@contextmanager
def errors(url: str) -> Iterator[None]:
    """redis-py's errors raised inside as chronoq's (without redis-py's traceback)."""
    try:
        yield
    except REDIS_ERRORS as exc:
        raise translated(url, exc) from None
