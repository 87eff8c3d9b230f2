"""Redis store URLs: ``redis://`` (and ``rediss://``, ``unix://``) for one
server, ``redis+sentinel://`` for a Sentinel-managed primary and
``redis+cluster://`` for Redis Cluster. chronoq's options (``shards``,
``prefix``…) are taken out here; the rest are redis-py's connection options,
checked by name so that a typo is an error, not a silent default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from redis.connection import URL_QUERY_ARGUMENT_PARSERS

from chronoq.backends.url import StoreURL, redacted
from chronoq.errors import InvalidInput

__all__ = [
    "CLUSTER_SCHEMES",
    "MAX_SHARDS",
    "SENTINEL_SCHEMES",
    "RedisOptions",
    "driver_url",
    "hosts_of",
    "read_options",
    "redacted",
]

CLUSTER_SCHEMES = ("redis+cluster",)
SENTINEL_SCHEMES = ("redis+sentinel",)

# redis-py would send a command again after a timeout or an error, when Redis
# may have run it already (a put of a generated id stored twice): chronoq
# never resends, and raises BackendUnavailable instead
_RESENDING = frozenset({"retry_on_timeout", "retry_on_error"})
_STRINGS = frozenset(
    {"client_name", "username", "password", "ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile"}
    | {"ssl_keyfile"}
)
# query options redis-py understands: passed on to it
DRIVER_OPTIONS = (frozenset(URL_QUERY_ARGUMENT_PARSERS) - _RESENDING) | _STRINGS | {"protocol"}
_CHRONOQ = "shards, prefix, events_max, replicas, replica_timeout_ms, horizon_ms, far_bucket_ms"
DEFAULT_HORIZON_MS = 600_000  # ten minutes: a far job is promoted this long before its bucket
DEFAULT_FAR_BUCKET_MS = 60_000
MAX_SHARDS = 1024


@dataclass
class RedisOptions:
    """chronoq's options of a Redis URL, and the driver's (as given: strings)."""

    shards: int
    prefix: str
    events_max: int
    replicas: int
    replica_timeout_ms: int
    #: jobs whose bucket starts later than this go to the far tier; None: none do
    horizon_ms: int | None = DEFAULT_HORIZON_MS
    #: the far tier's bucket width (tests shrink it: a store keeps one for good)
    far_bucket_ms: int = DEFAULT_FAR_BUCKET_MS
    redirect_budget: float = 5.0
    driver: dict[str, str] = field(default_factory=dict)
    sentinel: dict[str, str] = field(default_factory=dict)

    def driver_kwargs(self, options: dict[str, str] | None = None) -> dict[str, Any]:
        """The driver's options as redis-py's keyword arguments, typed."""
        kwargs: dict[str, Any] = {}
        for name, raw in (self.driver if options is None else options).items():
            parse: Any = URL_QUERY_ARGUMENT_PARSERS.get(name)
            try:
                if parse is not None:
                    kwargs[name] = parse(raw)
                elif name == "protocol":
                    kwargs[name] = int(raw)
                else:
                    kwargs[name] = raw
            except ValueError:
                raise InvalidInput(f"store URL option {name}={raw!r} is not valid") from None
        return kwargs


def read_options(url: StoreURL, default_shards: int) -> RedisOptions:
    """chronoq's options taken out of ``url``; the rest checked by name."""
    options = StoreURL(url.scheme, url.raw, dict(url.options))
    read = RedisOptions(
        shards=options.pop_int("shards", default_shards, minimum=1),
        events_max=options.pop_int("events_max", 100_000, minimum=1),
        prefix=options.options.pop("prefix", "chronoq"),
        replicas=options.pop_int("replicas", 0),
        replica_timeout_ms=options.pop_int("replica_timeout_ms", 1000, minimum=1),
        horizon_ms=_horizon(options),
        far_bucket_ms=options.pop_int("far_bucket_ms", DEFAULT_FAR_BUCKET_MS, minimum=1),
    )
    if url.scheme in CLUSTER_SCHEMES and read.shards > MAX_SHARDS:  # tags: keys.shard_tag
        raise InvalidInput(f"store URL option shards={read.shards} must be at most {MAX_SHARDS}")
    chronoq_names = _CHRONOQ
    if url.scheme in CLUSTER_SCHEMES:
        read.redirect_budget = options.pop_int("redirect_budget_ms", 5000, minimum=0) / 1000
        chronoq_names += ", redirect_budget_ms"
    resending = _RESENDING & {name.removeprefix("sentinel_") for name in options.options}
    if resending:
        raise InvalidInput(
            f"store URL option(s) {', '.join(sorted(resending))} are not supported: "
            "chronoq never sends a call twice, since Redis may have run it before a "
            "timeout; it raises BackendUnavailable and the caller decides"
        )
    for name, value in options.options.items():
        if url.scheme in SENTINEL_SCHEMES and name.startswith("sentinel_"):
            read.sentinel[name.removeprefix("sentinel_")] = value
        else:
            read.driver[name] = value
    unknown = (set(read.driver) | set(read.sentinel)) - DRIVER_OPTIONS
    if unknown:
        sentinel = (
            " (sentinel_<option> for the sentinels' connections)"
            if url.scheme in SENTINEL_SCHEMES
            else ""
        )
        raise InvalidInput(
            f"unknown store URL option(s): {', '.join(sorted(unknown))} (chronoq takes "
            f"{chronoq_names}; redis-py takes " + ", ".join(sorted(DRIVER_OPTIONS)) + sentinel + ")"
        )
    return read


def driver_url(url: StoreURL, options: dict[str, str]) -> str:
    """The URL of one server for redis-py: chronoq's options taken out, the db checked."""
    base = url.raw.split("?", 1)[0]
    if url.scheme in ("redis", "rediss"):
        try:
            parts = urlsplit(base)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {redacted(url.raw)!r}: {exc}") from None
        _db_of(url, parts.path)
    return base + ("?" + urlencode(options) if options else "")


def _db_of(url: StoreURL, path: str) -> int:
    db = path.strip("/")
    if path in ("", "/"):
        return 0
    if not (db.isdigit() and "/" not in db):
        raise InvalidInput(
            f"bad Redis URL {redacted(url.raw)!r}: the path must be a database "
            f"number, as in redis://host:6379/0, not {path!r}"
        )
    return int(db)


@dataclass
class Hosts:
    """The servers of a cluster or the sentinels of a primary, with the
    credentials of the URL and what its path names."""

    addresses: list[tuple[str, int]]
    username: str | None
    password: str | None
    path: str


def hosts_of(url: StoreURL, default_port: int) -> Hosts:
    """``host[:port][,host[:port]…]`` of a URL, with its user and password."""
    base = url.raw.split("?", 1)[0]
    rest = base.partition("://")[2]
    netloc, _, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    addresses = []
    for item in hostlist.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon:
            host, port = port, str(default_port)
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidInput(
                f"bad Redis URL {redacted(url.raw)!r}: {item!r} is not host:port "
                f"(as in {url.scheme}://10.0.0.1:{default_port},10.0.0.2:{default_port})"
            )
        addresses.append((host, int(port)))
    return Hosts(addresses, username, password, "/" + path if path else "")


def sentinel_target(url: StoreURL, hosts: Hosts) -> tuple[str, int]:
    """The primary's service name and db of ``redis+sentinel://…/name[/db]``."""
    parts = [part for part in hosts.path.split("/") if part]
    if not parts or len(parts) > 2:
        raise InvalidInput(
            f"bad Redis URL {redacted(url.raw)!r}: name the primary as Sentinel knows "
            "it, as in redis+sentinel://127.0.0.1:26379/mymaster or …/mymaster/0"
        )
    return unquote(parts[0]), _db_of(url, "/" + parts[1] if len(parts) == 2 else "")


def cluster_path(url: StoreURL, hosts: Hosts) -> None:
    """A cluster has one database: a path other than ``/`` or ``/0`` is a mistake."""
    if hosts.path not in ("", "/", "/0"):
        raise InvalidInput(
            f"bad Redis URL {redacted(url.raw)!r}: Redis Cluster has only database 0, "
            f"so the URL takes no path ({hosts.path!r})"
        )


def _horizon(options: StoreURL) -> int | None:
    """``horizon_ms``: a number of ms, or ``off`` (no new far jobs; those already
    far are still promoted in time)."""
    if options.options.get("horizon_ms") == "off":
        del options.options["horizon_ms"]
        return None
    return options.pop_int("horizon_ms", DEFAULT_HORIZON_MS)
