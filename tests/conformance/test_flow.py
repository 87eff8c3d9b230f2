"""Conformance: flow control (docs/contract.md §10). Turns among groups
(fairness), the topic's and the groups' limits held in the reserve's own
step, a slot freed when a lease ends, the wait for the next token, pause of
one group, counts by group. On every backend, through both store facades."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Job
from chronoq.errors import InvalidInput
from chronoq.limits import Limits, Rule

from ..aio_bridge import BridgedQueue
from .test_guarantees import WAKE_BOUND_S

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def flow(queue: Any, store_url: str) -> Iterator[Any]:
    """The queue, with its topics in one shard: the store's own step holds
    every limit and turn exactly (a sharded topic's: test_sharded_*)."""
    if queue.shards == 1:
        yield queue
        return
    url = f"{store_url}&shards=1"
    q = BridgedQueue(lambda: chronoq.aio.connect(url)) if isinstance(queue, BridgedQueue) else None
    q = q or chronoq.connect(url)
    yield q
    q.close()


@pytest.fixture
def sharded(queue: Any, store_url: str) -> Iterator[Any]:
    """The queue with its topics over 4 shards (Redis), each enforcing a share."""
    if not store_url.startswith("redis"):
        pytest.skip("a SQLite store keeps a topic in one shard")
    url = f"{store_url}&shards=4"
    q = BridgedQueue(lambda: chronoq.aio.connect(url)) if isinstance(queue, BridgedQueue) else None
    q = q or chronoq.connect(url)
    yield q
    q.close()


def _drain(queue: Any, topic: str, count: int = 1) -> list[Any]:
    jobs = queue.reserve(topic, count)
    for job in jobs:
        queue.ack(job)
    return jobs


def test_every_small_group_is_served_within_the_first_turns_and_at_its_share(
    flow: Any, topic: str
) -> None:
    """One group with 99% of 100,000 due jobs and 100 groups of 10: each small
    group's first job is among the first 101 handed out, and its k-th among
    the first 101·k: a turn each while it has jobs."""
    flow.put_many(topic, [Job(i, group="big") for i in range(99_000)])
    flow.put_many(topic, [Job(i, group=f"small-{i % 100}") for i in range(1000)])
    served: dict[str, list[int]] = {}
    for turn in range(101 * 10):
        (job,) = _drain(flow, topic)
        served.setdefault(job.group, []).append(turn)
    small = {name: turns for name, turns in served.items() if name != "big"}
    assert len(small) == 100
    for turns in small.values():
        assert len(turns) == 10
        assert all(turn < 101 * k for k, turn in enumerate(turns, 1)), turns
    assert len(served["big"]) == 10  # one turn in every 101, no more, no less


def test_a_reserve_of_many_spreads_over_the_groups(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i, group=f"g{i % 5}") for i in range(50)])
    jobs = flow.reserve(topic, 5)
    assert sorted(job.group for job in jobs) == ["g0", "g1", "g2", "g3", "g4"]


def test_ungrouped_jobs_take_their_turn_as_one_group(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i) for i in range(20)])
    flow.put_many(topic, [Job(i, group="tenant") for i in range(2)])
    groups = [job.group for job in flow.reserve(topic, 4)]
    assert Counter(groups) == {None: 2, "tenant": 2}


def test_within_a_group_priority_then_due_time_then_put_order(flow: Any, topic: str) -> None:
    flow.put(topic, "low", id="low", group="g")
    flow.put(topic, "high", id="high", group="g", priority=5)
    flow.put(topic, "next", id="next", group="g")
    flow.put(topic, "other", id="other", group="h")
    order = [job.id for job in (_drain(flow, topic)[0] for _ in range(4))]
    assert [i for i in order if i != "other"] == ["high", "low", "next"]


def test_limits_are_set_field_by_field_read_and_cleared(flow: Any, topic: str) -> None:
    assert flow.limits(topic) == Limits(topic)
    flow.set_limits(topic, rate=200, per=1.0, burst=20, concurrency=50)
    flow.set_limits(topic, group_rate=5, group_concurrency=2)
    limits = flow.set_limits(topic, group="tenant-42", rate=50, concurrency=10)
    assert limits == flow.limits(topic)
    assert limits.topic_rule == Rule(200.0, 1.0, 20, 50)
    assert limits.default == Rule(5.0, None, None, 2)
    assert dict(limits.groups) == {"tenant-42": Rule(50.0, None, None, 10)}
    assert limits.of_group("tenant-42") == Rule(50.0, None, None, 10)
    assert limits.of_group("other") == Rule(5.0, None, None, 2)
    flow.set_limits(topic, concurrency=40)  # keeps the rest
    assert flow.limits(topic).topic_rule == Rule(200.0, 1.0, 20, 40)
    cleared = flow.clear_limits(topic, group="tenant-42")
    assert not cleared.groups and cleared.topic_rule == Rule(200.0, 1.0, 20, 40)
    assert flow.clear_limits(topic) == Limits(topic)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give at least one limit"),
        ({"group": "g", "group_rate": 5}, "give them without group="),
        ({"rate": -1}, "rate must be a number"),
        ({"rate": float("nan")}, "rate must be a number"),
        ({"per": 0}, "per must be seconds"),
        ({"burst": 0}, "burst"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"group": "no spaces", "rate": 1}, "group"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(
    queue: Any, topic: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        queue.set_limits(topic, **kwargs)
    assert queue.limits(topic) == Limits(topic)


def test_topic_concurrency_holds_and_a_lease_that_ends_frees_its_slot(
    flow: Any, topic: str
) -> None:
    flow.put_many(topic, [Job(i, id=f"j{i}") for i in range(10)])
    flow.set_limits(topic, concurrency=3)
    held = flow.reserve(topic, 10)
    assert len(held) == 3
    assert flow.reserve(topic, 10) == []
    flow.ack(held[0])
    (again,) = flow.reserve(topic, 10)
    flow.nack(held[1], delay=60)
    flow.bury(held[2], error="no")
    assert len(flow.reserve(topic, 10)) == 2
    flow.release(again)
    assert len(flow.reserve(topic, 10)) == 1  # the slot the release freed
    assert flow.reserve(topic, 10) == []


def test_group_concurrency_holds_each_group_alone(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i, group=f"g{i % 3}") for i in range(30)])
    flow.set_limits(topic, group_concurrency=2)
    flow.set_limits(topic, group="g2", concurrency=4)
    jobs = flow.reserve(topic, 30)
    assert Counter(job.group for job in jobs) == {"g0": 2, "g1": 2, "g2": 4}
    assert flow.reserve(topic, 30) == []
    flow.ack(jobs[0])
    (job,) = flow.reserve(topic, 30)
    assert job.group == jobs[0].group


def test_an_expired_lease_frees_its_slot(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i) for i in range(2)])
    flow.set_limits(topic, concurrency=1)
    assert len(flow.reserve(topic, 2, ttr=0.2)) == 1
    assert flow.reserve(topic, 2) == []
    time.sleep(0.3)
    assert len(flow.reserve(topic, 2)) == 1


def test_a_consumer_held_by_a_full_topic_is_woken_when_a_slot_frees(
    flow: Any, store_url: str, topic: str
) -> None:
    flow.put_many(topic, [Job(i) for i in range(2)])
    flow.set_limits(topic, concurrency=1)
    (held,) = flow.reserve(topic)
    with chronoq.connect(store_url) as other:
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.extend(other.reserve(topic, wait=10)))
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive() and not got
        acked_at = time.monotonic()
        flow.ack(held)
        waiter.join(10)
        assert len(got) == 1 and time.monotonic() - acked_at < WAKE_BOUND_S


def test_a_group_rate_holds_that_group_and_not_the_others(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i, group="slow") for i in range(5)])
    flow.put_many(topic, [Job(i, group="fast") for i in range(5)])
    flow.set_limits(topic, group="slow", rate=1, per=60, burst=2)
    assert Counter(job.group for job in flow.reserve(topic, 10)) == {"slow": 2, "fast": 5}
    assert flow.reserve(topic, 10) == []


def test_a_rate_is_neither_exceeded_nor_left_unused(flow: Any, topic: str) -> None:
    """100 a second with a burst of 10, over 10 s: 950 to 1,010 jobs handed out."""
    flow.put_many(topic, [Job(i) for i in range(1500)])
    flow.set_limits(topic, rate=100, burst=10)
    started = 0
    begin = time.monotonic()
    while (left := 10.0 - (time.monotonic() - begin)) > 0:
        jobs = flow.reserve(topic, 50, wait=left)
        if time.monotonic() - begin <= 10.0:
            started += len(jobs)
        for job in jobs:
            flow.ack(job)
    assert 950 <= started <= 1010, started


def test_a_consumer_waits_for_the_next_token_not_for_its_wait(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i) for i in range(3)])
    flow.set_limits(topic, rate=2, burst=1)  # a token each 0.5 s
    assert len(flow.reserve(topic, 3)) == 1
    begin = time.monotonic()
    assert len(flow.reserve(topic, 3, wait=10)) == 1
    assert 0.3 < time.monotonic() - begin < 0.5 + WAKE_BOUND_S


def test_pausing_a_group_leaves_the_others_flowing(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i, group="paused") for i in range(3)])
    flow.put_many(topic, [Job(i, group="flowing") for i in range(3)])
    flow.pause(topic, group="paused")
    jobs = flow.reserve(topic, 10)
    assert Counter(job.group for job in jobs) == {"flowing": 3}
    by_group = {g["group"]: g for g in flow.stats(topic, groups=True)["groups"]}
    assert by_group["paused"]["paused"] and by_group["paused"]["ready"] == 3
    assert not flow.stats(topic)["paused"]
    flow.resume(topic, group="paused")
    assert Counter(job.group for job in flow.reserve(topic, 10)) == {"paused": 3}


def test_stats_by_group_show_the_largest_backlogs_first(flow: Any, topic: str) -> None:
    flow.put_many(topic, [Job(i, group="big") for i in range(5)])
    flow.put_many(topic, [Job(i, group="small") for i in range(2)])
    flow.put_many(topic, [Job(i, delay=3600) for i in range(3)])  # none due: not shown
    flow.pause(topic, group="idle")
    (job,) = flow.reserve(topic)
    assert job.group == "big"  # never served, both: the first seen
    assert flow.stats(topic, groups=True)["groups"] == [
        {"group": "big", "ready": 4, "reserved": 1, "paused": False},
        {"group": "small", "ready": 2, "reserved": 0, "paused": False},
        {"group": "idle", "ready": 0, "reserved": 0, "paused": True},
    ]
    assert flow.stats(topic)["ready"] == 6


def test_a_topic_without_groups_or_limits_is_served_as_before(flow: Any, topic: str) -> None:
    flow.put(topic, "b", id="b")
    flow.put(topic, "a", id="a", priority=1)
    assert [job.id for job in flow.reserve(topic, 2)] == ["a", "b"]
    assert "groups" not in flow.stats(topic)


# -- a sharded topic: each shard enforces its share (docs/contract.md §10) -------------


def _by_shard(queue: Any, jobs: list[Any]) -> dict[int, list[Any]]:
    shards: dict[int, list[Any]] = {}
    for job in jobs:
        shards.setdefault(queue.shard_of(job.id), []).append(job)
    return shards


def test_sharded_turns_hold_within_each_shard(sharded: Any, topic: str) -> None:
    """One group of 200 jobs and 20 of 2: in each shard, each group there is
    served once before any is served twice."""
    sharded.put_many(topic, [Job(i, group="big") for i in range(200)])
    sharded.put_many(topic, [Job(i, group=f"small-{i % 20}") for i in range(40)])
    served = [job for _ in range(240) for job in _drain(sharded, topic)]
    assert len(served) == 240
    for jobs in _by_shard(sharded, served).values():
        groups = {job.group for job in jobs}
        first_round = [job.group for job in jobs[: len(groups)]]
        assert sorted(first_round) == sorted(groups)


def test_sharded_concurrency_is_split_over_the_shards(sharded: Any, topic: str) -> None:
    with pytest.raises(InvalidInput, match="below the topic's 4 shards"):
        sharded.set_limits(topic, concurrency=3)
    sharded.put_many(topic, [Job(i, id=f"j{i}") for i in range(80)])
    assert all(shard["ready"] for shard in sharded.stats(topic, per_shard=True)["shards"])
    sharded.set_limits(topic, concurrency=6)  # 2, 2, 1, 1
    held = [job for _ in range(8) for job in sharded.reserve(topic, 80)]
    per_shard = sorted(len(jobs) for jobs in _by_shard(sharded, held).values())
    assert per_shard == [1, 1, 2, 2]
    sharded.ack(held[0])  # its shard's slot: a consumer waiting on the topic is woken
    begin = time.monotonic()
    (job,) = sharded.reserve(topic, 80, wait=10)
    assert sharded.shard_of(job.id) == sharded.shard_of(held[0].id)
    assert time.monotonic() - begin < WAKE_BOUND_S


def test_sharded_rate_is_split_over_the_shards(sharded: Any, topic: str) -> None:
    sharded.put_many(topic, [Job(i, id=f"j{i}") for i in range(200)])
    assert all(shard["ready"] for shard in sharded.stats(topic, per_shard=True)["shards"])
    sharded.set_limits(topic, rate=4, per=60, burst=8)  # each shard: a burst of 2
    held = [job for _ in range(12) for job in sharded.reserve(topic, 200)]
    assert sorted(len(jobs) for jobs in _by_shard(sharded, held).values()) == [2, 2, 2, 2]


def test_new_groups_join_the_end_of_the_line_and_starve_no_one(flow: Any, topic: str) -> None:
    """A stream of groups seen anew (a group per request, say) cannot keep a
    waiting group from its turns: each new one goes after it. With one new
    group a reserve, the line grows by one a round, so the waiting group's
    share shrinks as it should, but it never stops (before: 0 of 40)."""
    flow.put_many(topic, [Job(i, group="old") for i in range(100)])
    served = []
    for n in range(40):
        flow.put(topic, n, group=f"new-{n}")
        served += [job.group for job in _drain(flow, topic)]
    turns = [n for n, group in enumerate(served) if group == "old"]
    assert len(turns) >= 6, served
    # each new group served once, in the order it came, old among them
    assert [g for g in served if g != "old"] == [f"new-{n}" for n in range(40 - len(turns))]


def test_a_paused_group_keeps_its_place(flow: Any, topic: str) -> None:
    for name in ("a", "b", "c"):
        flow.put_many(topic, [Job(i, group=name) for i in range(3)])
    assert [job.group for _ in range(4) for job in _drain(flow, topic)] == ["a", "b", "c", "a"]
    flow.pause(topic, group="b")
    flow.resume(topic, group="b")
    assert [job.group for _ in range(3) for job in _drain(flow, topic)] == ["b", "c", "a"]
