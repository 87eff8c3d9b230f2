"""The reserve hints of a sharded topic (hints.py): which shards a reserve
looks at, and why a reply must not hide a mark that overtook it."""

from __future__ import annotations

from chronoq.backends.redis.hints import ShardHints


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
