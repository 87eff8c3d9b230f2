"""An AsyncQueue behind the interface of a Queue: its own event loop runs in
a thread and each call waits for its coroutine. With it, the conformance
suite runs unchanged through chronoq.aio."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from chronoq.aio import AsyncQueue


class BridgedQueue:
    def __init__(self, make: Callable[[], AsyncQueue]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.aio: AsyncQueue = self._run(self._make(make))

    @staticmethod
    async def _make(make: Callable[[], AsyncQueue]) -> AsyncQueue:
        return make()  # on the loop: redis.asyncio binds to the loop it is used on

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.aio, name)
        if not inspect.iscoroutinefunction(value):
            return value
        return lambda *args, **kwargs: self._run(value(*args, **kwargs))

    def close(self) -> None:
        self._run(self.aio.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> BridgedQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
