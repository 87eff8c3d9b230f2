"""The Redis backend: every transition is one Lua script (lua/*.lua), one round
trip, on the keys of one ``{topic:shard}`` hash slot. The operations are
written once, without I/O (core.py); this module makes their round trips on
blocking connections, and ``asyncio_backend`` gives the same store on
redis.asyncio (aio_backend.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlencode, urlsplit

import redis
import redis.asyncio
from redis.connection import URL_QUERY_ARGUMENT_PARSERS

from chronoq.backends.base import AsyncBackend, Backend, Watcher
from chronoq.backends.forwarding import fill_contract
from chronoq.backends.redis.aio_backend import AsyncRedisBackend
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.link import Link
from chronoq.backends.redis.operations import operation
from chronoq.backends.redis.steps import REDIS_ERRORS, Pipeline, Steps, translated
from chronoq.backends.redis.watcher import RedisWatcher
from chronoq.backends.url import StoreURL
from chronoq.errors import InvalidInput

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
    """Jobs in Redis 7+, sharded by a stable hash of their id. The methods of
    the contract not written here run the core's operation of the same name
    (``fill_contract`` below)."""

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

    def asyncio_backend(self, *, owned: bool) -> AsyncBackend | None:
        """The same store on redis.asyncio (its own connections; the same
        operations, see core.py). A backend made from a client rather than
        from a URL runs its asyncio calls in threads (None)."""
        if self._driver_url is None:
            return None
        client = redis.asyncio.Redis.from_url(self._driver_url)
        return AsyncRedisBackend(  # type: ignore[abstract]  # see fill_contract
            self._core, client, owner=self if owned else None
        )

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

    def watch(self, topic: str) -> Watcher:
        return RedisWatcher(
            self._client,
            self._link,
            self._core.wake_keys(topic),
            self.url,
            lambda shards, token: self._drive(self._core.hand_over(topic, shards, token)),
        )

    def close(self) -> None:
        self._link.close()
        self._client.close()


def _driven(name: str) -> Callable[..., Any]:
    op = operation(name)

    def method(self: RedisBackend, *args: Any, **kwargs: Any) -> Any:
        return self._drive(op(self._core, *args, **kwargs))

    return method


# every other operation: the core's, driven on blocking connections
fill_contract(RedisBackend, _driven)
