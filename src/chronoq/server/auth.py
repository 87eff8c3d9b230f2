"""Bearer tokens: who may do what to which topics. A token is kept only as
its SHA-256 digest (the config file never holds a usable secret) and is
compared in constant time; each token names topic globs and actions."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from chronoq.server.problems import ApiError

__all__ = ["Action", "Auth", "Token", "hash_token", "new_token"]


class Action(StrEnum):
    """What a token allows. ``reserve`` covers the lease calls (ack, nack,
    touch, bury, release); ``put`` covers a producer's own cancel and
    reschedule by id; ``admin`` covers requeue, purge, pause and resume."""

    PUT = "put"
    RESERVE = "reserve"
    READ = "read"
    ADMIN = "admin"


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return "cq_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The hex SHA-256 digest that the config file stores for ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Token:
    name: str
    sha256: str
    topics: tuple[str, ...]
    actions: frozenset[Action]

    def allows(self, action: Action, topic: str | None) -> bool:
        """``topic`` None: an action that names no topic, allowed by any glob."""
        if action not in self.actions:
            return False
        return topic is None or any(fnmatchcase(topic, glob) for glob in self.topics)


class Auth:
    """The tokens of one server; none means auth is off."""

    def __init__(self, tokens: Iterable[Token] = ()) -> None:
        self.tokens = tuple(tokens)
        self._digests = [(bytes.fromhex(token.sha256), token) for token in self.tokens]

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)

    def identify(self, authorization: bytes | None) -> Token | None:
        """The token an ``Authorization`` header carries (None when auth is
        off); raises a 401 ApiError without a known one."""
        if not self.tokens:
            return None
        scheme, _, value = (authorization or b"").partition(b" ")
        if scheme.lower() != b"bearer" or not value.strip():
            raise ApiError(
                401, "unauthorized", "send a token: an Authorization: Bearer <token> header"
            )
        digest = hashlib.sha256(value.strip()).digest()
        found = None
        for known, token in self._digests:  # all of them: the time says nothing
            if hmac.compare_digest(known, digest):
                found = token
        if found is None:
            raise ApiError(401, "unauthorized", "unknown token: check the Authorization header")
        return found

    def check(self, token: Token | None, action: Action, topic: str | None) -> None:
        """Raises a 403 ApiError unless ``token`` allows ``action`` on ``topic``."""
        if token is None or token.allows(action, topic):
            return
        where = f"topic {topic!r}" if topic is not None else "this server"
        raise ApiError(403, "forbidden", f"token {token.name!r} may not {action.value} on {where}")
