"""What a worker run needs of its ``Worker``, as a frozen value (the session
reads it, and never the Worker itself), and the counts it keeps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chronoq.aio.queue import AsyncQueue
from chronoq.backoff import Backoff
from chronoq.job import Reservation
from chronoq.queue import Queue

__all__ = ["Counts", "Handler", "Settings"]

Handler = Callable[[Reservation], Any]


@dataclass(frozen=True, slots=True)
class Settings:
    """A worker's settings, checked (see ``Worker``)."""

    queue: Queue | AsyncQueue
    handlers: Mapping[str, Handler]
    #: topic -> its handler is an ``async def`` (runs on the event loop)
    is_async: Mapping[str, bool]
    #: topic -> its backoff; a topic not here nacks with the queue's
    backoffs: Mapping[str, Backoff]
    concurrency: int
    grace: float
    batch: int
    prefetch: int | None
    ttr: float | None
    recurring: bool
    #: quick plain-function handlers may run on the event loop (inline.py)
    inline: bool = True


@dataclass(slots=True)
class Counts:
    """What the worker did with the jobs it held."""

    acked: int = 0
    retried: int = 0
    buried: int = 0
    released: int = 0
    lost: int = 0
    #: held jobs not started because their lease ran out first (given back)
    skipped: int = 0
