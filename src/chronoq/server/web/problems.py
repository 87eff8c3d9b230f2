"""The errors of the HTTP API: one JSON shape, ``{"error": {"code", "message"}}``,
and the status that goes with each of chronoq's typed errors."""

from __future__ import annotations

import re
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

__all__ = ["RETRY_AFTER_S", "ApiError", "from_chronoq", "invalid_body", "too_large"]

RETRY_AFTER_S = 1  # what a 503 asks the client to wait before it tries again


class ApiError(Exception):
    """A refusal sent to the client as ``status`` with ``{"error": {...}}``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}

    def headers(self) -> list[tuple[bytes, bytes]]:
        if self.status == 503:
            return [(b"retry-after", str(RETRY_AFTER_S).encode())]
        if self.status == 401:
            return [(b"www-authenticate", b'Bearer realm="chronoq"')]
        return []


def too_large(
    message: str, size: int | None, limit: int | None, index: int | None = None
) -> ApiError:
    """413 ``too_large`` with the sizes in bytes (those known) and the index
    of a batch's job: the one answer to a payload over the store's
    ``max_payload`` and to a body over the server's ``limits.max_body``."""
    extra = {"size": size, "limit": limit, "index": index}
    known = {name: value for name, value in extra.items() if value is not None}
    return ApiError(413, "too_large", message, **known)


def from_chronoq(exc: ChronoqError) -> ApiError:
    """The HTTP answer to an error raised by the queue."""
    if isinstance(exc, PayloadTooLarge):
        return too_large(str(exc), exc.size, exc.limit, exc.index)
    if isinstance(exc, InvalidJob):
        extra = {} if exc.index is None else {"index": exc.index}
        return ApiError(400, "invalid_job", str(exc), **extra)
    if isinstance(exc, InvalidInput):
        return ApiError(400, "invalid_input", str(exc))
    if isinstance(exc, LeaseLost):
        return ApiError(409, "lease_lost", str(exc))
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", str(exc))
    if isinstance(exc, DurabilityError):
        return ApiError(503, "not_replicated", f"{exc}; the write was applied: retry is safe")
    if isinstance(exc, BackendUnavailable):
        return ApiError(503, "store_unavailable", f"the store is unavailable: {exc}")
    return ApiError(500, "internal", f"{type(exc).__name__}: {exc}")


_BATCH_ITEM = re.compile(r"at `\$\.(?:jobs|leases)\[(\d+)\]")


def invalid_body(message: str) -> ApiError:
    """The answer to a body that does not fit its type; a batch's bad job is
    named by its index, as the queue names it."""
    found = _BATCH_ITEM.search(message)
    if found is not None:
        index = int(found.group(1))
        return ApiError(400, "invalid_job", f"job #{index} of the batch: {message}", index=index)
    return ApiError(400, "invalid_input", f"bad request body: {message}")
