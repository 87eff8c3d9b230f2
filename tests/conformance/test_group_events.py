"""Conformance: each event of the log carries its job's group (docs/contract.md
§7, §10), None for a job without one, through every transition: put (one, many,
with a generated id), reserve, ack, nack, release, touch, bury, requeue,
reschedule, an expiry and a death by expiry, delete and purge. On every
backend, through both store facades."""

from __future__ import annotations

from typing import Any

from chronoq import Job

from ..children import all_events
from .test_transitions import reserve_one, sleep_past

G = "tenant-42"


def _by_id(queue: Any, topic: str) -> dict[str, list[tuple[str, str | None]]]:
    """(kind, group) of each job's events, oldest first."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    for event in all_events(queue, topic):
        out.setdefault(event.id, []).append((event.event.value, event.group))
    return out


def test_every_event_of_a_grouped_job_carries_its_group(queue: Any, topic: str) -> None:
    queue.put(topic, 1, id="g", group=G)
    queue.put(topic, 2, id="p", delay=3600)  # no group, on a topic with groups
    job = reserve_one(queue, topic)
    queue.touch(job, ttr=30)
    queue.nack(job, delay=0, error="again")
    job = reserve_one(queue, topic)
    queue.release(job)
    job = reserve_one(queue, topic)
    queue.bury(job, error="no")
    assert queue.requeue(topic) == 1
    job = reserve_one(queue, topic)
    queue.ack(job)
    assert queue.reschedule(topic, "p", delay=7200)
    assert queue.delete(topic, "p")
    kinds = [
        "put",
        "reserve",
        "touch",
        "nack",
        "reserve",
        "nack",  # release
        "reserve",
        "bury",
        "requeue",
        "reserve",
        "ack",
    ]
    events = _by_id(queue, topic)
    assert events["g"] == [(kind, G) for kind in kinds]
    assert events["p"] == [("put", None), ("reschedule", None), ("delete", None)]


def test_expiry_death_and_purge_carry_the_group(queue: Any, topic: str) -> None:
    queue.put(topic, 1, id="e", group=G, ttr=0.05, max_attempts=2)
    held = reserve_one(queue, topic)
    sleep_past(held.deadline)
    held = reserve_one(queue, topic)  # reclaims the lease first: expire
    sleep_past(held.deadline)
    assert queue.reserve(topic) == []  # its last attempt: dead
    queue.put_many(topic, [Job(3, id="m", group="other"), Job(4, id="n", delay=3600)])
    assert queue.purge(topic) == 3
    events = _by_id(queue, topic)
    assert events["e"] == [
        ("put", G),
        ("reserve", G),
        ("expire", G),
        ("reserve", G),
        ("dead", G),
        ("delete", G),
    ]
    assert events["m"] == [("put", "other"), ("delete", "other")]
    assert events["n"] == [("put", None), ("delete", None)]


def test_generated_ids_and_a_topic_without_groups(queue: Any, topic: str) -> None:
    grouped = [r.id for r in queue.put_many(topic, [Job(n, group=f"g{n % 3}") for n in range(9)])]
    plain = queue.put(f"{topic}-plain", 0).id  # a topic that never had a group
    jobs = queue.reserve(topic, count=9)
    queue.ack_many(jobs)
    events = _by_id(queue, topic)
    for n, job_id in enumerate(grouped):
        group = f"g{n % 3}"
        assert events[job_id] == [("put", group), ("reserve", group), ("ack", group)]
    [job] = queue.reserve(f"{topic}-plain")
    queue.ack(job)
    assert _by_id(queue, f"{topic}-plain")[plain] == [
        ("put", None),
        ("reserve", None),
        ("ack", None),
    ]
