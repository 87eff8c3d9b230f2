"""The Redis backend: every transition is one Lua script (lua/*.lua), one round
trip, on the keys of one ``{topic:shard}`` hash slot. The operations are
written once, without I/O (core.py); this module makes their round trips on
blocking connections, and ``asyncio_backend`` gives the same store on
redis.asyncio (aio_backend.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel

from chronoq.backends.base import AsyncBackend, Backend, Watcher
from chronoq.backends.forwarding import fill_contract
from chronoq.backends.redis.aio_backend import AsyncRedisBackend
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.links.single import Link
from chronoq.backends.redis.operations import operation
from chronoq.backends.redis.packing import Packed
from chronoq.backends.redis.steps import REDIS_ERRORS, Pipeline, Steps, translated
from chronoq.backends.redis.urls import (
    SENTINEL_SCHEMES,
    RedisOptions,
    driver_url,
    hosts_of,
    read_options,
    redacted,
    sentinel_target,
)
from chronoq.backends.redis.watcher import RedisWatcher
from chronoq.backends.url import StoreURL
from chronoq.errors import InvalidInput

__all__ = ["RedisBackend"]

T = TypeVar("T")


class RedisBackend(Backend):
    """Jobs in Redis 7+, sharded by a stable hash of their id. The methods of
    the contract not written here run the core's operation of the same name
    (``fill_contract`` below)."""

    def __init__(
        self,
        client: redis.Redis | None,
        *,
        url: str,
        options: RedisOptions,
        link: Any = None,
        connect_async: Callable[[], redis.asyncio.Redis] | None = None,
        spread_slots: bool = False,
    ) -> None:
        """``link`` makes the round trips (links/single.py: this thread's connection of
        ``client``; a cluster's, links/cluster.py); ``connect_async`` opens the
        same store on redis.asyncio (None: asyncio calls run in threads);
        ``spread_slots``: shard tags spread over the slot ring (keys.py)."""
        self.url = url
        self.shards = options.shards
        self._client = client
        self._prefix = options.prefix
        self._connect_async = connect_async
        self._core = RedisCore(
            url=url,
            shards=options.shards,
            prefix=options.prefix,
            events_max=options.events_max,
            horizon_ms=options.horizon_ms,
            far_bucket_ms=options.far_bucket_ms,
            replicas=options.replicas,
            replica_timeout_ms=options.replica_timeout_ms,
            spread_slots=spread_slots,
        )
        self._scripts = self._core.scripts
        self._link: Any = Link(client) if link is None and client is not None else link

    @classmethod
    def from_url(cls, url: StoreURL) -> RedisBackend:
        if url.scheme in SENTINEL_SCHEMES:
            return cls._sentinel(url)
        options = read_options(url, default_shards=1)
        single = driver_url(url, options.driver)
        try:
            client = redis.Redis.from_url(single)
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {redacted(url.raw)!r}: {exc}") from None
        return cls(
            client,
            url=redacted(url.raw),
            options=options,
            connect_async=lambda: redis.asyncio.Redis.from_url(single),
        )

    @classmethod
    def _sentinel(cls, url: StoreURL) -> RedisBackend:
        """A primary that Sentinel names: each new connection asks the
        sentinels where it is now, so a failover needs no restart."""
        options = read_options(url, default_shards=1)
        hosts = hosts_of(url, default_port=26379)
        name, db = sentinel_target(url, hosts)
        kwargs = options.driver_kwargs()
        if hosts.username is not None:
            kwargs.setdefault("username", hosts.username)
        if hosts.password is not None:
            kwargs.setdefault("password", hosts.password)
        sentinel_kwargs = options.driver_kwargs(options.sentinel)

        def connect_async() -> redis.asyncio.Redis:
            sentinels = redis.asyncio.sentinel.Sentinel(
                hosts.addresses, sentinel_kwargs=sentinel_kwargs, **kwargs
            )
            return cast(redis.asyncio.Redis, sentinels.master_for(name, db=db))

        sentinels = redis.sentinel.Sentinel(
            hosts.addresses, sentinel_kwargs=sentinel_kwargs, **kwargs
        )
        return cls(
            sentinels.master_for(name, db=db),
            url=redacted(url.raw),
            options=options,
            connect_async=connect_async,
        )

    def asyncio_backend(self, *, owned: bool) -> AsyncBackend | None:
        """The same store on redis.asyncio (its own connections; the same
        operations, see core.py). A backend made from a client rather than
        from a URL runs its asyncio calls in threads (None)."""
        if self._connect_async is None:
            return None
        return AsyncRedisBackend(  # type: ignore[abstract]  # see fill_contract
            self._core, self._connect_async(), owner=self if owned else None
        )

    # -- the driver --------------------------------------------------------------------

    def _drive(self, steps: Steps[T]) -> T:
        """Run an operation of the core: make each round trip it asks for."""
        reply: Any = None
        try:
            while True:
                request = steps.send(reply)
                if type(request) is Packed:
                    reply = self._link.roundtrip(request)
                elif isinstance(request, Pipeline):
                    reply = self._link.pipeline(request.commands, False, request.on_reply)
                else:
                    reply = self._link.command(*request.args)
        except StopIteration as done:
            return cast(T, done.value)
        except REDIS_ERRORS as exc:
            raise translated(self.url, exc) from None

    def watch(self, topic: str) -> Watcher:
        assert self._client is not None  # a cluster's backend has its own watch
        return RedisWatcher(
            self._client,
            self._link,
            self._core.wake_keys(topic),
            self.url,
            lambda shards, token: self._drive(self._core.hand_over(topic, shards, token)),
            lambda shard: self._core.hints.mark(topic, shard),
        )

    def close(self) -> None:
        self._link.close()
        if self._client is not None:
            self._client.close()
            # a Sentinel-managed primary: the sentinels' own connections too
            manager = getattr(self._client.connection_pool, "sentinel_manager", None)
            for sentinel in getattr(manager, "sentinels", ()):
                sentinel.close()


def _driven(name: str) -> Callable[..., Any]:
    op = operation(name)

    def method(self: RedisBackend, *args: Any, **kwargs: Any) -> Any:
        return self._drive(op(self._core, *args, **kwargs))

    return method


# every other operation: the core's, driven on blocking connections
fill_contract(RedisBackend, _driven)
