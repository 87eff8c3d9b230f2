"""chronoq for asyncio: ``chronoq.aio.connect(url)`` gives an ``AsyncQueue``
whose methods are those of ``chronoq.Queue``, as coroutines."""

from chronoq.aio.queue import AsyncQueue, connect
from chronoq.backends.base import AsyncBackend, AsyncWatcher

__all__ = ["AsyncBackend", "AsyncQueue", "AsyncWatcher", "connect"]
