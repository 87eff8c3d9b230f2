"""What the dashboard's handlers share: the queue, the settings, a blocking
queue for the reads only ``Queue`` has, and the event log's tail."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

from chronoq.aio import AsyncQueue
from chronoq.backends.threaded import ThreadedBackend
from chronoq.queue import Queue, connect
from chronoq.server.asgi import Service
from chronoq.server.auth import Action, allowed
from chronoq.server.routing import Call
from chronoq.server.settings import ServerSettings
from chronoq.server.ui.activity import Activity

__all__ = ["Board"]

T = TypeVar("T")


class Board:
    def __init__(self, queue: AsyncQueue, service: Service, store: str) -> None:
        self.queue = queue
        self.service = service
        self._store = store
        self._blocking: Queue | None = None
        self._owned = False
        self._opening = threading.Lock()
        self.activity = Activity(self.blocking)
        service.on_close.append(self.close)

    @property
    def settings(self) -> ServerSettings:
        return self.service.settings

    def blocking(self) -> Queue:
        """The store as a ``Queue`` (opened on first use, in a thread)."""
        with self._opening:
            if self._blocking is None:
                backend = self.queue.backend
                if isinstance(backend, ThreadedBackend):
                    # the async queue runs a blocking backend already: share it
                    # (one connection, and the same data for sqlite://:memory:)
                    self._blocking = Queue(backend.backend, max_payload=self.queue.max_payload)
                else:
                    self._blocking = connect(self._store)
                    self._owned = True
            return self._blocking

    async def in_thread(self, fn: Callable[[Queue], T]) -> T:
        """``fn(queue)`` on the blocking queue, off the event loop."""
        return await asyncio.to_thread(lambda: fn(self.blocking()))

    async def close(self) -> None:
        if self._blocking is not None and self._owned:
            await asyncio.to_thread(self._blocking.close)
        self._blocking = None

    def may(self, call: Call, action: Action, topic: str | None) -> bool:
        """Whether the request's token allows ``action`` on ``topic`` (always
        with auth off, but on the server's own topics)."""
        return allowed(call.token, action, topic)

    def may_act(self, call: Call, topic: str) -> bool:
        """Whether to offer the actions on ``topic``: not in read-only mode,
        and only to a token that may use them."""
        return not self.settings.read_only_ui and self.may(call, Action.ADMIN, topic)

    def check(self, call: Call, action: Action, topic: str) -> None:
        """Raise 403 unless the token allows ``action`` on ``topic``: for a
        topic that comes in the query string, which the route cannot check."""
        self.settings.auth.check(call.token, action, topic)
