"""Conformance: a job's group (docs/contract.md §10) is kept with the job: put
with one, every read shows it, and no transition loses it (a retry, a death, a
requeue, the far tier on Redis), beside a trace context or alone. Fairness and
limits among groups are issue 28's next steps. On every backend, through both
store facades."""

from __future__ import annotations

from typing import Any

import pytest

from chronoq import Job, State
from chronoq.errors import InvalidJob

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_job_keeps_its_group_through_retries_death_and_requeue(queue: Any, topic: str) -> None:
    queue.put(topic, {"n": 1}, id="grouped", group="tenant-42")
    queue.put(topic, {"n": 2}, id="plain", delay=3600)
    assert queue.get(topic, "grouped").group == "tenant-42"
    assert queue.get(topic, "plain").group is None

    (job,) = queue.reserve(topic)
    assert (job.id, job.group, job.payload) == ("grouped", "tenant-42", {"n": 1})
    assert queue.nack(job, delay=0, error="again") is State.READY
    assert queue.get(topic, "grouped").group == "tenant-42"

    (job,) = queue.reserve(topic)
    assert (job.attempts, job.group) == (2, "tenant-42")
    queue.bury(job, error="gave up")
    (dead,) = queue.dead(topic)
    assert (dead.id, dead.group, dead.payload) == ("grouped", "tenant-42", {"n": 1})

    assert queue.requeue(topic) == 1
    (job,) = queue.reserve(topic)
    assert (job.attempts, job.group, job.payload) == (1, "tenant-42", {"n": 1})
    queue.ack(job)


def test_put_many_keeps_each_jobs_group_and_context(queue: Any, topic: str) -> None:
    queue.put_many(
        topic,
        [
            Job(b"\x00raw", id="a", group="g1", traceparent=TRACE),
            Job({"x": 1}, id="b", group="g2"),
            Job(None, id="c", traceparent=TRACE),
            Job(None, id="d"),
        ],
    )
    jobs = {job.id: job for job in queue.reserve(topic, 4)}
    assert {i: (j.group, j.traceparent, j.payload) for i, j in jobs.items()} == {
        "a": ("g1", TRACE, b"\x00raw"),
        "b": ("g2", None, {"x": 1}),
        "c": (None, TRACE, None),
        "d": (None, None, None),
    }


def test_a_far_or_rescheduled_or_replaced_job_keeps_its_group(queue: Any, topic: str) -> None:
    far = queue.put(topic, 1, delay=30 * 86400, group="later").id  # far on Redis
    assert queue.get(topic, far).group == "later"
    assert queue.reschedule(topic, far, delay=0)
    (job,) = queue.reserve(topic)
    assert (job.id, job.group) == (far, "later")
    queue.ack(job)
    queue.put(topic, 2, id="j", delay=3600, group="one")
    queue.put(topic, 3, id="j", delay=3600, replace=True)
    assert queue.get(topic, "j").group is None
    queue.put(topic, 4, id="j", delay=3600, replace=True, group="two")
    assert queue.get(topic, "j").group == "two"
    listed = queue.jobs(topic, shard=queue.shard_of("j")).jobs
    assert [(j.id, j.group) for j in listed] == [("j", "two")]


@pytest.mark.parametrize("bad", ["", " x", "a b", "x" * 129, "-lead", "é", 42])
def test_a_bad_group_is_refused(queue: Any, topic: str, bad: Any) -> None:
    with pytest.raises(InvalidJob, match="group"):
        queue.put(topic, 1, group=bad)
    with pytest.raises(InvalidJob, match="job #1"):
        queue.put_many(topic, [Job(1), Job(2, group=bad)])
    assert queue.stats(topic)["ready"] == 0
