"""What an asyncio consumer waits with between reserve attempts: a watcher
of one topic, and one of several topics that waits as one.

A request that waits on several topics at once (the compatibility
protocols' pop) takes one ``TopicsWatcher``: each topic's reserve takes that
topic's part (the store may hand it a due-time timer), and a wait ends on a
change to any of them. By default the parts wait side by side, which costs
what each topic's own watcher costs (a future on SQLite, the process's
shared bells on a Redis Cluster); a store that can wait on several topics in
one call overrides ``AsyncBackend.watch_topics`` (one BLPOP on one Redis
server), so that a pop on N topics holds one blocked connection, not N."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping

__all__ = ["AsyncWatcher", "TopicsWatcher", "watch_each"]


class AsyncWatcher(ABC):
    """Taken before a reserve attempt; ``wait`` returns as soon as anything
    that could make a job available happened since, or after ``timeout``
    seconds. It may be reused for many waits; cancelling a wait is safe."""

    @abstractmethod
    async def wait(self, timeout: float) -> bool:
        """True when woken by a change, False on timeout."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the watcher holds."""

    async def unused(self) -> None:  # noqa: B027 - optional hook
        """The change that ended the last wait was not looked at (no reserve
        on this topic followed it): where the store tells one waiter alone
        (a Redis wake token), hand it to another one, or it is lost."""

    def interrupt(self) -> bool:
        """End a running wait now, as if its time ran out, and keep what it
        holds; False when this watcher cannot, and the wait is to be
        cancelled instead (also safe, but it may drop a connection)."""
        return False


class TopicsWatcher(AsyncWatcher):
    """The watchers of several topics, waiting as one: ``of(topic)`` is the
    one a reserve on ``topic`` takes; ``wait`` returns on a change to any."""

    def __init__(self, parts: Mapping[str, AsyncWatcher]) -> None:
        self.parts = dict(parts)
        self._woken: list[str] = []  # the topics whose change ended the last wait

    def of(self, topic: str) -> AsyncWatcher:
        return self.parts[topic]

    async def wait(self, timeout: float) -> bool:
        """Each part's wait at once; the first to end stops the others."""
        if len(self.parts) == 1:
            [(topic, part)] = self.parts.items()
            woke = await part.wait(timeout)
            self._woken = [topic] if woke else []
            return woke
        waits = {
            topic: asyncio.ensure_future(part.wait(timeout)) for topic, part in self.parts.items()
        }
        try:
            await asyncio.wait(waits.values(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits.values():
                wait.cancel()
            await asyncio.wait(waits.values())  # each ends at once: cancelling a wait is safe
        self._woken = []
        for topic, wait in waits.items():  # a part that woke as it was stopped counts too
            if wait.cancelled():
                continue
            error = wait.exception()
            if error is not None:
                raise error
            if wait.result():
                self._woken.append(topic)
        return bool(self._woken)

    async def unused(self, tried: Collection[str] = ()) -> None:
        """The changes that ended the last wait on the topics not in ``tried``
        (no reserve on them followed) go to other waiters."""
        woken, self._woken = self._woken, []
        for topic in woken:
            if topic not in tried:
                await self.parts[topic].unused()

    async def close(self) -> None:
        await _close_all(self.parts.values())


async def _close_all(watchers: Iterable[AsyncWatcher]) -> None:
    """Close each of ``watchers``, the others too when one fails; then raise
    the first failure."""
    failure: BaseException | None = None
    for watcher in watchers:
        try:
            await watcher.close()
        except Exception as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


async def watch_each(
    watch: Callable[[str], Awaitable[AsyncWatcher]], topics: Iterable[str]
) -> TopicsWatcher:
    """A ``TopicsWatcher`` of each topic's own watcher, made by ``watch``."""
    parts: dict[str, AsyncWatcher] = {}
    try:
        for topic in topics:
            parts[topic] = await watch(topic)
    except BaseException:
        await _close_all(parts.values())
        raise
    return TopicsWatcher(parts)
