"""A topic's jobs in one state, read through ``Queue.jobs`` (every shard)."""

from __future__ import annotations

from collections.abc import Iterator

from chronoq.job import JobInfo
from chronoq.queue import Queue
from chronoq.states import State

__all__ = ["all_jobs", "dead", "delayed", "ready", "reserved"]

PAGE = 1000
MOST_DEAD = 100_000  # the most one Queue.dead call returns


def all_jobs(queue: Queue, topic: str) -> Iterator[JobInfo]:
    """Every job of the topic, each once (a Redis scan may return one twice)."""
    seen: set[str] = set()
    for shard in range(queue.shards):
        cursor: str | None = None
        while True:
            page = queue.jobs(topic, shard=shard, cursor=cursor, limit=PAGE)
            for info in page.jobs:
                if info.id not in seen:
                    seen.add(info.id)
                    yield info
            cursor = page.cursor
            if cursor is None:
                break


def _in_state(queue: Queue, topic: str, state: State) -> list[JobInfo]:
    return [info for info in all_jobs(queue, topic) if info.state is state]


def delayed(queue: Queue, topic: str) -> list[JobInfo]:
    """The topic's jobs not yet due, soonest first (then by priority, highest
    first, then in put order)."""
    return sorted(
        _in_state(queue, topic, State.DELAYED),
        key=lambda info: (info.due_at, -info.priority, info.created_at, info.id),
    )


def ready(queue: Queue, topic: str) -> list[JobInfo]:
    """The topic's due jobs, in the order a reserve hands them out: highest
    priority first, then soonest due, then in put order (on a sharded Redis,
    each shard keeps that order and a reserve takes from any shard)."""
    return sorted(
        _in_state(queue, topic, State.READY),
        key=lambda info: (-info.priority, info.due_at, info.created_at, info.id),
    )


def reserved(queue: Queue, topic: str) -> list[JobInfo]:
    """The topic's jobs leased to a consumer now, the lease ending soonest first."""
    return sorted(
        _in_state(queue, topic, State.RESERVED),
        key=lambda info: (info.deadline or 0, info.id),
    )


def dead(queue: Queue, topic: str) -> list[JobInfo]:
    """The topic's dead jobs, oldest death first (``Queue.dead``, every one of them)."""
    return queue.dead(topic, limit=MOST_DEAD)
