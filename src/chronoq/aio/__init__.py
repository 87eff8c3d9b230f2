"""chronoq for asyncio: ``chronoq.aio.connect(url)`` gives an ``AsyncQueue``
whose methods are those of ``chronoq.Queue``, as coroutines."""

from chronoq.aio.base import AsyncBackend, AsyncWatcher
from chronoq.aio.queue import AsyncQueue, connect

__all__ = ["AsyncBackend", "AsyncQueue", "AsyncWatcher", "connect"]
