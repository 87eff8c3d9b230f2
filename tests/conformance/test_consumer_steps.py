"""The single steps a consumer builds its own loop on (``Worker`` and
``Queue.reserve`` are built on them): one reserve attempt that says when to
look again, and a nack with a backoff of the caller's. Through both APIs, on
every backend."""

from __future__ import annotations

from typing import Any

import pytest

from chronoq import Backoff, State
from chronoq.errors import InvalidInput


def test_one_attempt_leases_due_jobs(queue: Any, topic: str) -> None:
    queue.put(topic, "a", id="a")
    result = queue.reserve_once(topic, 5)
    assert [job.id for job in result.jobs] == ["a"]
    assert queue.reserve_once(topic).jobs == []


def test_an_empty_attempt_says_when_the_next_job_is_due(queue: Any, topic: str) -> None:
    assert queue.reserve_once(topic).wake_in_ms is None  # nothing at all
    queue.put(topic, "later", delay=30)
    result = queue.reserve_once(topic)
    assert result.jobs == []
    assert result.wake_in_ms is not None and 25_000 < result.wake_in_ms <= 30_000


def test_one_attempt_checks_its_arguments(queue: Any, topic: str) -> None:
    with pytest.raises(InvalidInput):
        queue.reserve_once(topic, 0)
    with pytest.raises(InvalidInput):
        queue.reserve_once(topic, ttr=-1)
    with pytest.raises(InvalidInput):
        queue.reserve_once("bad topic")


def test_a_nack_takes_the_callers_backoff(queue: Any, topic: str) -> None:
    queue.put(topic, "x", id="x")
    [job] = queue.reserve(topic)
    slow = Backoff(base=600, factor=2, cap=3600)  # first retry: 300 to 600 s
    assert queue.nack(job, backoff=slow) is State.DELAYED
    info = queue.get(topic, "x")
    assert info is not None
    assert info.due_at - job.due_at >= 299_000  # not the queue's 1 s backoff
    with pytest.raises(InvalidInput, match="backoff"):
        queue.nack(job, backoff=60)
