"""How an HTTP answer that is not a success becomes chronoq's typed error, and
the two errors only a client over HTTP can meet. One copy, for both clients.

The mapping follows the server's ``problems.py`` back: 400 is ``InvalidInput``
(``InvalidJob`` with its ``index`` for ``invalid_job``), 413 ``PayloadTooLarge``
(with its sizes and index), 404 ``not_found`` ``NotFound``, 409 ``LeaseLost``,
503 ``BackendUnavailable`` (``DurabilityError`` for ``not_replicated``), 401
and 403 ``AuthError``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chronoq.errors import (
    BackendUnavailable,
    ChronoqError,
    DurabilityError,
    InvalidInput,
    InvalidJob,
    LeaseLost,
    NotFound,
    PayloadTooLarge,
)
from chronoq.job import JobLease

__all__ = ["AuthError", "HTTPError", "error_for"]


class AuthError(ChronoqError, PermissionError):
    """The server refused the token: ``status`` 401 (none sent, or unknown)
    or 403 (the token may not do this action on this topic). Nothing was done."""

    def __init__(self, message: str, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class HTTPError(ChronoqError):
    """An answer no other error describes: a ``base_url`` that is not a
    chronoq server's root, a proxy's error page, a server bug (500).
    ``status`` and ``code`` (the server's error code, or "") say which."""

    def __init__(self, message: str, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _problem(content: bytes) -> tuple[str, str, dict[str, Any]]:
    """The code, message and whole detail of a ``{"error": {...}}`` body; a
    body of another shape (a proxy's page) gives code "", its first
    characters and no detail."""
    try:
        detail = json.loads(content)["error"]
        code, message = detail["code"], detail["message"]
        if isinstance(code, str) and isinstance(message, str):
            return code, message, detail
    except (ValueError, TypeError, KeyError):
        pass
    text = content[:200].decode("utf-8", "replace").strip()
    return "", text or "(an empty body)", {}


def _number(detail: dict[str, Any], name: str) -> int | None:
    value = detail.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _invalid_job(message: str, detail: dict[str, Any]) -> InvalidJob:
    error = InvalidJob(message)  # the server's message names the index already
    error.index = _number(detail, "index")
    return error


def _too_large(message: str, detail: dict[str, Any]) -> PayloadTooLarge:
    """A 413: the server's ``too_large``, with its sizes, or a proxy's
    refusal of the body, without them."""
    size, limit = _number(detail, "size"), _number(detail, "limit")
    error = PayloadTooLarge(message, size, limit)  # the message names the index already
    error.index = _number(detail, "index")
    return error


def error_for(
    base_url: str,
    method: str,
    path: str,
    status: int,
    content: bytes,
    lease: JobLease | None = None,
) -> ChronoqError:
    """The error to raise for an answer with ``status`` >= 300 to ``method
    path``; ``lease``: the lease a lease call named (its 409 is LeaseLost)."""
    code, message, detail = _problem(content)
    if status == 413:
        if code != "too_large":  # not the server's words: a proxy in front of it
            message = (
                f"{base_url} answered 413 (too large) to {method} {path}: {message}: "
                "a proxy's body size limit, probably: send less at once, or raise that limit"
            )
        return _too_large(message, detail)
    if status == 400:
        return _invalid_job(message, detail) if code == "invalid_job" else InvalidInput(message)
    if status in (401, 403):
        return AuthError(f"{base_url}: {message}", status, code)
    if status == 404 and code == "not_found":
        return NotFound(message)
    if status == 409 and lease is not None:
        return LeaseLost(lease.topic, lease.id)
    if status == 503 and code == "not_replicated":
        return DurabilityError(message)
    if status in (502, 503, 504):
        return BackendUnavailable(f"{base_url} answered {status} to {method} {path}: {message}")
    hint = ""
    if status == 404:
        hint = ": is base_url the root of a chronoq server (without /v1)?"
    return HTTPError(
        f"{base_url} answered {status} to {method} {path}: {message}{hint}", status, code
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The seconds of a ``Retry-After`` header (the HTTP-date form is not used
    by chronoq's server, and is ignored)."""
    value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 3600 else None


def decode_answer(base_url: str, method: str, path: str, status: int, content: bytes) -> Any:
    """The JSON value of a successful answer."""
    try:
        return json.loads(content)
    except ValueError:
        raise HTTPError(
            f"{base_url} answered {method} {path} with something that is not JSON: "
            f"{content[:100]!r}: is base_url a chronoq server?",
            status,
            "",
        ) from None
