"""Recurring schedules in Redis: three keys per topic, under the hash tag of
the topic's shard 0 (so one MULTI reaches all three on Redis Cluster too):

- ``<prefix>:{<topic>:0}:schedules``: hash, name -> spec (opaque bytes);
- ``<prefix>:{<topic>:0}:schedules:created``: hash, name -> created_at (ms);
- ``<prefix>:{<topic>:0}:schedules:last``: sorted set, name -> the latest
  occurrence put (ms), -1 before the first.

A put or a remove writes the three in one MULTI, so a schedule has all three
entries or none. Marking is one ``ZADD XX GT``: atomic, it only ever raises
the last occurrence, and ``XX`` makes it a no-op once the schedule is gone,
so no Lua is needed. Schedules are not jobs: no events, no wake-ups, and
``purge`` (which deletes only the job keys) leaves them.

``RedisSchedules`` is a mixin of ``RedisBackend``; ``AsyncRedisSchedules``
does the same with a ``redis.asyncio`` client.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, cast

import redis
import redis.asyncio

from chronoq.backends.base import StoredSchedule

__all__ = ["AsyncRedisSchedules", "RedisSchedules", "schedule_keys"]

_NEVER = -1  # the score of a schedule that has not put an occurrence yet


def schedule_keys(prefix: str, topic: str) -> tuple[str, str, str]:
    """The spec hash, the created_at hash and the last-occurrence sorted set."""
    tag = f"{prefix}:{{{topic}:0}}:schedules"
    return tag, tag + ":created", tag + ":last"


def _queue_put(pipe: Any, keys: tuple[str, str, str], name: str, spec: bytes, now: int) -> None:
    specs, created, last = keys
    pipe.hset(specs, name, spec)
    pipe.hsetnx(created, name, now)  # a redefinition keeps both times
    pipe.zadd(last, {name: _NEVER}, nx=True)


def _queue_list(pipe: Any, keys: tuple[str, str, str]) -> None:
    specs, created, last = keys
    pipe.time()
    pipe.hgetall(specs)
    pipe.hgetall(created)
    pipe.zrange(last, 0, -1, withscores=True)


def _queue_remove(pipe: Any, keys: tuple[str, str, str], name: str) -> None:
    specs, created, last = keys
    pipe.hdel(specs, name)
    pipe.hdel(created, name)
    pipe.zrem(last, name)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _clock_ms(reply: Any) -> int:
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def _listed(replies: list[Any]) -> tuple[int, list[StoredSchedule]]:
    now = _clock_ms(replies[0])
    specs = cast(dict[bytes | str, bytes], replies[1])
    created = {_text(name): int(at) for name, at in replies[2].items()}
    last = {_text(name): int(score) for name, score in replies[3]}
    schedules = []
    for raw_name, spec in specs.items():
        name = _text(raw_name)
        at = last.get(name, _NEVER)
        schedules.append(
            StoredSchedule(name, bytes(spec), None if at < 0 else at, created.get(name, now))
        )
    schedules.sort()
    return now, schedules


class RedisSchedules:
    """The ``schedules_*`` methods of ``RedisBackend``."""

    _client: redis.Redis
    _prefix: str
    _errors: Callable[[], AbstractContextManager[None]]

    def schedules_put(self, topic: str, name: str, spec: bytes) -> bool:
        keys = schedule_keys(self._prefix, topic)
        with self._errors():
            now = _clock_ms(self._client.time())  # the store's clock, as scripts use
            pipe = self._client.pipeline(transaction=True)
            _queue_put(pipe, keys, name, spec, now)
            return bool(pipe.execute()[1])

    def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]:
        with self._errors():
            pipe = self._client.pipeline(transaction=True)
            _queue_list(pipe, schedule_keys(self._prefix, topic))
            return _listed(pipe.execute())

    def schedules_remove(self, topic: str, name: str) -> bool:
        with self._errors():
            pipe = self._client.pipeline(transaction=True)
            _queue_remove(pipe, schedule_keys(self._prefix, topic), name)
            return bool(pipe.execute()[0])

    def schedules_mark(self, topic: str, name: str, at_ms: int) -> None:
        with self._errors():
            self._client.zadd(
                schedule_keys(self._prefix, topic)[2], {name: at_ms}, xx=True, gt=True
            )


class AsyncRedisSchedules:
    """The ``schedules_*`` calls on a ``redis.asyncio`` client, with the keys
    and commands of ``RedisSchedules``. Redis errors pass through: the caller
    turns them into chronoq errors as it does for its other calls."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def schedules_put(
        self, client: redis.asyncio.Redis, topic: str, name: str, spec: bytes
    ) -> bool:
        keys = schedule_keys(self.prefix, topic)
        now = _clock_ms(await client.time())
        pipe = client.pipeline(transaction=True)
        _queue_put(pipe, keys, name, spec, now)
        return bool((await pipe.execute())[1])

    async def schedules_list(
        self, client: redis.asyncio.Redis, topic: str
    ) -> tuple[int, list[StoredSchedule]]:
        pipe = client.pipeline(transaction=True)
        _queue_list(pipe, schedule_keys(self.prefix, topic))
        return _listed(await pipe.execute())

    async def schedules_remove(self, client: redis.asyncio.Redis, topic: str, name: str) -> bool:
        pipe = client.pipeline(transaction=True)
        _queue_remove(pipe, schedule_keys(self.prefix, topic), name)
        return bool((await pipe.execute())[0])

    async def schedules_mark(
        self, client: redis.asyncio.Redis, topic: str, name: str, at_ms: int
    ) -> None:
        await client.zadd(schedule_keys(self.prefix, topic)[2], {name: at_ms}, xx=True, gt=True)
