"""Opening a backend from a store URL; optional drivers are imported lazily."""

from __future__ import annotations

from chronoq.backends.base import Backend, ReserveResult, Watcher
from chronoq.backends.sqlite import SQLiteBackend
from chronoq.backends.url import DEFAULT_URL, ENV_VAR, StoreURL
from chronoq.errors import InvalidInput

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "Backend",
    "ReserveResult",
    "StoreURL",
    "Watcher",
    "open_backend",
]


def open_backend(url: StoreURL) -> Backend:
    """The backend for ``url``; raises ``InvalidInput`` for an unsupported scheme."""
    if url.scheme == "sqlite":
        return SQLiteBackend.from_url(url)
    if url.scheme in ("redis", "rediss", "unix", "redis+sentinel", "redis+cluster"):
        try:
            from chronoq.backends.redis import RedisBackend
            from chronoq.backends.redis.cluster import ClusterBackend
        except ImportError as exc:  # the redis extra is not installed
            raise InvalidInput(
                f"{url.scheme}:// stores need the redis driver: pip install 'chronoq[redis]' "
                f"({exc})"
            ) from None
        if url.scheme == "redis+cluster":
            return ClusterBackend.from_url(url)
        return RedisBackend.from_url(url)
    raise InvalidInput(
        f"unsupported store URL scheme {url.scheme!r} in {url.raw!r}: use "
        "sqlite:///relative/path.db, sqlite:////absolute/path.db, sqlite://:memory:, "
        "redis://host:port/db, rediss://…, unix:///path/to/redis.sock, "
        "redis+sentinel://host:26379[,host:26379]/primary-name[/db] or "
        "redis+cluster://host:port[,host:port]"
    )
