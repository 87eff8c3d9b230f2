"""The errors chronoq raises: one base class, one subclass per kind of failure."""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "ChronoqError",
    "DurabilityError",
    "InvalidInput",
    "InvalidJob",
    "LeaseLost",
    "NotFound",
    "PayloadTooLarge",
]


class ChronoqError(Exception):
    """Base class of every error chronoq raises on purpose."""


class InvalidInput(ChronoqError, ValueError):
    """An argument was out of range or of the wrong type; nothing was written."""


class InvalidJob(InvalidInput):
    """A job to put was invalid; nothing was written.

    ``index`` is the position of the offending job in a ``put_many`` batch
    (``None`` for a single put).
    """

    def __init__(self, message: str, index: int | None = None) -> None:
        if index is not None:
            message = f"job #{index} of the batch: {message}"
        super().__init__(message)
        self.index = index


class PayloadTooLarge(InvalidJob):
    """A job's payload, or the request that carried it, was over a size
    limit; nothing was written. ``size`` is the size in bytes and ``limit``
    the limit passed: the payload's encoded size and the store's
    ``max_payload``; from ``chronoq.http``'s clients also the request body's
    size and the server's ``limits.max_body``, when the message says so.
    From a client either may be ``None``: the server refused a body sent in
    chunks before it knew its size, or a proxy answered 413 and said neither.
    ``index`` as for ``InvalidJob``."""

    def __init__(
        self, message: str, size: int | None, limit: int | None, index: int | None = None
    ) -> None:
        super().__init__(message, index)
        self.size = size
        self.limit = limit

    def __reduce__(self) -> tuple[object, ...]:
        # pickled whole (the message already names any index), for a
        # process that sends it on to another
        return type(self), (str(self), self.size, self.limit), self.__dict__


class LeaseLost(ChronoqError):
    """The lease token is no longer valid: the lease expired, another consumer
    holds the job now, or the job is gone. Nothing was changed."""

    def __init__(self, topic: str, job_id: str) -> None:
        super().__init__(
            f"lease lost for job {job_id!r} on topic {topic!r}: it expired, was "
            "reserved again, or the job is gone; nothing was changed"
        )
        self.topic = topic
        self.job_id = job_id


class NotFound(ChronoqError, LookupError):
    """The named thing (a job, a recurring schedule) does not exist."""


class BackendUnavailable(ChronoqError, ConnectionError):
    """The store cannot be reached, opened or written."""


class DurabilityError(ChronoqError):
    """A write was applied but fewer replicas than requested confirmed it."""
