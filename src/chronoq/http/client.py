"""Client: the methods of ``chronoq.Queue`` over the HTTP API of ``chronoq
serve``, on blocking httpx. The operations themselves are in ops.py."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from chronoq.calls import LeaseRef
from chronoq.http import ops
from chronoq.http.ops import Request, Steps
from chronoq.http.transport import Settings
from chronoq.job import Job, JobInfo, JobLease, PutResult, Reservation
from chronoq.states import State

__all__ = ["Client"]

T = TypeVar("T")


class Client:
    """A delay queue behind a chronoq server, with the methods of ``Queue``
    that the HTTP API has, the same arguments, values and typed errors.

    ``base_url``: the server's root (``http://127.0.0.1:7070``); ``token``:
    a bearer token when the server has a config with tokens. ``timeout``:
    seconds to connect, send, and wait for an answer (a long poll waits its
    ``wait`` more). ``retries``: how many times a read (get, stats, topics,
    dead) or pause/resume is sent again after a 502/503/504 (after its
    Retry-After) or a dropped connection, and any call after a refused
    connection. ``long_poll``: the longest one reserve request waits (at most
    the server's ``limits.max_wait``, 60 s by default); a longer ``wait`` is
    made of several. ``max_batch``: the server's ``limits.max_batch``, the
    size of each request of ``ack_many``. Safe to share between threads."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        long_poll: float = 30.0,
        max_batch: int = 1000,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings(base_url, token, timeout, retries, long_poll, max_batch)
        self._http = httpx.Client(
            base_url=self.settings.url, headers=self.settings.headers(), transport=transport
        )

    @property
    def url(self) -> str:
        """The server's root URL."""
        return self.settings.url

    def __repr__(self) -> str:
        return f"<chronoq.http.Client {self.url}>"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the driver ----------------------------------------------------------------

    def _run(self, steps: Steps[T]) -> T:
        """Run an operation of ops.py: send each request it yields."""
        try:
            request = next(steps)
            while True:
                request = steps.send(self._send(request))
        except StopIteration as done:
            return cast(T, done.value)
        finally:
            steps.close()

    def _send(self, request: Request) -> Any:
        settings = self.settings
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    request.method,
                    request.path,
                    content=request.body,
                    params=request.params,
                    timeout=settings.timeout_of(request),
                )
            except httpx.TransportError as exc:
                pause = settings.pause_after_failure(request, attempt, exc)
                if pause is None:
                    raise settings.failure(request, exc) from None
            else:
                status = response.status_code
                pause = settings.pause_after_answer(request, attempt, status, response.headers)
                if pause is None:
                    return settings.answer(request, status, response.content)
            time.sleep(pause)
            attempt += 1

    # -- producing -----------------------------------------------------------------

    def put(
        self,
        topic: str,
        payload: Any = None,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
        id: str | None = None,
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
        unique_for: float = 0.0,
        replace: bool = False,
    ) -> PutResult:
        """See ``Queue.put``. bytes payloads travel base64-encoded."""
        job = Job(payload, delay, run_at, id, priority, ttr, max_attempts, unique_for)
        return self._run(ops.put(topic, job, replace))

    def put_many(
        self, topic: str, jobs: Iterable[Job], *, replace: bool = False
    ) -> list[PutResult]:
        """See ``Queue.put_many``: one request, all or nothing. A batch over
        the server's ``max_batch`` (1000) raises ``InvalidInput`` naming the
        limit, and nothing is written: split it where a partial put is fine."""
        return self._run(ops.put_many(topic, jobs, replace))

    # -- consuming -------------------------------------------------------------------

    def reserve(
        self, topic: str, count: int = 1, *, wait: float = 0.0, ttr: float | None = None
    ) -> list[Reservation]:
        """See ``Queue.reserve``: a long poll, answered as soon as a job is due."""
        return self._run(ops.reserve(topic, count, wait, ttr, self.settings.long_poll))

    def ack(self, job: LeaseRef, id: str | None = None, lease: str | None = None) -> None:
        """See ``Queue.ack``."""
        self._run(ops.ack(job, id, lease))

    def ack_many(self, jobs: Iterable[Reservation | JobLease]) -> list[str]:
        """See ``Queue.ack_many``: one request per topic (and ``max_batch`` leases)."""
        return self._run(ops.ack_many(jobs, self.settings.max_batch))

    def nack(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        delay: float | None = None,
        error: object = None,
    ) -> State:
        """See ``Queue.nack``; without ``delay``, the server's backoff."""
        return self._run(ops.nack(job, id, lease, delay, error))

    def release(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """See ``Queue.release``."""
        self._run(ops.release(job, id, lease, error))

    def touch(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        ttr: float | None = None,
    ) -> int:
        """See ``Queue.touch``."""
        return self._run(ops.touch(job, id, lease, ttr))

    def bury(
        self,
        job: LeaseRef,
        id: str | None = None,
        lease: str | None = None,
        *,
        error: object = None,
    ) -> None:
        """See ``Queue.bury``."""
        self._run(ops.bury(job, id, lease, error))

    # -- by id -----------------------------------------------------------------------

    def get(self, topic: str, id: str) -> JobInfo | None:
        """See ``Queue.get``."""
        return self._run(ops.get(topic, id))

    def delete(self, topic: str, id: str) -> bool:
        """See ``Queue.delete``."""
        return self._run(ops.delete(topic, id))

    def reschedule(
        self,
        topic: str,
        id: str,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
    ) -> bool:
        """See ``Queue.reschedule``."""
        return self._run(ops.reschedule(topic, id, delay, run_at))

    # -- topic-wide --------------------------------------------------------------------

    def stats(self, topic: str) -> dict[str, Any]:
        """See ``Queue.stats``."""
        return self._run(ops.stats(topic))

    def topics(self) -> list[str]:
        """See ``Queue.topics``; with a token, the topics it may read."""
        return self._run(ops.topics())

    def dead(self, topic: str, limit: int = 100) -> list[JobInfo]:
        """See ``Queue.dead``; the server gives at most 1000 at once."""
        return self._run(ops.dead(topic, limit))

    def requeue(self, topic: str, ids: Sequence[str] | None = None) -> int:
        """See ``Queue.requeue``."""
        return self._run(ops.requeue(topic, ids))

    def purge(self, topic: str) -> int:
        """See ``Queue.purge``."""
        return self._run(ops.purge(topic))

    def pause(self, topic: str) -> None:
        """See ``Queue.pause``."""
        self._run(ops.set_paused(topic, True))

    def resume(self, topic: str) -> None:
        """See ``Queue.resume``."""
        self._run(ops.set_paused(topic, False))
