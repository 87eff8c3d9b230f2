"""The steps of a waiting ``Queue.reserve`` (chronoq.calls.consuming.Reserve)
when its watcher fails: the watcher is closed, and jobs leased before a
failure are given back rather than left leased until their ttr runs out."""

from __future__ import annotations

from typing import Any

import pytest

import chronoq
from chronoq import State
from chronoq.backends.base import Watcher


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
