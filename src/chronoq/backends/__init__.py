"""Opening a backend from a store URL; optional drivers are imported lazily."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from chronoq.backends.base import Backend, ReserveResult, Watcher
from chronoq.errors import InvalidInput

__all__ = ["DEFAULT_URL", "Backend", "ReserveResult", "StoreURL", "Watcher", "open_backend"]

DEFAULT_URL = "sqlite:///chronoq.db"
ENV_VAR = "CHRONOQ_STORE"


@dataclass(frozen=True)
class StoreURL:
    """A parsed store URL. ``options`` are its query parameters."""

    scheme: str
    raw: str
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, url: str | None) -> StoreURL:
        url = url or os.environ.get(ENV_VAR) or DEFAULT_URL
        if not isinstance(url, str):
            raise InvalidInput(f"store URL must be a string, got {url!r}")
        if "://" not in url:  # a bare path is a SQLite file
            url = "sqlite:///" + url
        parts = urlsplit(url)
        return cls(parts.scheme.lower(), url, dict(parse_qsl(parts.query, keep_blank_values=True)))

    def pop_int(self, name: str, default: int, minimum: int = 0) -> int:
        raw = self.options.pop(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise InvalidInput(f"store URL option {name}={raw!r} must be an integer >= {minimum}")
        return value

    def reject_unknown(self) -> None:
        if self.options:
            names = ", ".join(sorted(self.options))
            raise InvalidInput(f"unknown store URL option(s): {names}")


def open_backend(url: StoreURL) -> Backend:
    """The backend for ``url``; raises ``InvalidInput`` for an unsupported scheme."""
    if url.scheme == "sqlite":
        from chronoq.backends.sqlite import SQLiteBackend

        return SQLiteBackend.from_url(url)
    if url.scheme in ("redis", "rediss", "unix"):
        try:
            from chronoq.backends.redis import RedisBackend
        except ImportError as exc:  # the redis extra is not installed
            raise InvalidInput(
                f"{url.scheme}:// stores need the redis driver: pip install 'chronoq[redis]' "
                f"({exc})"
            ) from None
        return RedisBackend.from_url(url)
    raise InvalidInput(
        f"unsupported store URL scheme {url.scheme!r} in {url.raw!r}: use "
        "sqlite:///relative/path.db, sqlite:////absolute/path.db, sqlite://:memory:, "
        "redis://host:port/db, rediss://… or unix:///path/to/redis.sock"
    )
