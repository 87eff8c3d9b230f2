"""The Redis backend's packed records, spliced leases, inline events, skiplist
batches and streamed put_many calls, in every combination a job can take; and
what a failure half-way leaves: a put_many that fails while packing writes
nothing, a timed-out call is not sent again, a stale index entry is dropped."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import chronoq
from chronoq import Job
from chronoq.errors import BackendUnavailable
from chronoq.states import State

from ..children import all_events
from .conftest import ServerFactory

Q = Callable[[str], chronoq.Queue]

# ids of every stored form: a generated ULID (None), text of 1 and 256 characters,
# a 26-character text that is not a canonical ULID, the largest canonical ULID
IDS = [None, "x", "y" * 256, "01arz3ndektsv4rrffq69g5fav", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"]


def keys(topic: str, shard: int = 0) -> dict[str, str]:
    tag = f"chronoq:{{{topic}:{shard}}}:"
    return {part: tag + part for part in ("jobs", "delayed", "ready", "leased", "dead", "forget")}


def stray_members(raw: Any, topic: str, shard: int = 0) -> list[bytes]:
    """Members of the shard's sorted sets that start with \\1 (the skiplist trick's)."""
    out = []
    for part in ("delayed", "ready", "leased", "dead", "forget"):
        out += [m for m in raw.zrange(keys(topic, shard)[part], 0, -1) if m[:1] == b"\x01"]
    return out


@contextlib.contextmanager
def busy_server(raw: Any, seconds: float = 0.6) -> Iterator[None]:
    """Redis busy in a script for ``seconds``: a client's read times out meanwhile."""
    script = (
        "local t0 = redis.call('TIME') local s = t0[1] + t0[2] / 1e6 "
        "while true do local t = redis.call('TIME') "
        f"if t[1] + t[2] / 1e6 - s > {seconds} then return 1 end end"
    )
    busy = threading.Thread(target=raw.eval, args=(script, 0))
    busy.start()
    time.sleep(0.05)
    try:
        yield
    finally:
        busy.join()


# -- bugs ---------------------------------------------------------------------------------


def test_a_ttr_over_49_days_is_accepted(make_server: ServerFactory, open_queue: Q) -> None:
    """Validation accepts a ttr up to ten years (SQLite stores it); the Redis
    record packs it in 4 bytes (client _U32 and Lua 'I4'): struct.error."""
    q = open_queue(make_server().url)
    ttr = 50 * 86400  # 4,320,000,000 ms > 2^32 - 1
    assert q.put("t", 1, id="long", ttr=ttr).created
    [job] = q.reserve("t")
    assert job.ttr == ttr


def test_every_valid_job_packs_so_a_put_many_never_stops_half_way(
    make_server: ServerFactory, open_queue: Q
) -> None:
    """put_many sends each call while it packs the next: that is safe because a
    job that passed validation always packs. Every field at its limit, in one
    batch of several calls, goes through and reads back."""
    q = open_queue(make_server().url)
    ten_years = 10 * 365 * 24 * 3600
    limits = [
        Job("ttr", id="ttr", ttr=ten_years, max_attempts=1_000_000, unique_for=ten_years),
        Job("prio-hi", id="prio-hi", priority=1000, delay=ten_years),
        Job("prio-lo", id="prio-lo", priority=-1000, run_at=253_402_300_799.999),
        Job(b"\xff" * 1000, id="~" * 256, ttr=0.001, max_attempts=1),
    ]
    jobs = [Job(n, id=f"j-{n}") for n in range(450)] + limits
    assert all(r.created for r in q.put_many("t", jobs))
    for job in limits:
        assert job.id is not None
        info = q.get("t", job.id)
        assert info is not None and info.payload == job.payload
        assert (info.priority, info.max_attempts) == (job.priority, job.max_attempts)
        assert (info.ttr, info.unique_for) == (job.ttr, job.unique_for)


def test_a_stale_ready_member_does_not_corrupt_a_reserved_record(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """A ready member of another seq than its record's (a put run twice leaves
    one) is dropped by reserve, not leased: the record stays whole."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", {"k": "v"}, id="job")
    [(member, score)] = raw.zrange(keys("t")["ready"], 0, -1, withscores=True)
    seq = int.from_bytes(member[:6], "big")
    raw.zadd(keys("t")["ready"], {(seq + 1).to_bytes(6, "big") + b"job": score})
    [first] = q.reserve("t")
    assert first.payload == {"k": "v"}
    assert q.reserve("t") == []
    assert raw.zcard(keys("t")["ready"]) == 0
    info = q.get("t", "job")
    assert info is not None and (info.state, info.payload) == (State.RESERVED, {"k": "v"})
    q.ack(first)


def test_index_entries_without_a_record_are_dropped(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """Entries in ready, delayed, leased and forget whose record is gone (a call
    that failed half-way) are dropped by the upkeep, not acted on."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    k = keys("t")
    raw.zadd(k["ready"], {(1).to_bytes(6, "big") + b"ghost": 1})
    raw.zadd(k["delayed"], {b"ghost-d": 1})
    raw.zadd(k["leased"], {b"ghost-l": 1})
    raw.zadd(k["forget"], {b"ghost-f": 1})
    q.put("t", "real", id="real")
    assert [j.id for j in q.reserve("t", 10)] == ["real"]
    assert q.reserve("t", 10) == []
    for part in ("ready", "delayed", "leased", "forget"):
        assert raw.zrange(k[part], 0, -1) in ([], [b"real"]), part


def test_a_call_that_timed_out_is_not_sent_again(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """Redis may have run a call whose reply timed out (or not: the client hung
    up first): it raises BackendUnavailable and is not sent again, so a put of
    a generated id is never stored twice; putting the same ids again is safe."""
    server = make_server()
    q = open_queue(server.url + "?socket_timeout=0.4")
    raw = raw_client(server)
    q.put("t", "warm", id="warm")  # the library is loaded, the connection used
    assert [j.id for j in q.reserve("t")] == ["warm"]
    with busy_server(raw), pytest.raises(BackendUnavailable, match="Timeout"):
        q.put("t", {"k": "v"})
    # on a connection opened again: it may time out or go through
    with busy_server(raw), contextlib.suppress(BackendUnavailable):
        q.put_many("t", [Job(1, id="a"), Job(2, id="b")])
    q.put_many("t", [Job(1, id="a"), Job(2, id="b")])  # the producer's retry
    puts = Counter(e.id for e in all_events(q, "t") if e.event.value == "put")
    assert puts["a"] == puts["b"] == 1 and set(puts.values()) == {1}
    payloads = [j.payload for j in q.reserve("t", 10)]
    assert sorted(map(str, payloads)) in (["1", "2"], ["1", "2", "{'k': 'v'}"])
    assert q.reserve("t", 10) == []


# -- pinned: passing --------------------------------------------------------------------


def test_every_record_layout_round_trips_through_lease_nack_touch_ack(
    make_server: ServerFactory, open_queue: Q
) -> None:
    """Each combination of F_TTR, F_MAX, F_UF, F_ERR (a nack with an error, then
    reserved again), priority and id form: reserve's spliced record, get, the
    lease check of ack, remembering, and the events all agree."""
    q = open_queue(make_server().url)
    combos = itertools.product([30.0, 7.0], [5, 9], [0.0, 60.0], [None, "boom " * 100],
                               [0, -1000, 1000], IDS)  # fmt: skip
    for n, (ttr, max_attempts, unique_for, error, priority, job_id) in enumerate(combos):
        what = f"combo {n}: ttr={ttr} max={max_attempts} uf={unique_for} "
        what += f"err={error is not None} prio={priority} id={job_id!r:.12}"
        topic = f"c{n}"
        payload: Any = b"\x00\x01raw" if n % 2 else {"n": n, "s": "é"}
        put = q.put(
            topic,
            payload,
            id=job_id,
            priority=priority,
            ttr=ttr,
            max_attempts=max_attempts,
            unique_for=unique_for,
        )
        assert put.created, what
        [r] = q.reserve(topic)
        info = q.get(topic, put.id)
        assert info is not None and info.state is State.RESERVED, what
        assert (r.id, r.payload, r.attempts, r.priority) == (put.id, payload, 1, priority), what
        assert (r.max_attempts, r.ttr, r.due_at) == (max_attempts, ttr, put.due_at), what
        assert (r.deadline, r.created_at) == (info.deadline, info.created_at), what
        assert (info.unique_for, info.ttr, info.attempts) == (unique_for, ttr, 1), what
        expected = [("put", 0, None), ("reserve", 1, None)]
        if error is not None:
            assert q.nack(r, delay=0, error=error) is State.READY, what
            info = q.get(topic, put.id)
            assert info is not None and info.last_error == error and info.attempts == 1, what
            [r] = q.reserve(topic)
            info = q.get(topic, put.id)
            assert info is not None and info.state is State.RESERVED, what
            assert (r.payload, r.attempts, r.priority, r.ttr) == (payload, 2, priority, ttr), what
            assert (r.deadline, info.last_error, info.unique_for) == (
                info.deadline,
                error,
                unique_for,
            ), what
            expected += [("nack", 1, error), ("reserve", 2, None)]
        attempt = r.attempts
        deadline = q.touch(r, ttr=5)
        info = q.get(topic, put.id)
        assert info is not None and info.deadline == deadline, what
        assert q.ack_many([r, r]) == [put.id], what  # the second is lost
        assert q.get(topic, put.id) is None, what
        again = q.put(topic, "again", id=put.id)
        assert again.created is (unique_for == 0), what
        expected += [("touch", attempt, None), ("ack", attempt, None)]
        if unique_for == 0:
            expected.append(("put", 0, None))
        events = [e for e in all_events(q, topic) if e.id == put.id]
        got = [(e.event.value, e.attempt, e.error) for e in events]
        assert got == expected, what
        assert all(e.priority == priority for e in events[:-1]), what
        assert events[0].due_at == put.due_at, what


def test_events_past_255_attempts_for_expire_reserve_touch_and_ack(
    make_server: ServerFactory, open_queue: Q
) -> None:
    q = open_queue(make_server().url)
    for job_id in ("x", None):  # a text id and a generated one
        topic = f"t{job_id}"
        put = q.put(topic, "p", id=job_id, max_attempts=1000, priority=-5)
        for _ in range(253):
            [r] = q.reserve(topic)
            q.nack(r, delay=0)
        [r] = q.reserve(topic, ttr=0.001)  # attempt 254: its lease runs out
        assert r.attempts == 254
        time.sleep(0.02)
        [r] = q.reserve(topic, ttr=0.001)  # expire (254), reserve (255)
        assert r.attempts == 255
        time.sleep(0.02)
        [r] = q.reserve(topic)  # expire (255), reserve (256)
        assert r.attempts == 256 and r.payload == "p" and r.priority == -5
        q.touch(r)
        q.ack(r)
        events = [e for e in all_events(q, topic) if e.id == put.id]
        tail = [(e.event.value, e.attempt, e.priority) for e in events[-7:]]
        assert tail == [
            ("reserve", 254, -5),
            ("expire", 254, -5),
            ("reserve", 255, -5),
            ("expire", 255, -5),
            ("reserve", 256, -5),
            ("touch", 256, -5),
            ("ack", 256, -5),
        ]


def test_batch_zadds_leave_no_skiplist_member_and_lose_no_member(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    k = keys("t")
    q.put_many("t", [Job(n, id=f"r{n}") for n in range(5)])  # a small listpack set
    q.put_many("t", [Job(n, id=f"d{n}", delay=60) for n in range(5)])
    assert raw.object("encoding", k["ready"]) == b"listpack"
    q.put_many("t", [Job(n, id=f"r{n}") for n in range(5, 45)])  # 40 more: the trick
    q.put_many("t", [Job(n, id=f"d{n}", delay=0.3) for n in range(5, 45)])
    assert raw.object("encoding", k["ready"]) == b"skiplist"
    assert raw.object("encoding", k["delayed"]) == b"skiplist"
    assert (raw.zcard(k["ready"]), raw.zcard(k["delayed"])) == (45, 45)
    assert stray_members(raw, "t") == []
    jobs = q.reserve("t", 40)  # leases 40 in a new set: the trick on leased
    assert raw.object("encoding", k["leased"]) == b"skiplist"
    assert raw.zcard(k["leased"]) == 40 and stray_members(raw, "t") == []
    time.sleep(0.35)  # 40 delayed are due: promoted in one batch
    more = q.reserve("t", 100)
    assert sorted(j.id for j in jobs + more) == sorted(
        [f"r{n}" for n in range(45)] + [f"d{n}" for n in range(5, 45)]
    )
    assert raw.zcard(k["leased"]) == 85 and raw.zcard(k["delayed"]) == 5
    assert stray_members(raw, "t") == []
    assert q.ack_many(jobs + more) == []
    assert raw.zcard(k["leased"]) == 0 and stray_members(raw, "t") == []


def test_put_many_results_in_order_across_shards_chunks_and_a_reload(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(f"{server.url}?shards=3")
    raw = raw_client(server)
    old = {f"j-{n}": q.put("t", "old", id=f"j-{n}", delay=100).due_at for n in range(0, 900, 9)}
    raw.function_flush()  # every call finds the library missing and runs again
    jobs = [Job(n, id=f"j-{n}", delay=n % 3) for n in range(900)]
    jobs += [Job(n, id=f"j-{n}") for n in range(0, 900, 7)]  # repeated later in the batch
    jobs += [Job(n) for n in range(300)]  # generated ids
    results = q.put_many("t", jobs)
    assert len(results) == len(jobs)
    seen: dict[str, int] = dict(old)
    for job, result in zip(jobs, results, strict=True):
        if job.id is None:
            assert result.created
            continue
        assert result.id == job.id
        assert result.created is (job.id not in seen), job.id
        if job.id in seen:
            assert result.due_at == seen[job.id], job.id
        seen.setdefault(job.id, result.due_at)
    assert q.stats("t")["total"] == 900 + 300


def test_empty_inputs(make_server: ServerFactory, open_queue: Q) -> None:
    q = open_queue(f"{make_server().url}?shards=2")
    assert q.put_many("t", []) == []
    q.put("t", "d", id="dead", max_attempts=1)
    [r] = q.reserve("t")
    q.bury(r)
    assert q.ack_many([]) == []
    assert q.requeue("t", ids=[]) == 0
    assert [d.id for d in q.dead("t")] == ["dead"]
    assert q.reserve("t") == []


def test_text_and_ulid_ids_are_distinct_and_round_trip(
    make_server: ServerFactory, open_queue: Q
) -> None:
    q = open_queue(make_server().url)
    ids = [
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",  # canonical: stored in 17 bytes
        "01arz3ndektsv4rrffq69g5fav",  # the same value in lowercase: text
        "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",  # over 128 bits: text
        "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
        "00000000000000000000000000",
        "0000000000000000000000000I",  # not Crockford: text
        "!",
        "~" * 256,
        "a" * 17,
    ]
    assert all(q.put("t", job_id, id=job_id).created for job_id in ids)
    jobs = q.reserve("t", 20)
    assert sorted((j.id, j.payload) for j in jobs) == sorted((i, i) for i in ids)
    assert q.ack_many(jobs) == []
    events = all_events(q, "t")
    assert sorted(e.id for e in events if e.event.value == "ack") == sorted(ids)


def test_priority_then_due_then_put_order_with_negative_priorities(
    make_server: ServerFactory, open_queue: Q
) -> None:
    q = open_queue(make_server().url)
    q.put_many(
        "t",
        [
            Job("low", id="low", priority=-1000),
            Job("mid", id="mid"),
            Job("neg", id="neg", priority=-1),
            Job("high", id="high", priority=1000),
            Job("mid2", id="mid2"),
        ],
    )
    assert [j.id for j in q.reserve("t", 10)] == ["high", "mid", "mid2", "neg", "low"]


def test_unique_for_after_a_nack_with_error_is_remembered_then_forgotten(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", "p", id="u", unique_for=0.3, ttr=7, max_attempts=9)
    [r] = q.reserve("t")
    q.nack(r, delay=0, error="e")
    [r] = q.reserve("t")
    q.ack(r)
    assert q.get("t", "u") is None
    assert raw.zcard(keys("t")["forget"]) == 1 and raw.zcard(keys("t")["leased"]) == 0
    assert not q.put("t", "p2", id="u").created
    time.sleep(0.35)
    assert q.put("t", "p3", id="u").created
    [r] = q.reserve("t")
    assert (r.payload, r.attempts, r.ttr, r.max_attempts) == ("p3", 1, 30.0, 5)


def test_reserve_override_ttr_does_not_change_the_jobs_own(
    make_server: ServerFactory, open_queue: Q
) -> None:
    q = open_queue(make_server().url)
    q.put("t", 1, id="a", ttr=7)
    q.put("t", 2, id="b")
    before = int(time.time() * 1000)
    jobs = q.reserve("t", 2, ttr=2.5)
    assert [j.ttr for j in jobs] == [2.5, 2.5]
    for j in jobs:
        info = q.get("t", j.id)
        assert info is not None and info.deadline == j.deadline
        assert before + 2400 <= j.deadline <= before + 3500
        assert info.ttr == (7.0 if j.id == "a" else 30.0)


@pytest.mark.parametrize("count", [31, 32, 33])
def test_reserve_at_the_skiplist_batch_edge(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any], count: int
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put_many("t", [Job(n, id=f"j{n}") for n in range(count + 3)])
    jobs = q.reserve("t", count)
    assert [j.payload for j in jobs] == list(range(count))
    assert raw.zcard(keys("t")["leased"]) == count and stray_members(raw, "t") == []
    assert q.ack_many(jobs) == []
    assert q.stats("t")["total"] == 3


def test_generated_id_put_events_inline_and_not(make_server: ServerFactory, open_queue: Q) -> None:
    """put.lua packs a generated id's put event inline when priority is 0 and
    the delay fits 4 bytes; emit_event does the rest."""
    q = open_queue(make_server().url)
    month = 31 * 24 * 3600
    cases = [Job("now"), Job("soon", delay=5), Job("far", delay=month)]
    cases += [Job("prio", priority=-7), Job("prio-far", priority=3, delay=month)]
    results = q.put_many("t", cases)
    puts = {e.id: e for e in all_events(q, "t") if e.event.value == "put"}
    for job, r in zip(cases, results, strict=True):
        e = puts[r.id]
        assert (e.due_at, e.priority, e.attempt, e.error) == (r.due_at, job.priority, 0, None)
    assert puts[results[2].id].due_at - puts[results[2].id].ts_ms == month * 1000


def test_a_reserve_and_ack_of_more_than_one_chunk(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """HMGET, HSET, ZADD and HDEL of over 500 arguments go in chunks."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put_many("t", [Job(n, id=f"j{n:04}", ttr=9 if n % 2 else 30) for n in range(1200)])
    jobs = q.reserve("t", 1200)
    assert [j.payload for j in jobs] == list(range(1200))
    assert [j.ttr for j in jobs] == [9.0 if n % 2 else 30.0 for n in range(1200)]
    assert raw.zcard(keys("t")["leased"]) == 1200 and stray_members(raw, "t") == []
    assert q.ack_many(jobs + jobs[:3]) == [j.id for j in jobs[:3]]
    assert raw.hlen(keys("t")["jobs"]) == 0 and raw.zcard(keys("t")["leased"]) == 0
