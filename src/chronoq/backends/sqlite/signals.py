"""Waking consumers of a SQLite store without a polling loop (docs/contract.md §6).

Within a process, every queue open on the same file shares one condition
variable (the registry keyed by the file's real path is the one piece of
module-level state chronoq allows): a write that may make a job available
bumps its topic's counter and wakes the waiters. Writes by other processes
are seen through ``PRAGMA data_version``, read every few ms while waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chronoq.backends.base import Watcher

__all__ = ["CROSS_PROCESS_CHECK_S", "FileSignals", "SQLiteWatcher", "signals_for"]

#: how often a waiting consumer looks for commits by other processes
CROSS_PROCESS_CHECK_S = 0.005


class FileSignals:
    """Per-topic change counters of one database file, with one condition,
    and listeners told of each change (asyncio waiters: aio_watcher.py)."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.counters: dict[str, int] = {}
        # replaced, never changed in place: notify reads it without a copy
        self.listeners: tuple[Callable[[str], None], ...] = ()
        # topics under flow control (sqlite/flow.py) seen by this process: a
        # lease that ends there may let a waiting consumer go on
        self.flow_topics: set[str] = set()

    def notify(self, topic: str) -> None:
        with self.cond:
            self.counters[topic] = self.counters.get(topic, 0) + 1
            self.cond.notify_all()
            listeners = self.listeners
        for listener in listeners:  # outside the lock: a listener only schedules work
            listener(topic)

    def listen(self, listener: Callable[[str], None]) -> None:
        with self.cond:
            self.listeners = (*self.listeners, listener)

    def unlisten(self, listener: Callable[[str], None]) -> None:
        with self.cond:
            # == not is: a bound method is a new object at each access
            self.listeners = tuple(each for each in self.listeners if each != listener)

    def counter(self, topic: str) -> int:
        with self.cond:
            return self.counters.get(topic, 0)


_registry: dict[str, FileSignals] = {}
_registry_lock = threading.Lock()


def signals_for(key: str) -> FileSignals:
    """The shared signals of the file whose real path is ``key``."""
    with _registry_lock:
        signals = _registry.get(key)
        if signals is None:
            signals = _registry[key] = FileSignals()
        return signals


class SQLiteWatcher(Watcher):
    """Wakes on an in-process notification for its topic, on a commit by
    another connection (``data_version``), or at the timeout."""

    def __init__(self, signals: FileSignals, topic: str, data_version: Callable[[], int]) -> None:
        self._signals = signals
        self._topic = topic
        self._data_version = data_version
        self._counter = signals.counter(topic)
        self._version = data_version()
        self._interrupted = False

    def interrupt(self) -> None:
        with self._signals.cond:
            self._interrupted = True
            self._signals.cond.notify_all()

    def wait(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        cond = self._signals.cond
        while True:
            with cond:
                if self._interrupted:
                    self._interrupted = False
                    return False
                counter = self._signals.counters.get(self._topic, 0)
                if counter == self._counter:
                    remaining = end - time.monotonic()
                    if remaining > 0:
                        cond.wait(min(remaining, CROSS_PROCESS_CHECK_S))
                    counter = self._signals.counters.get(self._topic, 0)
            version = self._data_version()
            if counter != self._counter or version != self._version:
                self._counter, self._version = counter, version
                return True
            if time.monotonic() >= end:
                return False
