"""``release``: a consumer gives back a job it did not run to the end (a
worker shutting down). The job is ready at once and not sent to dead, even on
its last attempt; attempts still counts reservations; a stale lease changes
nothing. Through both APIs, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from chronoq import State
from chronoq.errors import LeaseLost


def test_release_gives_the_attempt_back(queue: Any, topic: str) -> None:
    queue.put(topic, {"n": 1}, id="last", max_attempts=1)
    [job] = queue.reserve(topic)
    assert job.attempts == 1
    queue.release(job, error="stopped")
    info = queue.get(topic, "last")
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (State.READY, 1, "stopped")
    with pytest.raises(LeaseLost):  # the old lease is fenced
        queue.release(job, error="again")
    with pytest.raises(LeaseLost):
        queue.ack(job)
    [again] = queue.reserve(topic)
    assert again.attempts == 2  # a run past max_attempts: the one the release kept
    queue.ack(again)
    kinds = [e.event for e in queue.events(topic).events]
    assert kinds == ["put", "reserve", "nack", "reserve", "ack"]


def test_release_by_topic_id_and_lease(queue: Any, topic: str) -> None:
    queue.put(topic, "x", id="x", max_attempts=1)
    [job] = queue.reserve(topic)
    queue.release(topic, job.id, job.lease)
    info = queue.get(topic, "x")
    assert info is not None and (info.state, info.attempts) == (State.READY, 1)
    with pytest.raises(LeaseLost):
        queue.release(topic, job.id, job.lease)
