"""Waking asyncio consumers of a SQLite store without a thread per waiter.

The blocking watcher (signals.py) parks a thread in each wait; through the
thread adapter that is one thread per waiting topic, and each of them reads
``PRAGMA data_version`` every few ms. Here the waiters of one event loop are
futures: a change in this process resolves the futures of its topic (the
file's signals call back onto the loop), and one check of ``data_version``
every CROSS_PROCESS_CHECK_S, made only while someone waits, wakes them all
on a commit by another process. On Linux the loop learns of writes to the
database files from inotify and only then reads ``data_version`` (in a
thread): an idle wait costs nothing. Elsewhere the check looks at the files'
size and time every CROSS_PROCESS_CHECK_S while someone waits."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence

from chronoq.backends.base import AsyncWatcher, Backend
from chronoq.backends.sqlite.inotify import DirectoryWatch
from chronoq.backends.sqlite.signals import CROSS_PROCESS_CHECK_S, FileSignals
from chronoq.backends.threaded import ThreadedBackend
from chronoq.errors import ChronoqError

__all__ = ["SETTLE_S", "AsyncSQLiteBackend", "LoopWake"]

#: after a write to the files, how long data_version is reread (at doubling
#: intervals from CROSS_PROCESS_CHECK_S) for the commit to become visible
SETTLE_S = 1.5


class LoopWake:
    """The waiting asyncio watchers of one store, on one event loop."""

    def __init__(
        self,
        signals: FileSignals,
        data_version: Callable[[], Awaitable[int]],
        files: Sequence[str] = (),
    ) -> None:
        self._signals = signals
        self._data_version = data_version
        self._files = tuple(files)  # none: no other process can write (":memory:")
        self._stamp: tuple[tuple[int, int], ...] | None = None
        self._inotify: DirectoryWatch | None = None
        self._reading = False  # the loop reads self._inotify
        self._dirty = False  # the files were written since the last check
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, set[asyncio.Future[bool]]] = {}
        self._version: int | None = None  # the last data_version the check read
        self._check: asyncio.Task[None] | None = None  # rereads after a write
        self._poll: asyncio.Task[None] | None = None  # without inotify: the files' stamps
        self._written = asyncio.Event()  # a write was seen: a reread's pause ends

    def _attach(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._signals.listen(self._from_any_thread)
        return loop

    def _from_any_thread(self, topic: str) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(self._wake, topic)

    def _wake(self, topic: str) -> None:
        for waiter in self._waiting.pop(topic, ()):
            if not waiter.done():
                waiter.set_result(True)

    def _wake_all(self) -> None:
        for topic in list(self._waiting):
            self._wake(topic)

    async def watcher(self, topic: str) -> AsyncSQLiteWatcher:
        self._attach()
        version = await self._data_version()
        return AsyncSQLiteWatcher(self, topic, self._signals.counter(topic), version)

    async def wait(self, watcher: AsyncSQLiteWatcher, timeout: float) -> bool:
        loop = self._attach()
        counter = self._signals.counter(watcher.topic)
        if counter != watcher.counter:  # a change since its last look
            watcher.counter = counter
            return True
        if self._version is None:
            self._version = watcher.version
        elif self._version != watcher.version:  # another process committed since
            watcher.version = self._version
            return True
        # no await since the counter was read: a change from now on is
        # delivered after this future is in place (call_soon_threadsafe)
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiting.setdefault(watcher.topic, set()).add(waiter)
        self._watch_files(loop)
        try:
            await asyncio.wait({waiter}, timeout=max(timeout, 0.0))
        finally:
            waiting = self._waiting.get(watcher.topic)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiting[watcher.topic]
            woken = waiter.done()
            waiter.cancel()
            if not self._waiting and self._reading and self._inotify is not None:
                loop.remove_reader(self._inotify.fileno())  # nobody to wake: stop reading
                self._reading = False
        watcher.counter = self._signals.counter(watcher.topic)
        if self._version is not None:
            watcher.version = self._version
        return woken

    def _files_moved(self) -> bool:
        stamp = []
        for path in self._files:
            try:
                info = os.stat(path)
                stamp.append((info.st_mtime_ns, info.st_size))
            except OSError:  # no WAL file yet, or it was just reset
                stamp.append((0, -1))
        moved = tuple(stamp) != self._stamp
        self._stamp = tuple(stamp)
        return moved

    def _watch_files(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._files:  # ":memory:": no other process
            return
        if self._inotify is None and self._stamp is None:
            directory = os.path.dirname(self._files[0]) or "."
            names = [os.path.basename(path) for path in self._files]
            self._inotify = DirectoryWatch.open(directory, names)
            self._stamp = ()
        if self._inotify is not None:
            if not self._reading:
                self._inotify.drain()  # what was written while nobody waited is known
                loop.add_reader(self._inotify.fileno(), self._files_written, loop)
                self._reading = True
        elif self._poll is None or self._poll.done():
            self._poll = loop.create_task(self._check_other_processes())

    def _files_written(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._inotify is not None and self._inotify.drain():
            self._heard(loop)

    def _heard(self, loop: asyncio.AbstractEventLoop) -> None:
        """The files were written: (re)start the rereads of ``data_version``."""
        self._dirty = True
        self._written.set()
        if self._check is None or self._check.done():  # one check at a time
            self._check = loop.create_task(self._check_version())

    async def _check_version(self) -> None:
        """Read ``data_version`` after a write to the files, and again at
        doubling pauses for SETTLE_S, until it moves: the write that is seen
        (to the WAL) comes a moment before the commit is visible (in the WAL
        index, in the ``-shm`` file, written through mmap: no inotify event,
        no change of size). A writer paused in between is caught by the
        rereads; each new write starts them over at once."""
        loop = asyncio.get_running_loop()
        deadline = pause = 0.0
        while self._waiting:
            if self._dirty:
                self._dirty = False
                self._written.clear()
                deadline, pause = loop.time() + SETTLE_S, CROSS_PROCESS_CHECK_S
            seen = self._version
            if not await self._reread():
                return
            if self._dirty:
                continue
            left = deadline - loop.time()
            if self._version != seen or left <= 0:
                return  # the commit is seen (its waiters woken), or none came
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._written.wait(), min(pause, left))
            pause *= 2

    async def _check_other_processes(self) -> None:
        """Without inotify: the files' size and time every CROSS_PROCESS_CHECK_S
        while someone waits; a change starts the rereads."""
        loop = asyncio.get_running_loop()
        while self._waiting:
            await asyncio.sleep(CROSS_PROCESS_CHECK_S)
            if self._files_moved():
                self._heard(loop)

    async def _reread(self) -> bool:
        """Read ``data_version``; wake every waiter when another process
        committed (our own commits leave it as it was) or when the store
        cannot be read (their next attempt meets that and says so).
        False: stop checking."""
        try:
            version = await self._data_version()
        except ChronoqError:
            self._wake_all()
            return False
        if self._version is not None and version != self._version:
            self._wake_all()
        self._version = version
        return True

    def close(self) -> None:
        self._signals.unlisten(self._from_any_thread)
        self._wake_all()
        for task in (self._check, self._poll):
            if task is not None:
                task.cancel()
        if self._inotify is not None:
            if self._reading and self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._inotify.fileno())
            self._inotify.close()
            self._inotify = None


class AsyncSQLiteWatcher(AsyncWatcher):
    def __init__(self, wake: LoopWake, topic: str, counter: int, version: int) -> None:
        self._wake = wake
        self.topic = topic
        self.counter = counter
        self.version = version

    async def wait(self, timeout: float) -> bool:
        return await self._wake.wait(self, timeout)


class AsyncSQLiteBackend(ThreadedBackend):
    """The thread adapter with asyncio-native waiting: calls run in threads,
    waits are futures on the loop (any number of them, no thread each)."""

    def __init__(
        self,
        backend: Backend,
        signals: FileSignals,
        data_version: Callable[[], int],
        files: Sequence[str],
        *,
        owned: bool = True,
    ) -> None:
        super().__init__(backend, owned=owned)
        self._read_version = data_version
        self._wake = LoopWake(signals, self._data_version, files)

    async def _data_version(self) -> int:
        return await self._call(self._read_version)

    async def watch(self, topic: str) -> AsyncWatcher:
        return await self._wake.watcher(topic)

    async def close(self) -> None:
        self._wake.close()
        await super().close()
