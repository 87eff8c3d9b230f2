"""Worker: reserves due jobs of its topics and runs their handlers.

Per topic, one fetcher reserves due jobs (never one not yet due) for the free
slots and up to ``prefetch`` more, held in order until a slot frees: by
default as many as the slots run in about 50 ms, so short jobs do not wait a
round trip each, and long ones are not held from other workers. Plain
functions run in ``concurrency`` threads (a thread that ends a job starts the
next held one itself), ``async def`` handlers on the event loop. A handler that
returns acks (in batches, see acks.py); one that raises nacks with the topic's
backoff, or buries on ``Bury``. A held job's lease is renewed every
ttr / 3, and a job whose lease ran out while it was held (the process was
frozen, the loop stalled) is never started: it is given back (slots.py).
While the store is down, every part retries with capped pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import signal
import threading
from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Any

from chronoq.aio.queue import AsyncQueue
from chronoq.backoff import Backoff
from chronoq.calls.checks import MAX_COUNT, optional_ttr_ms
from chronoq.errors import InvalidInput
from chronoq.job import validate_topic
from chronoq.queue import Queue
from chronoq.worker.session import Session
from chronoq.worker.settings import Counts, Handler, Settings
from chronoq.worker.traced import traced_handlers

__all__ = ["Worker"]

log = logging.getLogger("chronoq")


class Worker:
    """Runs ``handlers`` (topic → callable taking a ``Reservation``) on the jobs
    of ``queue`` (a ``Queue`` or an ``AsyncQueue``).

    ``concurrency``: handlers running at once. ``grace``: seconds that running
    handlers get to finish at shutdown before their jobs are released.
    ``backoff``: one ``Backoff``, or one per topic (default: the queue's).
    ``batch``: the most jobs one reserve call takes. ``prefetch``: due jobs
    held beyond the running ones (``None``: what the slots run in about 50 ms
    at the recent run time, at most ``batch``; 0: none). ``ttr``: a lease length
    for every job, instead of each job's own. ``recurring``: put the topics'
    recurring occurrences when they fall due. ``inline``: a plain-function
    handler whose runs prove quick (under 0.2 ms) runs on the worker's event
    loop instead of its threads (inline.py); False keeps them all in threads.
    """

    def __init__(
        self,
        queue: Queue | AsyncQueue,
        handlers: Mapping[str, Handler],
        *,
        concurrency: int = 10,
        grace: float = 30.0,
        backoff: Backoff | Mapping[str, Backoff] | None = None,
        batch: int = 100,
        prefetch: int | None = None,
        ttr: float | None = None,
        recurring: bool = True,
        inline: bool = True,
    ) -> None:
        if not isinstance(queue, Queue | AsyncQueue):
            raise InvalidInput(
                f"queue must be a chronoq.Queue or an AsyncQueue (chronoq.connect or "
                f"chronoq.aio.connect), got {queue!r}"
            )
        _check_handlers(handlers)
        _check_options(concurrency, batch, grace, backoff, handlers)
        if prefetch is not None and (
            isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0
        ):
            raise InvalidInput(f"prefetch must be an integer >= 0, got {prefetch!r}")
        optional_ttr_ms(ttr)  # checked now, not at the first reserve
        self.queue = queue
        self.handlers = dict(handlers)
        self.concurrency = concurrency
        self.grace = float(grace)
        self.batch = batch
        self.prefetch = prefetch
        self.ttr = ttr
        self.recurring = recurring
        self.inline = bool(inline)
        self._backoff = backoff
        self.counts = Counts()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = threading.Event()  # set from any thread, before the loop too
        self._serving = threading.Lock()  # one run at a time: stop() reaches only one
        self._task: asyncio.Task[None] | None = None
        self._session: Session | None = None

    @property
    def settings(self) -> Settings:
        """What a run reads, frozen when it starts (a run never reads the Worker)."""
        handlers = dict(self.handlers)
        is_async = {t: _is_coroutine_function(h) for t, h in handlers.items()}
        return Settings(
            queue=self.queue,
            handlers=MappingProxyType(traced_handlers(handlers, is_async)),
            is_async=MappingProxyType(is_async),
            backoffs=MappingProxyType(topic_backoffs(self._backoff, handlers)),
            concurrency=self.concurrency,
            grace=self.grace,
            batch=self.batch,
            prefetch=self.prefetch,
            ttr=self.ttr,
            recurring=self.recurring,
            inline=self.inline,
        )

    # -- running and stopping --------------------------------------------------------

    def run(self) -> None:
        """Work until SIGTERM or SIGINT (or ``stop()``): then stop reserving, let
        running handlers finish within ``grace`` and release the rest. A second
        signal skips the grace."""
        asyncio.run(self.serve(signals=threading.current_thread() is threading.main_thread()))

    async def serve(self, *, signals: bool = False) -> None:
        """Work until ``stop()`` (or, with ``signals``, SIGTERM / SIGINT).
        One run at a time (``RuntimeError`` otherwise). An unexpected error in
        the worker's own tasks (a bug, not the store being down) stops it like
        ``stop()`` and is raised here."""
        if not self._serving.acquire(blocking=False):
            raise RuntimeError("this worker is already running: stop it first, or make another")
        try:
            await self._serve(signals)
        finally:
            # a stop() asked before or during this run was for this run only
            self._stop_requested.clear()
            self._serving.release()

    async def _serve(self, signals: bool) -> None:
        loop = asyncio.get_running_loop()
        session = Session(self.settings, self.counts, loop)
        self._loop, self._session = loop, session
        if self._stop_requested.is_set():  # stop() came before the loop was known
            session.request_stop()
        installed: list[signal.Signals] = []
        if signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, session.on_signal, signum)
                installed.append(signum)
        try:
            await session.run()
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
            self._loop = self._session = None

    def stop(self, *, now: bool = False) -> None:
        """Ask the worker to stop (from any thread); ``now`` skips the grace.
        Before ``run()``, the next run stops at once."""
        self._stop_requested.set()
        loop, session = self._loop, self._session
        if loop is not None and session is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(session.request_stop, now)

    async def __aenter__(self) -> Worker:
        self._task = asyncio.get_running_loop().create_task(self.serve(), name="chronoq-worker")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._task is not None:
            await self._task


def topic_backoffs(backoff: object, topics: Mapping[str, Any]) -> dict[str, Backoff]:
    """Each topic's own backoff, from one ``Backoff`` for every topic or a
    mapping of topic to ``Backoff`` (a topic left out nacks with the
    queue's), checked against the ``topics`` handled."""
    if backoff is None:
        return {}
    if isinstance(backoff, Backoff):
        return dict.fromkeys(topics, backoff)
    if not isinstance(backoff, Mapping):
        raise InvalidInput(
            f"backoff must be a Backoff or a mapping of topic to Backoff, got {backoff!r}"
        )
    for topic, value in backoff.items():
        if topic not in topics:
            raise InvalidInput(f"backoff names topic {topic!r}, which has no handler")
        if not isinstance(value, Backoff):
            raise InvalidInput(f"the backoff of topic {topic!r} is not a Backoff: {value!r}")
    return dict(backoff)


def _check_handlers(handlers: object) -> None:
    if not isinstance(handlers, Mapping) or not handlers:
        raise InvalidInput("handlers must be a non-empty mapping of topic to callable")
    for topic, handler in handlers.items():
        validate_topic(topic)
        if not callable(handler):
            raise InvalidInput(f"the handler of topic {topic!r} is not callable: {handler!r}")


def _check_options(
    concurrency: object, batch: object, grace: object, backoff: object, topics: Mapping[str, Any]
) -> None:
    for name, value, most in (("concurrency", concurrency, None), ("batch", batch, MAX_COUNT)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{name} must be an integer >= 1, got {value!r}")
        if most is not None and value > most:
            raise InvalidInput(f"{name} must be at most {most}, got {value!r}")
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
        raise InvalidInput(f"grace must be seconds >= 0, got {grace!r}")
    topic_backoffs(backoff, topics)


def _is_coroutine_function(handler: Handler) -> bool:
    # inspect sees through a partial of a function, but not through a partial
    # of an object whose __call__ is async
    while isinstance(handler, functools.partial):
        handler = handler.func
    call = getattr(handler, "__call__", None)  # noqa: B004 - a callable object's method
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)
