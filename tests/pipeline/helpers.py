"""Helpers of the pipeline tests: store URLs with options, events made on a
store, and what an export directory holds, read with pyarrow alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

import chronoq

__all__ = ["exported", "log_cap", "log_events", "make_events", "with_option"]


def with_option(url: str, **options: object) -> str:
    """``url`` with more query options."""
    extra = "&".join(f"{key}={value}" for key, value in options.items())
    return f"{url}{'&' if '?' in url else '?'}{extra}"


def log_cap(url: str, events: int) -> str:
    """``url`` with the store's event log capped at about ``events`` per shard."""
    option = "events_keep" if url.startswith("sqlite") else "events_max"
    return with_option(url, **{option: events})


def make_events(
    q: chronoq.Queue, topic: str, jobs: int, *, start: int = 0, group: str | None = None
) -> None:
    """``jobs`` puts (in ``group``), then a reserve and an ack or a nack for
    each: 3 events a job."""
    q.put_many(
        topic,
        [chronoq.Job({"n": n}, id=f"{topic}-{n}", group=group) for n in range(start, start + jobs)],
    )
    left = jobs
    while left:
        leased = q.reserve(topic, count=min(left, 500))
        assert leased, "every job put is due now"
        acked = [job for job in leased if int(job.id.rsplit("-", 1)[1]) % 5]
        assert q.ack_many(acked) == []
        for job in leased:
            if job not in acked:
                q.nack(job, delay=3600, error="not now")
        left -= len(leased)


def log_events(q: chronoq.Queue, topic: str | None = None) -> dict[tuple[str, int, int], Any]:
    """Every event the store still logs: (topic, shard, seq) -> event."""
    found = {}
    for shard in q.log_shards(topic):
        after = 0
        while True:
            page = q.log_read(shard, after, limit=5000)
            if not page.events:
                break
            for event in page.events:
                found[event.topic, shard.shard, event.seq] = event
            after = page.events[-1].seq
    return found


def exported(directory: Path) -> list[dict[str, Any]]:
    """Every row of an export directory, partition columns included."""
    if not any(directory.glob("topic=*")):
        return []
    dataset = ds.dataset(directory, format="parquet", partitioning="hive")
    return dataset.to_table().to_pylist()  # type: ignore[no-any-return]
