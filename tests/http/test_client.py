"""Every method of the HTTP clients against a real server on each backend,
through ``Client`` and ``AsyncClient`` in turn: each returns what the
``Queue`` method of the same name returns."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import chronoq.http
from chronoq import Forecast, Job, JobInfo, JobLease, PutResult, Reservation, State
from chronoq.backoff import Backoff
from chronoq.errors import InvalidInput, LeaseLost
from chronoq.limits import Limits, Rule


def now_ms() -> int:
    return int(time.time() * 1000)


def test_put_reserve_ack(api_client: Any, topic: str) -> None:
    before = now_ms()
    result = api_client.put(topic, {"order": 42}, id="order-42")
    assert isinstance(result, PutResult)
    assert result.id == "order-42" and result.created and before - 5 <= result.due_at
    again = api_client.put(topic, {"order": 43}, id="order-42")
    assert again == PutResult("order-42", False, result.due_at)
    [job] = api_client.reserve(topic, count=5)
    assert isinstance(job, Reservation)
    assert (job.topic, job.id, job.payload, job.attempts) == (topic, "order-42", {"order": 42}, 1)
    assert job.deadline >= now_ms() + 25_000 and job.ttr == 30.0 and job.max_attempts == 5
    api_client.ack(job)
    assert api_client.get(topic, "order-42") is None
    with pytest.raises(LeaseLost) as lost:
        api_client.ack(job)
    assert (lost.value.topic, lost.value.job_id) == (topic, "order-42")


def test_put_keeps_every_field(api_client: Any, topic: str) -> None:
    result = api_client.put(
        topic, [1, "two"], delay=60, id="f", priority=7, ttr=0.5, max_attempts=3, unique_for=9.5
    )
    info = api_client.get(topic, "f")
    assert isinstance(info, JobInfo)
    assert (info.state, info.payload, info.priority, info.ttr) == (
        State.DELAYED,
        [1, "two"],
        7,
        0.5,
    )
    assert (info.max_attempts, info.unique_for, info.attempts) == (3, 9.5, 0)
    assert info.due_at == result.due_at and info.due_at - info.created_at == 60_000
    assert info.last_error is None and info.deadline is None and info.group is None


def test_a_group_goes_over_http_both_ways(api_client: Any, topic: str) -> None:
    api_client.put(topic, 1, id="g", group="tenant-42")
    api_client.put_many(topic, [Job(2, id="h", group="tenant-7"), Job(3, id="i")])
    assert api_client.get(topic, "g").group == "tenant-42"
    jobs = {job.id: job.group for job in api_client.reserve(topic, count=3)}
    assert jobs == {"g": "tenant-42", "h": "tenant-7", "i": None}
    with pytest.raises(InvalidInput, match="group"):
        api_client.put(topic, 4, group="not a group")


def test_put_run_at_and_replace(api_client: Any, topic: str) -> None:
    at = datetime(2100, 1, 2, 3, 4, 5, 678_000)  # naive: UTC
    assert api_client.put(topic, 1, run_at=at, id="a").due_at == int(
        at.replace(tzinfo=UTC).timestamp() * 1000
    )
    assert api_client.put(topic, 2, run_at=4_102_444_800.25, id="b").due_at == 4_102_444_800_250
    replaced = api_client.put(topic, 3, id="a", replace=True)
    assert replaced.created and replaced.due_at <= now_ms()
    assert api_client.get(topic, "a").payload == 3
    assert api_client.put(topic, 4, run_at=datetime(1960, 1, 1), id="c").due_at <= now_ms()


def test_generated_ids(api_client: Any, topic: str) -> None:
    first, second = api_client.put(topic, 1), api_client.put(topic, 2)
    assert first.created and second.created and first.id < second.id


def test_binary_payloads_round_trip(api_client: Any, topic: str) -> None:
    raw = bytes(range(256))
    api_client.put(topic, raw, id="bin")
    api_client.put_many(topic, [Job(bytearray(b"\x00\x01"), id="arr"), Job(b"", id="empty")])
    assert api_client.get(topic, "bin").payload == raw
    jobs = {job.id: job.payload for job in api_client.reserve(topic, 3)}
    assert jobs == {"bin": raw, "arr": b"\x00\x01", "empty": b""}


def test_put_many_in_order_with_dedupe(api_client: Any, topic: str) -> None:
    api_client.put(topic, "old", id="j1")
    results = api_client.put_many(
        topic, [Job(i, id=f"j{i}", priority=i) for i in range(3)] + [Job("generated")]
    )
    assert [(r.id, r.created) for r in results[:3]] == [("j0", True), ("j1", False), ("j2", True)]
    assert results[3].created and len(results) == 4
    assert api_client.put_many(topic, []) == []
    replaced = api_client.put_many(topic, [Job("new", id="j1")], replace=True)
    assert replaced[0].created and api_client.get(topic, "j1").payload == "new"


def test_ack_many_across_topics(api_client: Any, topic: str) -> None:
    other = topic + "-other"
    for t in (topic, other):
        api_client.put_many(t, [Job(i, id=f"x{i}") for i in range(3)])
    jobs = api_client.reserve(topic, 3) + api_client.reserve(other, 3)
    stale = JobLease(topic, "x0", "stale-lease")
    assert api_client.ack_many([*jobs[1:], stale]) == ["x0"]
    assert api_client.ack_many([]) == []
    assert api_client.ack_many([jobs[0]]) == []
    assert api_client.stats(topic)["total"] == 0 and api_client.stats(other)["total"] == 0


def test_lease_calls(api_client: Any, topic: str) -> None:
    for name in "abcde":
        api_client.put(topic, name, id=name, max_attempts=2)
    jobs = {job.id: job for job in api_client.reserve(topic, 5, ttr=60)}
    assert jobs["a"].deadline >= now_ms() + 55_000
    assert api_client.nack(jobs["a"], delay=60, error="try later") is State.DELAYED
    assert api_client.get(topic, "a").last_error == "try later"
    deadline = api_client.touch(jobs["b"], ttr=120)
    assert isinstance(deadline, int) and deadline > jobs["b"].deadline
    assert api_client.touch(topic, "b", jobs["b"].lease) > 0  # by topic, id and lease
    assert api_client.bury(jobs["c"], error=ValueError("bad payload")) is None
    assert api_client.release(topic, "d", jobs["d"].lease, error="shutting down") is None
    assert api_client.get(topic, "d").state is State.READY
    assert api_client.nack(topic, "e", jobs["e"].lease, delay=0) is State.READY
    [again] = [job for job in api_client.reserve(topic, 5) if job.id == "e"]
    assert api_client.nack(again) is State.DEAD  # its second attempt of two
    for call in (api_client.ack, api_client.bury, api_client.release):
        with pytest.raises(LeaseLost):
            call(jobs["a"])


def test_by_id_calls(api_client: Any, topic: str) -> None:
    api_client.put(topic, 1, id="later", delay=3600)
    assert api_client.reschedule(topic, "later", delay=0)
    assert api_client.get(topic, "later").state is State.READY
    assert api_client.reschedule(topic, "later", run_at=datetime(2100, 1, 1))
    assert api_client.get(topic, "later").due_at == 4_102_444_800_000
    assert not api_client.reschedule(topic, "missing", delay=1)
    assert api_client.delete(topic, "later") is True
    assert api_client.delete(topic, "later") is False
    assert api_client.get(topic, "later") is None


@pytest.mark.parametrize("job_id", ["a/b", "a?b#c%d", ".a", "..b", "x%2Fy", "~!$&'()*+,;=:@"])
def test_ids_with_url_characters(api_client: Any, topic: str, job_id: str) -> None:
    api_client.put(topic, 1, id=job_id, delay=3600)
    assert api_client.get(topic, job_id).id == job_id
    assert api_client.reschedule(topic, job_id, delay=0)
    [job] = api_client.reserve(topic)
    api_client.touch(job)
    api_client.ack(job)
    assert api_client.delete(topic, job_id) is False


def test_topic_wide_calls(api_client: Any, topic: str) -> None:
    for name in "abc":
        api_client.put(topic, name, id=name, max_attempts=1)
    api_client.put(topic, "d", id="d", delay=3600)
    for job in api_client.reserve(topic, 2):
        api_client.nack(job, error="boom")  # the last attempt: dead
    stats = api_client.stats(topic)
    assert {k: stats[k] for k in ("delayed", "ready", "reserved", "dead", "total", "paused")} == {
        "delayed": 1, "ready": 1, "reserved": 0, "dead": 2, "total": 4, "paused": False,
    }  # fmt: skip
    assert topic in api_client.topics()
    dead = api_client.dead(topic, limit=1)
    assert len(dead) == 1 and dead[0].state is State.DEAD and dead[0].last_error == "boom"
    assert [job.id for job in api_client.dead(topic)] == ["a", "b"]
    assert api_client.requeue(topic, ["a"]) == 1
    assert api_client.requeue(topic) == 1
    assert api_client.dead(topic) == []
    api_client.pause(topic)
    api_client.pause(topic)  # again: still paused
    assert api_client.stats(topic)["paused"] is True
    assert api_client.reserve(topic, wait=0.1) == []
    api_client.resume(topic)
    assert len(api_client.reserve(topic, 10)) == 3
    assert api_client.purge(topic) == 4
    assert api_client.stats(topic)["total"] == 0


def test_stats_per_shard_as_the_queue_gives_them(api_client: Any, topic: str) -> None:
    api_client.put(topic, 1, delay=3600)
    stats = api_client.stats(topic, per_shard=True)
    assert [shard["delayed"] for shard in stats["shards"]] in ([1], [1, 0], [0, 1])
    assert sum(shard["delayed"] for shard in stats["shards"]) == stats["delayed"] == 1
    assert "shards" not in api_client.stats(topic)


def test_a_nack_takes_the_servers_backoff_not_one_of_its_own(api_client: Any, topic: str) -> None:
    api_client.put(topic, 1)
    (job,) = api_client.reserve(topic)
    with pytest.raises(InvalidInput, match="server's backoff"):
        api_client.nack(job, backoff=Backoff(base=1))
    assert api_client.nack(job) is State.DELAYED  # the lease is still live


def test_context_manager_and_repr(server: Any) -> None:
    with chronoq.http.Client(server.url + "/", token="secret") as client:
        assert client.url == server.url
        assert repr(client) == f"<chronoq.http.Client {server.url}>"
        assert "secret" not in repr(client)
        assert client.topics() == []


def test_forecast_as_the_queue_gives_it(api_client: Any, topic: str) -> None:
    for name, hours in (("a", 0.4), ("b", 0.7), ("c", 1.4), ("d", 26.0)):
        api_client.put(topic, name, id=name, delay=hours * 3600)
    found = api_client.forecast(topic, until=time.time() + 2 * 3600)
    assert isinstance(found, Forecast)
    assert (found.topic, found.step, found.counts, found.later) == (topic, 3600.0, (2, 1), 1)
    assert abs(found.start - now_ms()) < 60_000
    at = datetime.now(UTC) + timedelta(hours=2)
    assert api_client.forecast(topic, until=at, step=1800).counts == (1, 1, 1, 0)
    with pytest.raises(InvalidInput, match="step must be at least 1 s"):
        api_client.forecast(topic, until=at, step=0.5)  # checked by the client, as by Queue
    with pytest.raises(InvalidInput, match="until must be later than now"):
        api_client.forecast(topic, until=time.time() - 60)  # by the server's store
    with pytest.raises(InvalidInput, match="at most 10000 steps"):
        api_client.forecast(topic, until=time.time() + 20_000, step=1)


def test_limits_and_groups_as_the_queue_gives_them(api_client: Any, topic: str) -> None:
    assert api_client.limits(topic) == Limits(topic)
    limits = api_client.set_limits(topic, rate=200, burst=20, group_concurrency=2)
    assert limits.topic_rule == Rule(200.0, None, 20, None)
    assert limits.default == Rule(None, None, None, 2)
    limits = api_client.set_limits(topic, group="tenant-42", rate=5, per=60)
    assert dict(limits.groups) == {"tenant-42": Rule(5.0, 60.0, None, None)}
    assert api_client.limits(topic) == limits
    with pytest.raises(InvalidInput, match="give them without group="):
        api_client.set_limits(topic, group="tenant-42", group_rate=5)
    api_client.put_many(topic, [Job(n, group="tenant-42") for n in range(3)])
    api_client.put_many(topic, [Job(n, group="tenant-7") for n in range(3)])
    api_client.pause(topic, group="tenant-7")
    groups = {g["group"]: g for g in api_client.stats(topic, groups=True)["groups"]}
    assert groups["tenant-7"] == {"group": "tenant-7", "ready": 3, "reserved": 0, "paused": True}
    jobs = api_client.reserve(topic, count=10)
    assert {job.group for job in jobs} == {"tenant-42"} and 1 <= len(jobs) <= 2  # its leases
    api_client.resume(topic, group="tenant-7")
    assert "tenant-7" in {job.group for job in api_client.reserve(topic, count=10)}
    assert not api_client.clear_limits(topic, group="tenant-42").groups
    assert api_client.clear_limits(topic) == Limits(topic)
