"""Conformance: the trace context kept with a job (docs/contract.md, "Trace
context"): put with one, every read shows it, and no transition loses it:
a retry, a death, a requeue. On every backend, through both store facades."""

from __future__ import annotations

from typing import Any

import pytest

from chronoq import Job, State
from chronoq.errors import InvalidJob

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


def test_a_job_keeps_its_trace_context_through_retries_death_and_requeue(
    queue: Any, topic: str
) -> None:
    queue.put(topic, {"n": 1}, id="traced", traceparent=TRACE)
    queue.put(topic, {"n": 2}, id="plain", delay=3600)
    assert queue.get(topic, "traced").traceparent == TRACE
    assert queue.get(topic, "plain").traceparent is None

    (job,) = queue.reserve(topic)
    assert (job.id, job.traceparent, job.payload) == ("traced", TRACE, {"n": 1})
    assert queue.nack(job, delay=0, error="again") is State.READY
    assert queue.get(topic, "traced").traceparent == TRACE

    (job,) = queue.reserve(topic)
    assert (job.attempts, job.traceparent) == (2, TRACE)
    queue.bury(job, error="gave up")
    (dead,) = queue.dead(topic)
    assert (dead.id, dead.traceparent, dead.payload) == ("traced", TRACE, {"n": 1})

    assert queue.requeue(topic) == 1
    (job,) = queue.reserve(topic)
    assert (job.attempts, job.traceparent, job.payload) == (1, TRACE, {"n": 1})
    queue.ack(job)


def test_put_many_keeps_each_jobs_own_context(queue: Any, topic: str) -> None:
    queue.put_many(
        topic,
        [
            Job(b"\x00raw", id="a", traceparent=TRACE),
            Job({"x": 1}, id="b", traceparent=OTHER),
            Job(None, id="c"),
        ],
    )
    jobs = {job.id: job for job in queue.reserve(topic, 3)}
    assert {i: (j.traceparent, j.payload) for i, j in jobs.items()} == {
        "a": (TRACE, b"\x00raw"),
        "b": (OTHER, {"x": 1}),
        "c": (None, None),
    }


def test_a_replacing_put_brings_its_own_context(queue: Any, topic: str) -> None:
    queue.put(topic, 1, id="j", delay=3600, traceparent=TRACE)
    queue.put(topic, 2, id="j", delay=3600, replace=True)
    assert queue.get(topic, "j").traceparent is None
    queue.put(topic, 3, id="j", delay=3600, replace=True, traceparent=OTHER)
    assert queue.get(topic, "j").traceparent == OTHER


@pytest.mark.parametrize(
    "bad",
    [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # another version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
        "",
        42,
    ],
)
def test_a_bad_trace_context_is_refused(queue: Any, topic: str, bad: Any) -> None:
    with pytest.raises(InvalidJob, match="traceparent"):
        queue.put(topic, 1, traceparent=bad)
    with pytest.raises(InvalidJob, match="job #1"):
        queue.put_many(topic, [Job(1), Job(2, traceparent=bad)])
    assert queue.stats(topic)["ready"] == 0


def test_an_id_twice_in_one_batch_keeps_the_context_of_the_job_kept(queue: Any, topic: str) -> None:
    queue.put_many(
        topic,
        [Job(1, id="twice", traceparent=TRACE), Job(2, id="twice"), Job(3, id="once")],
        replace=True,
    )
    assert queue.get(topic, "twice").payload == 2
    assert queue.get(topic, "twice").traceparent is None
    queue.put_many(topic, [Job(4, id="again"), Job(5, id="again", traceparent=OTHER)], replace=True)
    assert (queue.get(topic, "again").payload, queue.get(topic, "again").traceparent) == (5, OTHER)
