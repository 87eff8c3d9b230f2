"""Bearer tokens: who may do what to which topics. A token is kept only as
its SHA-256 digest (the config file never holds a usable secret) and is
compared in constant time; each token names topic globs and actions.

The topics named ``chronoq.*`` are the server's own (the compatibility
protocols' id index): no request writes them, and only a token whose glob
names them explicitly (``chronoq.*``, ``chronoq.byid``; not ``*`` or ``c*``)
reads them. Without tokens nobody does: they are not part of the API."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from chronoq.server.web.problems import ApiError

__all__ = [
    "INTERNAL_PREFIX",
    "Action",
    "Auth",
    "Token",
    "allowed",
    "hash_token",
    "internal_topic",
    "is_internal",
    "new_token",
]

INTERNAL_PREFIX = "chronoq."  # topics the server keeps for itself (chronoq.byid)
_WILDCARD = re.compile(r"[*?\[]")


class Action(StrEnum):
    """What a token allows. ``reserve`` covers the lease calls (ack, nack,
    touch, bury, release); ``put`` covers a producer's own cancel and
    reschedule by id; ``admin`` covers requeue, purge, pause and resume."""

    PUT = "put"
    RESERVE = "reserve"
    READ = "read"
    ADMIN = "admin"


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is one of the server's own (``chronoq.*``)."""
    return topic.startswith(INTERNAL_PREFIX)


def _names_internal(glob: str) -> bool:
    """Whether ``glob`` names the server's own topics on purpose: its fixed
    start, before any wildcard, is ``chronoq.`` (so ``*`` and ``c*`` do not)."""
    return _WILDCARD.split(glob, 1)[0].startswith(INTERNAL_PREFIX)


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
        """``topic`` None: an action that names no topic, allowed by any glob.
        A server's own topic only by a glob that names it (and never written:
        see ``allowed``)."""
        if action not in self.actions:
            return False
        if topic is None:
            return True
        globs = self.topics
        if is_internal(topic):
            globs = tuple(glob for glob in globs if _names_internal(glob))
        return any(fnmatchcase(topic, glob) for glob in globs)


def allowed(token: Token | None, action: Action, topic: str | None) -> bool:
    """Whether a request with ``token`` (None: the server has no tokens) may
    ``action`` on ``topic``: anything without tokens, what the token allows
    with them; the server's own topics are read only by a token that names
    them, and written by nobody."""
    if topic is not None and is_internal(topic):
        return action is Action.READ and token is not None and token.allows(action, topic)
    return token is None or token.allows(action, topic)


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
        """Raises a 403 ApiError unless ``token`` (None: no tokens) allows
        ``action`` on ``topic`` (``allowed``)."""
        if allowed(token, action, topic):
            return
        if topic is not None and is_internal(topic):
            raise internal_topic(topic)
        assert token is not None  # without tokens only an internal topic is refused
        where = f"topic {topic!r}" if topic is not None else "this server"
        raise ApiError(403, "forbidden", f"token {token.name!r} may not {action.value} on {where}")


def internal_topic(topic: str) -> ApiError:
    """The refusal of a request on one of the server's own topics."""
    return ApiError(
        403, "internal_topic", f"topic {topic!r} is the server's own ({INTERNAL_PREFIX}*: the "
        "compatibility protocols' id index): no request writes it, and only a token whose "
        f"topics name {INTERNAL_PREFIX}* explicitly reads it",
    )  # fmt: skip
