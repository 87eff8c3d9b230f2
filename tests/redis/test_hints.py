"""The reserve hints of a sharded topic (hints.py): which shards a reserve
looks at, and why a reply must not hide a mark that overtook it."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import chronoq
from chronoq import Job
from chronoq.backends.redis import hints as hints_module
from chronoq.backends.redis.hints import ShardHints

from ..redis_server import RedisServer


def test_a_shard_seen_empty_is_left_alone_until_marked() -> None:
    hints = ShardHints(4)
    assert len(hints.due("t")) == 4  # none seen yet: all due
    stamp = hints.stamp("t", 2)
    hints.seen("t", 2, leased=0, asked=1, wake_s=-1, stamp=stamp)
    assert 2 not in hints.due("t")
    assert hints.next_wake("t") is not None  # the other shards, never seen
    hints.mark("t", 2)
    assert 2 in hints.due("t")


def test_a_reply_overtaken_by_a_mark_leaves_the_shard_due() -> None:
    """A reserve sent before a put, its "empty" reply read after the put's
    token marked the shard: the shard stays due for the next reserve."""
    hints = ShardHints(4)
    stamp = hints.stamp("t", 1)  # the reserve is sent
    hints.mark("t", 1)  # a put's token rings
    hints.seen("t", 1, leased=0, asked=1, wake_s=-1, stamp=stamp)  # the old reply
    assert 1 in hints.due("t")
    # likewise a reply that named a later due time
    stamp = hints.stamp("t", 3)
    hints.mark("t", 3)
    hints.seen("t", 3, leased=0, asked=1, wake_s=5.0, stamp=stamp)
    assert 3 in hints.due("t")


def test_a_shard_that_gave_jobs_is_looked_at_again_after_the_others() -> None:
    hints = ShardHints(3)
    for shard in (0, 1, 2):
        hints.seen("t", shard, leased=0, asked=1, wake_s=0.0, stamp=hints.stamp("t", shard))
    hints.seen("t", 1, leased=1, asked=1, wake_s=-1, stamp=hints.stamp("t", 1))
    assert hints.due("t")[-1] == 1


def test_a_far_change_does_not_hide_a_shard_from_a_consumer_that_polls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shard whose next known change is an hour away is still looked at
    IDLE_RECHECK_S after the last look (a job put there by another process
    sends a token that only a waiting consumer hears); a waiting consumer
    still sleeps until that change."""
    monkeypatch.setattr(hints_module, "IDLE_RECHECK_S", 0.05)
    hints = ShardHints(2)
    for shard in (0, 1):
        hints.seen("t", shard, leased=0, asked=1, wake_s=3600.0, stamp=hints.stamp("t", shard))
    assert hints.due("t") == []
    wake = hints.next_wake("t")
    assert wake is not None and wake > 3500
    time.sleep(0.06)
    assert sorted(hints.due("t")) == [0, 1]
    assert (hints.next_wake("t") or 0) > 3500


def test_a_polling_consumer_sees_a_job_put_by_another_queue_behind_a_far_one(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue]
) -> None:
    """On 4 shards of one server: each shard holds a job delayed by an hour;
    another Queue puts a ready job; a consumer that polls (no wait) gets it
    within about IDLE_RECHECK_S, not in an hour."""
    url = f"{server.url}?shards=4"
    consumer, producer = open_queue(url), open_queue(url)
    ids = {}
    n = 0
    while len(ids) < 4:
        ids.setdefault(consumer.shard_of(f"far{n}"), f"far{n}")
        n += 1
    producer.put_many("poll", [Job(None, id=i, delay=3600) for i in ids.values()])
    assert consumer.reserve("poll") == []  # every shard seen: next change in an hour
    producer.put("poll", "now", id="ready")
    started = time.monotonic()
    while not (jobs := consumer.reserve("poll")):
        assert time.monotonic() - started < hints_module.IDLE_RECHECK_S + 5
        time.sleep(0.02)
    assert [job.id for job in jobs] == ["ready"]
