"""Any synchronous backend, off the event loop: each call runs in a thread of
a small pool, and each wait in a thread of its own pool, so that consumers
waiting for jobs never hold up a put or an ack."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from chronoq.backends.base import AsyncBackend, AsyncWatcher, Backend, ReserveResult, Watcher
from chronoq.backends.forwarding import fill_contract

__all__ = ["ThreadedBackend", "asyncio_backend"]

T = TypeVar("T")
CALL_THREADS = 8
WAIT_THREADS = 64


def asyncio_backend(backend: Backend, *, owned: bool) -> AsyncBackend:
    """``backend``'s store for asyncio: its native driver if it has one, else
    its calls in threads. ``owned``: closing the result closes ``backend``."""
    native = backend.asyncio_backend(owned=owned)
    if native is not None:
        return native
    return ThreadedBackend(backend, owned=owned)  # type: ignore[abstract]  # see fill_contract


class ThreadedWatcher(AsyncWatcher):
    def __init__(self, owner: ThreadedBackend, inner: Watcher) -> None:
        self._owner = owner
        self.inner = inner

    async def wait(self, timeout: float) -> bool:
        try:
            return await self._owner._in_thread(self._owner._waits, self.inner.wait, timeout)
        except asyncio.CancelledError:
            self.inner.interrupt()  # frees the thread now, not at the timeout
            raise

    async def close(self) -> None:
        await self._owner._call(self.inner.close)


class ThreadedBackend(AsyncBackend):
    """``backend``'s methods as coroutines. ``owned``: closing this closes it.
    Every method not written here runs its namesake of ``backend`` in a
    thread of the call pool (``fill_contract`` below)."""

    def __init__(self, backend: Backend, *, owned: bool = True) -> None:
        self.backend = backend
        self.url = backend.url
        self.shards = backend.shards
        self._owned = owned
        self._calls = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="chronoq-call")
        self._waits = ThreadPoolExecutor(WAIT_THREADS, thread_name_prefix="chronoq-wait")

    async def _in_thread(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(fn, *args))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._in_thread(self._calls, fn, *args)

    async def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: AsyncWatcher | None = None
    ) -> ReserveResult:
        inner = waiter.inner if isinstance(waiter, ThreadedWatcher) else None
        return await self._call(self.backend.reserve, topic, count, ttr_ms, inner)

    async def watch(self, topic: str) -> AsyncWatcher:
        return ThreadedWatcher(self, await self._call(self.backend.watch, topic))

    async def close(self) -> None:
        if self._owned:
            await self._call(self.backend.close)
        self._calls.shutdown(wait=False)
        self._waits.shutdown(wait=False)


def _in_a_thread(name: str) -> Callable[..., Any]:
    async def method(self: ThreadedBackend, *args: Any, **kwargs: Any) -> Any:
        return await self._call(functools.partial(getattr(self.backend, name), *args, **kwargs))

    return method


fill_contract(ThreadedBackend, _in_a_thread)
