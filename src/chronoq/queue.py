"""Queue: the synchronous facade over a Backend. Its operations are defined
once in ``chronoq.calls``; this module performs them with blocking calls,
and holds what is its own: opening, closing, and the watcher of a consumer
with its own wait loop."""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Any, TypeVar, cast

from chronoq.backends import StoreURL, open_backend
from chronoq.backends.base import Backend, ReserveResult, Watcher
from chronoq.backoff import Backoff
from chronoq.calls.call import (
    Blocking,
    Call,
    Close,
    GiveBack,
    Step,
    Use,
    Wait,
    run_steps,
)
from chronoq.calls.consuming import ReserveOnce
from chronoq.calls.on_store import OnStore
from chronoq.errors import ChronoqError
from chronoq.job import DEFAULT_MAX_PAYLOAD, JobLease, validate_topic

__all__ = ["Queue", "connect"]

T = TypeVar("T")
GIVEN_BACK = "the reserve was interrupted"


def connect(url: str | None = None, *, backoff: Backoff | None = None) -> Queue:
    """Open a queue on the store at ``url``.

    ``None`` means ``$CHRONOQ_STORE``, else ``sqlite:///chronoq.db`` (a file in
    the working directory). Schemes: ``sqlite:///relative.db``,
    ``sqlite:////absolute.db``, ``sqlite://:memory:``; a bare path is a SQLite
    file. ``?max_payload=BYTES`` changes the payload limit (1 MiB).
    """
    parsed = StoreURL.parse(url)
    max_payload = parsed.pop_int("max_payload", DEFAULT_MAX_PAYLOAD, minimum=1)
    return Queue(open_backend(parsed), max_payload=max_payload, backoff=backoff)


class Queue(Blocking, OnStore[Backend]):
    """A delay queue on one store. Safe to share between threads."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__(backend, max_payload=max_payload, backoff=backoff)

    def __repr__(self) -> str:
        return f"<chronoq.Queue {self.url}>"

    def close(self) -> None:
        """Close the store (its connections, its watchers)."""
        self.backend.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def watch(self, topic: str) -> Watcher:
        """A watcher of the topic, for a consumer with its own wait loop: take
        it before ``reserve_once``; its ``wait(timeout)`` returns when a job
        may have become available since. ``close`` it when done."""
        return self.backend.watch(validate_topic(topic))

    def reserve_once(
        self,
        topic: str,
        count: int = 1,
        *,
        ttr: float | None = None,
        watcher: Watcher | None = None,
    ) -> ReserveResult:
        return self._perform(ReserveOnce(topic, count, ttr=ttr, watcher=watcher))

    reserve_once.__doc__ = ReserveOnce.__doc__

    # -- performing calls: each step a blocking call -----------------------------

    def _perform(self, call: Call[T]) -> T:
        steps = call.store(self)
        if isinstance(steps, Use):  # one backend call (or a Lease): no steps to run
            answer = getattr(self.backend, steps.name)(*steps.args)
            return cast(T, answer if steps.then is None else steps.then(answer))
        return run_steps(steps, self._step)

    def _step(self, step: Step) -> Any:
        # the watchers in steps are this facade's own (from watch): Watcher
        backend = self.backend
        if isinstance(step, Use):  # a Lease too: a blocking reserve needs no care
            answer = getattr(backend, step.name)(*step.args)
            return answer if step.then is None else step.then(answer)
        if type(step) is Wait:
            wake_in_ms = step.result.wake_in_ms
            limit = step.limit if wake_in_ms is None else min(step.limit, wake_in_ms / 1000)
            return cast(Watcher, step.watcher).wait(limit)
        if type(step) is Close:
            return cast(Watcher, step.watcher).close()
        if type(step) is GiveBack:
            for job in step.jobs:
                with contextlib.suppress(ChronoqError):
                    backend.release(JobLease(job.topic, job.id, job.lease), GIVEN_BACK)
            return None
        raise TypeError(f"not a step of a store: {step!r}")
