"""Backend.release: a consumer gives back a job it did not run to the end (a
worker shutting down). The job is ready at once and not sent to dead, even on
its last attempt; attempts still counts reservations; a stale lease changes
nothing. Through the sync backend and the asyncio one, on every backend."""

from __future__ import annotations

import asyncio

import pytest

import chronoq
import chronoq.aio
from chronoq import State
from chronoq.errors import LeaseLost


def test_release_gives_the_attempt_back(store_url: str, topic: str) -> None:
    with chronoq.connect(store_url) as q:
        q.put(topic, {"n": 1}, id="last", max_attempts=1)
        [job] = q.reserve(topic)
        assert job.attempts == 1
        q.backend.release(topic, job.id, job.lease, "stopped")
        info = q.get(topic, "last")
        assert info is not None
        assert (info.state, info.attempts, info.last_error) == (State.READY, 1, "stopped")
        with pytest.raises(LeaseLost):  # the old lease is fenced
            q.backend.release(topic, job.id, job.lease, "again")
        with pytest.raises(LeaseLost):
            q.ack(job)
        [again] = q.reserve(topic)
        assert again.attempts == 2  # a run past max_attempts: the one the release kept
        q.ack(again)
        kinds = [e.event for e in q.events(topic).events]
        assert kinds == ["put", "reserve", "nack", "reserve", "ack"]


def test_release_through_asyncio(store_url: str, topic: str) -> None:
    async def main() -> None:
        q = chronoq.aio.connect(store_url)
        try:
            await q.put(topic, "x", id="x", max_attempts=1)
            [job] = await q.reserve(topic)
            await q.backend.release(topic, job.id, job.lease, None)
            info = await q.get(topic, "x")
            assert info is not None and (info.state, info.attempts) == (State.READY, 1)
            with pytest.raises(LeaseLost):
                await q.backend.release(topic, job.id, job.lease, None)
        finally:
            await q.close()

    asyncio.run(main())
