"""Reading a store in bulk, on every backend: ``Queue.log_shards``,
``log_read`` (numbering, resuming, counting what the store trimmed),
``log_trim`` and ``Queue.jobs``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import chronoq
from chronoq.errors import InvalidInput
from chronoq.job import LogShard

from .children import all_events
from .pipeline.helpers import log_cap, log_events, make_events


def test_each_log_shard_numbers_its_events_from_one_without_holes(
    queue: chronoq.Queue, topic: str
) -> None:
    make_events(queue, topic, 700)
    logged = log_events(queue, topic)
    by_shard: dict[int, list[int]] = {}
    for _, shard, seq in logged:
        by_shard.setdefault(shard, []).append(seq)
    for seqs in by_shard.values():
        assert sorted(seqs) == list(range(1, len(seqs) + 1))
    # the same events as the paged log of Queue.events
    assert sorted((e.id, e.event, e.attempt) for e in logged.values()) == sorted(
        (e.id, e.event, e.attempt) for e in all_events(queue, topic)
    )


def test_reads_resume_after_the_last_seq_and_report_the_head(
    queue: chronoq.Queue, topic: str
) -> None:
    make_events(queue, topic, 100)
    for shard in queue.log_shards(topic):
        whole = queue.log_read(shard, 0, limit=100_000)
        assert whole.lost == 0 and whole.head == whole.events[-1].seq
        seen, after = [], 0
        while page := queue.log_read(shard, after, limit=7).events:
            seen += page
            after = page[-1].seq
        assert seen == whole.events
        assert queue.log_read(shard, whole.head).events == []


def test_events_the_store_trimmed_are_counted_as_lost(store_url: str, topic: str) -> None:
    q = chronoq.connect(log_cap(store_url, 1000))
    make_events(q, topic, 4000)
    for shard in q.log_shards(topic):
        first = q.log_read(shard, 0, limit=1)
        assert first.lost > 0
        assert first.events[0].seq == first.lost + 1
        middle = q.log_read(shard, first.lost - 5, limit=1)
        assert middle.lost == 5 and middle.events[0].seq == first.lost + 1
    q.close()


def test_trim_drops_the_events_up_to_a_seq_and_never_a_later_one(
    queue: chronoq.Queue, topic: str
) -> None:
    make_events(queue, topic, 300)
    for shard in queue.log_shards():  # SQLite trims its one log, of every topic
        head = queue.log_read(shard, 0).head
        queue.log_trim(shard, head // 2)
        page = queue.log_read(shard, head // 2, limit=100_000)
        assert page.lost == 0
        assert [e.seq for e in page.events] == list(range(head // 2 + 1, head + 1))
        assert queue.log_read(shard, 0, limit=1).lost > 0
        queue.log_trim(shard, head)  # everything: the numbering goes on
    make_events(queue, topic, 3, start=300)
    after = log_events(queue, topic)
    assert all(seq > 1 for _, _, seq in after)


def test_a_purged_topic_keeps_its_log_shards(queue: chronoq.Queue, topic: str) -> None:
    make_events(queue, topic, 10)
    queue.purge(topic)
    assert topic not in queue.topics()
    names = {shard.name for shard in queue.log_shards()}
    assert {shard.name for shard in queue.log_shards(topic)} <= names
    deletes = [e for e in log_events(queue).values() if e.topic == topic and e.event == "delete"]
    assert len(deletes) == 2  # the two nacked jobs were still there


def test_jobs_pages_cover_every_job_of_the_topic(queue: chronoq.Queue, topic: str) -> None:
    queue.put_many(topic, [chronoq.Job(n, id=f"j{n}", delay=60 * (n % 2)) for n in range(1500)])
    [leased] = queue.reserve(topic)
    seen = {}
    for shard in range(queue.shards):
        cursor = None
        while True:
            page = queue.jobs(topic, shard=shard, cursor=cursor, limit=400)
            seen.update({job.id: job for job in page.jobs})
            if (cursor := page.cursor) is None:
                break
    assert len(seen) == 1500
    assert seen[leased.id].state == "reserved"
    assert {job.state for job in seen.values()} == {"delayed", "ready", "reserved"}
    assert seen["j3"].payload == 3 and seen["j3"].due_at > seen["j2"].due_at


def test_bad_arguments_are_refused(queue: chronoq.Queue, topic: str) -> None:
    [shard] = queue.log_shards(topic)[:1]
    with pytest.raises(InvalidInput, match="seq"):
        queue.log_read(shard, -1)
    with pytest.raises(InvalidInput, match="LogShard"):
        queue.log_read("events")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        queue.log_read(LogShard("x", "nope", 99))
    with pytest.raises(InvalidInput, match="limit"):
        queue.log_read(shard, 0, limit=0)
    with pytest.raises(InvalidInput, match="shard"):
        queue.jobs(topic, shard=queue.shards)
    with pytest.raises(InvalidInput, match="topic"):
        queue.log_shards("bad topic")


def test_a_read_ends_at_a_hole_and_the_next_reports_it(sqlite_url: str, tmp_path: Path) -> None:
    with chronoq.connect(sqlite_url) as q:
        make_events(q, "t", 10)  # seqs 1..30
    with sqlite3.connect(tmp_path / "chronoq.db") as db:
        db.execute("DELETE FROM events WHERE seq BETWEEN 11 AND 15")
    with chronoq.connect(sqlite_url) as q:
        [shard] = q.log_shards()
        first = q.log_read(shard, 0)
        assert [e.seq for e in first.events] == list(range(1, 11)) and first.upto == 10
        second = q.log_read(shard, first.upto)
        assert second.lost == 5 and second.events[0].seq == 16 and second.upto == 30
        # filtered by topic, a read that finds every event asked for is complete to the head
        only = q.log_read(LogShard(shard.name, "nope", 0), 0)
        assert (only.events, only.upto, only.head) == ([], 30, 30)


def test_the_head_is_read_without_events(queue: chronoq.Queue, topic: str) -> None:
    for shard in queue.log_shards(topic):
        assert queue.log_head(shard) == 0
    make_events(queue, topic, 30)
    for shard in queue.log_shards(topic):
        assert queue.log_head(shard) == queue.log_read(shard, 0, limit=100_000).events[-1].seq
