"""The steps of a waiting ``Queue.reserve`` (chronoq.calls.consuming.Reserve)
when its watcher fails: the watcher is closed, and jobs leased before a
failure are given back rather than left leased until their ttr runs out."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import State
from chronoq.backends.base import AsyncWatcher, Watcher


class Failing(Watcher):
    """A store's watcher whose ``wait`` or ``close`` fails after the real one ran."""

    def __init__(self, inner: Watcher, fail_in: str) -> None:
        self.inner = inner
        self.fail_in = fail_in
        self.closed = False

    def wait(self, timeout: float) -> bool:
        self.inner.wait(timeout)
        if self.fail_in == "wait":
            raise RuntimeError("the wait broke")
        return False

    def close(self) -> None:
        self.inner.close()
        self.closed = True
        if self.fail_in == "close":
            raise RuntimeError("the close broke")


def _watching(queue: chronoq.Queue, fail_in: str) -> list[Failing]:
    made: list[Failing] = []
    store_watch = queue.backend.watch

    def watch(topic: str) -> Watcher:
        made.append(Failing(store_watch(topic), fail_in))
        return made[-1]

    queue.backend.watch = watch  # type: ignore[method-assign]
    return made


def test_jobs_leased_before_a_failed_close_are_given_back(tmp_path: Any) -> None:
    with chronoq.connect(f"sqlite:///{tmp_path}/q.db") as queue:
        queue.put("t", 1, id="a", ttr=600)
        made = _watching(queue, "close")
        with pytest.raises(RuntimeError, match="the close broke"):
            queue.reserve("t", wait=1)
        job = queue.get("t", "a")
        assert job is not None and job.state is State.READY
        assert job.last_error == "the reserve was interrupted"
        assert made[0].closed


def test_a_failed_wait_closes_the_watcher_and_leases_nothing(tmp_path: Any) -> None:
    with chronoq.connect(f"sqlite:///{tmp_path}/q.db") as queue:
        queue.put("t", 1, id="a", delay=60)
        made = _watching(queue, "wait")
        with pytest.raises(RuntimeError, match="the wait broke"):
            queue.reserve("t", wait=0.05)
        job = queue.get("t", "a")
        assert job is not None and job.state is State.DELAYED
        assert made[0].closed


def test_a_closed_waiting_async_reserve_closes_its_watcher(tmp_path: Any) -> None:
    """A pending reserve's coroutine closed rather than cancelled (a task
    dropped with its loop): no step may be awaited, yet the watcher closes."""
    closed: list[AsyncWatcher] = []

    async def scenario() -> int:
        queue = chronoq.aio.connect(f"sqlite:///{tmp_path / 'q.db'}")
        store_watch = queue.backend.watch

        async def watch(topic: str) -> AsyncWatcher:
            watcher = await store_watch(topic)
            store_close = watcher.close

            async def close() -> None:
                closed.append(watcher)
                await store_close()

            watcher.close = close  # type: ignore[method-assign]
            made.append(watcher)
            return watcher

        made: list[AsyncWatcher] = []
        queue.backend.watch = watch  # type: ignore[method-assign]
        reserving = asyncio.ensure_future(queue.reserve("t", wait=30))
        while not made:  # until the reserve waits
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        reserving.get_coro().close()  # type: ignore[union-attr]
        reserving.cancel()  # the task, with its coroutine gone
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            await reserving
        await queue.close()
        return len(made)

    assert asyncio.run(scenario()) == 1
    assert len(closed) == 1
