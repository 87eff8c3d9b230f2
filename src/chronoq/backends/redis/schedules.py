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

Each call is written once, without I/O, as the operations of core.py are:
both drivers send it on their own connections (never twice, unlike redis-py's
client with a retry policy) and, with ``replicas``, ``WAIT`` after a write on
the same connection, as they do after every script.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chronoq.backends.base import StoredSchedule
from chronoq.backends.redis.codec import by_name
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.steps import Pipeline, Steps

__all__ = ["schedule_keys", "schedules_list", "schedules_mark", "schedules_put", "schedules_remove"]

_NEVER = -1  # the score of a schedule that has not put an occurrence yet


def schedule_keys(prefix: str, topic: str) -> tuple[str, str, str]:
    """The spec hash, the created_at hash and the last-occurrence sorted set."""
    tag = f"{prefix}:{{{topic}:0}}:schedules"  # shard 0's slot: its tag is plain everywhere
    return tag, tag + ":created", tag + ":last"


def _raised(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


def _transaction(
    core: RedisCore, name: str, commands: list[tuple[Any, ...]], write: bool = True
) -> Steps[list[Any]]:
    """``commands`` in one MULTI (then WAIT after a write): their replies."""
    sent: list[tuple[Any, ...]] = [("MULTI",), *commands, ("EXEC",)]
    wait = write and core.replicas > 0
    if wait:
        sent.append(("WAIT", core.replicas, core.replica_timeout_ms))
    replies: list[Any] = yield Pipeline(sent)
    _raised(replies)
    results: list[Any] = replies[len(commands) + 1]
    _raised(results)
    if wait:
        core.check_replicas(name, int(replies[-1]))
    return results


def _clock_ms(reply: Any) -> int:
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def schedules_put(core: RedisCore, topic: str, name: str, spec: bytes) -> Steps[bool]:
    specs, created, last = schedule_keys(core.prefix, topic)
    [clock] = yield Pipeline([("TIME",)])  # the store's clock, as scripts use
    _raised([clock])
    commands: list[tuple[Any, ...]] = [
        ("HSET", specs, name, spec),
        ("HSETNX", created, name, _clock_ms(clock)),  # a redefinition keeps both times
        ("ZADD", last, "NX", _NEVER, name),
    ]
    return bool((yield from _transaction(core, "recurring", commands))[1])


def schedules_list(core: RedisCore, topic: str) -> Steps[tuple[int, list[StoredSchedule]]]:
    specs, created, last = schedule_keys(core.prefix, topic)
    commands: list[tuple[Any, ...]] = [
        ("TIME",),
        ("HGETALL", specs),
        ("HGETALL", created),
        ("ZRANGE", last, 0, -1, "WITHSCORES"),
    ]
    replies = yield from _transaction(core, "recurring_list", commands, write=False)
    now = _clock_ms(replies[0])
    created_at = {name: int(at) for name, at in by_name(replies[2]).items()}
    last_at = {name: int(float(score)) for name, score in by_name(replies[3]).items()}
    schedules = []
    for name, spec in by_name(replies[1]).items():
        at = last_at.get(name, _NEVER)
        schedules.append(
            StoredSchedule(name, bytes(spec), None if at < 0 else at, created_at.get(name, now))
        )
    schedules.sort()
    return now, schedules


def schedules_remove(core: RedisCore, topic: str, name: str) -> Steps[bool]:
    specs, created, last = schedule_keys(core.prefix, topic)
    commands: list[tuple[Any, ...]] = [
        ("HDEL", specs, name),
        ("HDEL", created, name),
        ("ZREM", last, name),
    ]
    return bool((yield from _transaction(core, "recurring_remove", commands))[0])


def schedules_mark(core: RedisCore, topic: str, name: str, at_ms: int) -> Steps[None]:
    last = schedule_keys(core.prefix, topic)[2]
    yield from _transaction(core, "run_recurring", [("ZADD", last, "XX", "GT", at_ms, name)])
