"""What both clients share about the wire: their settings, each request's
timeout, which failures are tried again and after how long, and how an answer
becomes a value or an error. One copy; the clients only do the I/O."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx

from chronoq.errors import BackendUnavailable, InvalidInput, NotFound
from chronoq.http.errors import decode_answer, error_for, retry_after
from chronoq.http.ops import Request

__all__ = ["Settings"]

_BACKOFF_S = 0.25  # the first pause before trying again without a Retry-After
_MAX_PAUSE_S = 30.0
_GATEWAY = frozenset({502, 503, 504})


def _user_agent() -> str:
    try:
        return f"chronoq-python/{version('chronoq')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "chronoq-python"


def _positive(value: object, name: str, *, integer: bool = False, zero: bool = False) -> None:
    kinds = int if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool)
    if not ok or not (value >= 0 if zero else value > 0):  # type: ignore[operator]
        what = "an integer" if integer else "a number of seconds"
        raise InvalidInput(f"{name} must be {what} {'>= 0' if zero else '> 0'}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Settings:
    """A client's settings, checked. ``base_url``: the server's root."""

    base_url: str
    token: str | None
    timeout: float
    retries: int
    long_poll: float
    max_batch: int

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
            ("http://", "https://")
        ):
            raise InvalidInput(
                f"base_url must be an http:// or https:// URL such as "
                f"'http://127.0.0.1:7070', got {self.base_url!r}"
            )
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise InvalidInput("token must be the bearer token's text, or None")
        _positive(self.timeout, "timeout")
        _positive(self.retries, "retries", integer=True, zero=True)
        _positive(self.long_poll, "long_poll")
        _positive(self.max_batch, "max_batch", integer=True)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")

    def headers(self) -> dict[str, str]:
        headers = {"user-agent": _user_agent(), "content-type": "application/json"}
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        return headers

    def timeout_of(self, request: Request) -> httpx.Timeout:
        # a long poll's answer comes after up to its wait: the read waits that long more
        return httpx.Timeout(self.timeout, read=self.timeout + request.wait)

    def pause_after_answer(
        self, request: Request, attempt: int, status: int, headers: httpx.Headers
    ) -> float | None:
        """Seconds to wait before sending ``request`` again after a ``status``
        answer, or None to give up. Only a repeatable request is sent again: a
        503 to a put or a reserve may come after the store did the work."""
        if attempt >= self.retries or status not in _GATEWAY or not request.repeatable:
            return None
        asked = retry_after(headers)
        return min(asked, _MAX_PAUSE_S) if asked is not None else _BACKOFF_S * 2.0**attempt

    def pause_after_failure(
        self, request: Request, attempt: int, exc: httpx.TransportError
    ) -> float | None:
        """Seconds to wait before sending again after a failed exchange, or None.
        A refused connection means nothing was sent: any request may go again.
        After that (a dropped connection, a timeout) a reserve may have leased
        jobs whose answer is lost, and a put without an id may have made a job
        that a second put would make twice: only repeatable requests go again,
        and never after a timeout, whose time is already spent."""
        if attempt >= self.retries or isinstance(exc, httpx.TimeoutException):
            return None
        if isinstance(exc, httpx.ConnectError) or request.repeatable:
            return _BACKOFF_S * 2.0**attempt
        return None

    def failure(self, request: Request, exc: httpx.TransportError) -> BackendUnavailable:
        """The error for an exchange that got no answer."""
        where = f"{request.method} {request.path}"
        if isinstance(exc, httpx.ConnectError):
            return BackendUnavailable(
                f"cannot connect to the chronoq server at {self.url} ({exc}): "
                "is `chronoq serve` running there, and is base_url right?"
            )
        maybe = "" if request.repeatable else "; it may have been done: check before repeating it"
        if isinstance(exc, httpx.TimeoutException):
            limit = self.timeout + request.wait
            return BackendUnavailable(
                f"no answer from {self.url} to {where} within {limit:g} s "
                f"(timeout={self.timeout:g}){maybe}"
            )
        return BackendUnavailable(f"the exchange with {self.url} failed on {where}: {exc!r}{maybe}")

    def answer(self, request: Request, status: int, content: bytes) -> Any:
        """The JSON of a successful answer (None for a missing job where that
        is an answer); raises chronoq's error for any other."""
        if 200 <= status < 300:
            return decode_answer(self.url, request.method, request.path, status, content)
        error = error_for(self.url, request.method, request.path, status, content, request.lease)
        if request.missing_ok and isinstance(error, NotFound):
            return None
        raise error
