"""The server's settings: limits on what one request may ask, the tokens,
and the dashboard's mode; read from a TOML file (``--config``)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from chronoq.errors import InvalidInput
from chronoq.server.auth import Action, Auth, Token

__all__ = ["ConfigError", "Limits", "ServerSettings", "load_settings"]

_HEX64 = re.compile(r"[0-9a-f]{64}")


class ConfigError(InvalidInput):
    """The config file cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Limits:
    """What one request, and one client, may ask. ``max_wait`` caps a long
    poll of the /v1 API; ``pop_wait`` is how long the ouqiang ``/pop`` holds
    (178 s, as ouqiang does). The connection limits hold per server process:
    a connection whose request head (or body) is not in within its timeout
    is closed, so is one idle for ``keep_alive`` seconds after an answer, and
    one opened while ``max_connections`` are open is answered 503 and closed."""

    max_body: int = 8 * 1024 * 1024  # bytes of one request body (413 beyond)
    max_batch: int = 1000  # jobs of one jobs:batch or ack batch
    max_count: int = 1000  # jobs of one reserve
    max_wait: float = 60.0  # seconds of one long poll
    pop_wait: float = 178.0
    # topics of one pop (ouqiang /pop, Youzan pop): each is waited on, and
    # tried in turn at each wake-up; real clients name a handful
    max_pop_topics: int = 32
    # seconds for a request's head, from the connection's opening (or from
    # the first byte of a later request on it)
    head_timeout: float = 5.0
    body_timeout: float = 30.0  # seconds for a request's body, once its head is in
    keep_alive: float = 5.0  # seconds an idle connection is kept after an answer
    max_connections: int = 2048  # open connections of one server process

    def __post_init__(self) -> None:
        for name in ("max_body", "max_batch", "max_count", "max_pop_topics", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"limits.{name} must be a positive integer, got {value!r}")
        for name, least in _SECONDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"limits.{name} must be a number of seconds, got {value!r}")
            if not least <= value <= 3600:
                raise ConfigError(
                    f"limits.{name} must be from {least:g} to 3600 seconds, got {value!r}"
                )


# the limits in seconds, and their least value (a timeout of 0 would close
# every connection at once)
_SECONDS = {
    "max_wait": 0.0,
    "pop_wait": 0.0,
    "head_timeout": 0.1,
    "body_timeout": 0.1,
    "keep_alive": 0.1,
}


@dataclass(frozen=True)
class ServerSettings:
    limits: Limits = field(default_factory=Limits)
    auth: Auth = field(default_factory=Auth)
    read_only_ui: bool = False  # the dashboard shows, and offers no action
    # without tokens, answer only requests that name this host by a loopback
    # name (off with --insecure, which serves other names on purpose)
    local_only: bool = True

    def with_limits(self, **changes: Any) -> ServerSettings:
        return replace(self, limits=replace(self.limits, **changes))

    def shown_store(self, url: str) -> str:
        """The store's URL as the server shows it to anyone (/healthz, the
        dashboard): whole (without a password) when every request may read
        every topic; with tokens, only its kind (``redis``, ``sqlite``), so
        that its host, path and user stay with those who run the server."""
        return url.partition("://")[0] if self.auth.enabled else url


def _token(entry: object, where: str) -> Token:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table with name, sha256, topics and actions")
    unknown = set(entry) - {"name", "sha256", "topics", "actions"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name must be a non-empty string")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise ConfigError(
            f"{where}.sha256 must be the token's hex SHA-256 digest (64 characters "
            "0-9a-f): make one with `chronoq token`"
        )
    topics = entry.get("topics", ["*"])
    if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
        raise ConfigError(f"{where}.topics must be a list of topic globs such as 'orders.*'")
    actions = entry.get("actions")
    valid = [action.value for action in Action]
    if not isinstance(actions, list) or not actions or not set(actions) <= set(valid):
        raise ConfigError(f"{where}.actions must be a non-empty list of {valid}, got {actions!r}")
    return Token(name, digest, tuple(topics), frozenset(Action(a) for a in actions))


def load_settings(path: str | Path) -> ServerSettings:
    """The settings of a TOML config file; raises ``ConfigError``."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {str(path)!r}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the config file {str(path)!r} is not valid TOML: {exc}") from None
    unknown = set(doc) - {"limits", "tokens", "ui"}
    if unknown:
        raise ConfigError(f"{path}: unknown sections {sorted(unknown)} (limits, tokens, ui)")
    raw_limits = doc.get("limits", {})
    known = {f.name for f in fields(Limits)}
    if not isinstance(raw_limits, dict) or set(raw_limits) - known:
        raise ConfigError(f"{path}: [limits] takes only {sorted(known)}")
    tokens = doc.get("tokens", [])
    if not isinstance(tokens, list):
        raise ConfigError(f"{path}: tokens must be an array of tables ([[tokens]])")
    parsed = [_token(entry, f"tokens[{i}]") for i, entry in enumerate(tokens)]
    names = [token.name for token in parsed]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: two tokens have the same name")
    ui = doc.get("ui", {})
    read_only = ui.get("read_only", False) if isinstance(ui, dict) else None
    if not isinstance(read_only, bool):
        raise ConfigError(f"{path}: ui.read_only must be true or false")
    return ServerSettings(Limits(**raw_limits), Auth(parsed), read_only)
