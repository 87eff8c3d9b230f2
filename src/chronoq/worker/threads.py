"""The threads that run plain-function handlers.

A ``ThreadPoolExecutor`` future per job costs a lock, a condition and a
call_soon_threadsafe each; at tens of thousands of jobs a second that is most
of the work. Here ``concurrency`` long-lived daemon threads take jobs from one
queue, and report back through a deque that the event loop drains in one call
per burst. Daemon threads: a handler stuck forever cannot keep the process
alive after a forced exit."""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["HandlerThreads"]

Done = Callable[[Any, BaseException | None, bool], None]  # (token, error, chained) on the loop
Item = tuple[Callable[[Any], Any], Any, Any]  # (fn, arg, token)
Chain = Callable[[Any], Item | None]  # in the thread, after a job: the next one to run, if any
Refusal = Callable[[Any], BaseException | None]  # in the thread, just before a job: why not run it


class HandlerThreads:
    def __init__(
        self,
        count: int,
        loop: asyncio.AbstractEventLoop,
        done: Done,
        chain: Chain,
        refusal: Refusal,
        observe: Callable[[Any, float], None] | None = None,
    ) -> None:
        self._loop = loop
        self._observe = observe  # (arg, seconds): how long each call of a handler took
        self._done = done
        self._chain = chain
        self._refusal = refusal
        self._work: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._results: deque[tuple[Any, BaseException | None, bool]] = deque()
        self._drain_pending = False
        self._count = count
        self._closed = False
        self._threads: list[threading.Thread] = []  # started by the first job: a
        # worker of async handlers only needs none

    def submit(self, fn: Callable[[Any], Any], arg: Any, token: Any) -> None:
        """Run ``fn(arg)`` in a thread; ``done(token, error, chained)`` runs on the
        loop after (``chained``: the thread went on to the job ``chain`` gave it).
        When ``refusal(token)``, asked just before, gives a reason, ``fn`` is not
        called and the reason is the ``error``."""
        if not self._threads:
            self._threads = [
                threading.Thread(target=self._serve, name=f"chronoq-handler-{n}", daemon=True)
                for n in range(self._count)
            ]
            for thread in self._threads:
                thread.start()
        self._work.put((fn, arg, token))

    def _serve(self) -> None:
        item = self._work.get()
        while item is not None and not self._closed:
            following = self._run(*item)
            item = following if following is not None else self._work.get()

    def _run(self, fn: Callable[[Any], Any], arg: Any, token: Any) -> Item | None:
        """Run one job, report it, and return the next job to run here if the
        worker has one waiting: a thread goes from job to job without a trip
        through the event loop, which cost two thread wake-ups per job, most of
        a tiny job's cost at concurrency 4."""
        # asked here, not when the job was queued: this thread may have been
        # frozen (or busy with the job before) since
        error = self._refusal(token)
        if error is None:
            started = time.perf_counter()
            try:
                result = fn(arg)
                if inspect.isawaitable(result):
                    # a plain function that returned a coroutine (a lambda
                    # around an async function): its author meant it awaited
                    asyncio.run_coroutine_threadsafe(_awaited(result), self._loop).result()
            except BaseException as exc:  # reported to the worker, which decides
                error = exc
            if self._observe is not None:
                self._observe(arg, time.perf_counter() - started)
        following = self._chain(token)
        self._results.append((token, error, following is not None))
        # the loop clears the flag before it drains, so a result appended
        # while it drains is either seen by that drain or schedules another
        if not self._drain_pending:
            self._drain_pending = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: the process is exiting
                self._closed = True
                return None
        return following

    def _drain(self) -> None:
        self._drain_pending = False
        results = self._results
        while results:
            self._done(*results.popleft())

    def close(self) -> None:
        """Let the threads end once their current job is done (not waited for)."""
        for _ in self._threads:
            self._work.put(None)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
