"""The Redis backend: every transition is one Lua script (lua/*.lua), one round
trip, on the keys of one ``{topic:shard}`` hash slot. The operations are
written once, without I/O (core.py); this module makes their round trips on
blocking connections, and ``asyncio_backend`` gives the same store on
redis.asyncio (aio_backend.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast
from urllib.parse import urlencode, urlsplit

import redis
import redis.asyncio
from redis.connection import URL_QUERY_ARGUMENT_PARSERS

from chronoq.aio.base import AsyncBackend
from chronoq.backends import StoreURL
from chronoq.backends.base import Backend, ReserveResult, StoredSchedule, Watcher
from chronoq.backends.redis import logs, schedules
from chronoq.backends.redis.aio_backend import AsyncRedisBackend
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.link import Link
from chronoq.backends.redis.steps import REDIS_ERRORS, Pipeline, Steps, translated
from chronoq.backends.redis.watcher import RedisWatcher
from chronoq.backoff import Backoff
from chronoq.errors import InvalidInput
from chronoq.job import EventPage, JobInfo, JobPage, LogRead, LogShard, NewJob, PutResult
from chronoq.states import State

__all__ = ["RedisBackend"]

T = TypeVar("T")
# redis-py would send a command again after a timeout or an error, when Redis
# may have run it already (a put of a generated id stored twice): chronoq
# never resends, and raises BackendUnavailable instead
_RESENDING = frozenset({"retry_on_timeout", "retry_on_error"})
# query options redis-py's from_url understands: passed on to it
_DRIVER_OPTIONS = (frozenset(URL_QUERY_ARGUMENT_PARSERS) - _RESENDING) | {
    "client_name",
    "username",
    "password",
    "protocol",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
}


def _redacted(url: str) -> str:
    """The URL without its query and without any password."""
    base = url.split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return base
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"


def _driver_url(url: StoreURL, options: dict[str, str]) -> str:
    """The URL for redis-py: chronoq's options taken out, the db checked."""
    base = url.raw.split("?", 1)[0]
    if url.scheme in ("redis", "rediss"):
        try:
            parts = urlsplit(base)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {_redacted(url.raw)!r}: {exc}") from None
        db = parts.path.strip("/")
        if parts.path not in ("", "/") and not (db.isdigit() and "/" not in db):
            raise InvalidInput(
                f"bad Redis URL {_redacted(url.raw)!r}: the path must be a database "
                f"number, as in redis://host:6379/0, not {parts.path!r}"
            )
    return base + ("?" + urlencode(options) if options else "")


class RedisBackend(Backend):
    """Jobs in Redis 7+, sharded by a stable hash of their id."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        url: str,
        shards: int = 1,
        prefix: str = "chronoq",
        events_max: int = 100_000,
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
        driver_url: str | None = None,
    ) -> None:
        self.url = url
        self.shards = shards
        self._client = client
        self._prefix = prefix
        self._driver_url = driver_url  # for redis.asyncio: the same server and settings
        self._core = RedisCore(
            url=url,
            shards=shards,
            prefix=prefix,
            events_max=events_max,
            replicas=replicas,
            replica_timeout_ms=replica_timeout_ms,
        )
        self._scripts = self._core.scripts
        self._link = Link(client)

    @classmethod
    def from_url(cls, url: StoreURL) -> RedisBackend:
        options = StoreURL(url.scheme, url.raw, dict(url.options))
        shards = options.pop_int("shards", 1, minimum=1)
        events_max = options.pop_int("events_max", 100_000, minimum=1)
        prefix = options.options.pop("prefix", "chronoq")
        replicas = options.pop_int("replicas", 0)
        replica_timeout_ms = options.pop_int("replica_timeout_ms", 1000, minimum=1)
        resending = _RESENDING & set(options.options)
        if resending:
            raise InvalidInput(
                f"store URL option(s) {', '.join(sorted(resending))} are not supported: "
                "chronoq never sends a call twice, since Redis may have run it before a "
                "timeout; it raises BackendUnavailable and the caller decides"
            )
        unknown = set(options.options) - _DRIVER_OPTIONS
        if unknown:
            raise InvalidInput(
                f"unknown store URL option(s): {', '.join(sorted(unknown))} (chronoq takes "
                "shards, prefix, events_max, replicas, replica_timeout_ms; redis-py takes "
                + ", ".join(sorted(_DRIVER_OPTIONS))
                + ")"
            )
        driver_url = _driver_url(url, options.options)
        try:
            client = redis.Redis.from_url(driver_url)
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {_redacted(url.raw)!r}: {exc}") from None
        return cls(
            client,
            url=_redacted(url.raw),
            shards=shards,
            prefix=prefix,
            events_max=events_max,
            replicas=replicas,
            replica_timeout_ms=replica_timeout_ms,
            driver_url=driver_url,
        )

    def asyncio_backend(self, *, owned: bool) -> AsyncBackend:
        """The same store on redis.asyncio (its own connections; the same
        operations, see core.py). A backend made from a client rather than
        from a URL runs its asyncio calls in threads."""
        if self._driver_url is None:
            return super().asyncio_backend(owned=owned)
        client = redis.asyncio.Redis.from_url(self._driver_url)
        return AsyncRedisBackend(self._core, client, owner=self if owned else None)

    # -- the driver --------------------------------------------------------------------

    def _drive(self, steps: Steps[T]) -> T:
        """Run an operation of the core: make each round trip it asks for."""
        reply: Any = None
        try:
            while True:
                request = steps.send(reply)
                if isinstance(request, Pipeline):
                    reply = self._link.pipeline(request.commands, False, request.on_reply)
                else:
                    reply = self._client.execute_command(*request.args)
        except StopIteration as done:
            return cast(T, done.value)
        except REDIS_ERRORS as exc:
            raise translated(self.url, exc) from None

    # -- the operations (core.py) ------------------------------------------------------

    def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> list[PutResult]:
        return self._drive(self._core.put_many(topic, jobs, replace))

    def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: Watcher | None = None
    ) -> ReserveResult:
        holder = waiter if isinstance(waiter, RedisWatcher) else None
        return self._drive(self._core.reserve(topic, count, ttr_ms, holder))

    def watch(self, topic: str) -> Watcher:
        return RedisWatcher(
            self._client,
            self._link,
            self._core.wake_keys(topic),
            self.url,
            lambda shards, token: self._drive(self._core.release(topic, shards, token)),
        )

    def ack_many(self, topic: str, leases: Sequence[tuple[str, str]]) -> list[str]:
        return self._drive(self._core.ack_many(topic, leases))

    def nack(
        self,
        topic: str,
        job_id: str,
        lease: str,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State:
        return self._drive(self._core.nack(topic, job_id, lease, delay_ms, error, backoff, jitter))

    def release(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        self._drive(self._core.give_back(topic, job_id, lease, error))

    def touch(self, topic: str, job_id: str, lease: str, ttr_ms: int | None) -> int:
        return self._drive(self._core.touch(topic, job_id, lease, ttr_ms))

    def bury(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        self._drive(self._core.bury(topic, job_id, lease, error))

    def get(self, topic: str, job_id: str) -> JobInfo | None:
        return self._drive(self._core.get(topic, job_id))

    def delete(self, topic: str, job_id: str) -> bool:
        return self._drive(self._core.delete(topic, job_id))

    def reschedule(self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None) -> bool:
        return self._drive(self._core.reschedule(topic, job_id, delay_ms, run_at_ms))

    def stats(self, topic: str) -> dict[str, Any]:
        return self._drive(self._core.stats(topic))

    def topics(self) -> list[str]:
        return self._drive(self._core.topics())

    def dead(self, topic: str, limit: int) -> list[JobInfo]:
        return self._drive(self._core.dead(topic, limit))

    def requeue(self, topic: str, ids: Sequence[str] | None) -> int:
        return self._drive(self._core.requeue(topic, ids))

    def purge(self, topic: str) -> int:
        return self._drive(self._core.purge(topic))

    def set_paused(self, topic: str, paused: bool) -> None:
        self._drive(self._core.set_paused(topic, paused))

    def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage:
        return self._drive(self._core.events(topic, cursor, limit))

    # -- reading in bulk (logs.py) ------------------------------------------------------

    def jobs(self, topic: str, shard: int, cursor: str | None, limit: int) -> JobPage:
        return self._drive(logs.jobs_page(self._core, topic, shard, cursor, limit))

    def log_shards(self, topic: str | None) -> list[LogShard]:
        return self._drive(logs.log_shards(self._core, topic))

    def log_read(self, shard: LogShard, after: int, limit: int) -> LogRead:
        return self._drive(logs.log_read(self._core, shard, after, limit))

    def log_trim(self, shard: LogShard, upto: int) -> None:
        self._drive(logs.log_trim(self._core, shard, upto))

    # -- recurring schedules (schedules.py) --------------------------------------------

    def schedules_put(self, topic: str, name: str, spec: bytes) -> bool:
        return self._drive(schedules.schedules_put(self._core, topic, name, spec))

    def schedules_list(self, topic: str) -> tuple[int, list[StoredSchedule]]:
        return self._drive(schedules.schedules_list(self._core, topic))

    def schedules_remove(self, topic: str, name: str) -> bool:
        return self._drive(schedules.schedules_remove(self._core, topic, name))

    def schedules_mark(self, topic: str, name: str, at_ms: int) -> None:
        self._drive(schedules.schedules_mark(self._core, topic, name, at_ms))

    def close(self) -> None:
        self._link.close()
        self._client.close()
