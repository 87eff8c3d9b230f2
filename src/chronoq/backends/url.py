"""A store URL, parsed: its scheme, and its query parameters as options that
each backend takes out as it reads them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from chronoq.errors import InvalidInput

__all__ = ["DEFAULT_URL", "ENV_VAR", "StoreURL", "redacted"]

DEFAULT_URL = "sqlite:///chronoq.db"
ENV_VAR = "CHRONOQ_STORE"


def redacted(url: str) -> str:
    """The URL without its query and without any password."""
    base = url.split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return base
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"


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
