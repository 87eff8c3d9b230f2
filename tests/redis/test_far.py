"""The far tier (lua/lib/7_far.lua, far_ids.py): jobs due beyond the horizon are
kept packed in time buckets, found by id, moved between the tiers by every
operation, and promoted into the near structures before they fall due, a slice
per call. The conformance suite runs with the tier forced on (tests/conftest.py,
``redis-far``); these tests look at the keys themselves."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import chronoq
from chronoq import Job
from chronoq.backends.redis.codec import id_key
from chronoq.backends.redis.far_ids import hinted
from chronoq.errors import InvalidInput
from chronoq.ids import new_id

from ..redis_server import RedisServer
from .conftest import wait_until

FAR_SLICE = 256  # lua/lib/7_far.lua
HOUR = 3600


def far_keys(raw: Any, topic: str) -> dict[str, set[str]]:
    """The far tier's keys of shard 0 of ``topic``, by part."""
    found: dict[str, set[str]] = {"pages": set(), "index": set(), "buckets": set()}
    for key in raw.scan_iter(f"chronoq:{{{topic}:0}}:far*"):
        name = key.decode()
        if name.endswith(":faridx"):
            found["index"] = {field.decode() for field in raw.hkeys(name)}
        elif name.endswith(":far"):
            found["buckets"] = {member.decode() for member in raw.zrange(name, 0, -1)}
        elif name.count(":") == 5 and ":far:" in name:  # <prefix>:{<topic>:0}:far:<start>:<page>
            found["pages"].add(name)
    return found


def test_a_generated_id_bound_far_names_its_bucket(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    one = q.put("gen", {"n": -1}, delay=HOUR)
    many = q.put_many("gen", [Job({"n": n}, delay=HOUR) for n in range(300)])
    keys = far_keys(raw, "gen")
    assert not keys["index"], "a generated id bound far needs no index entry"
    assert len(keys["buckets"]) in (1, 2) and keys["pages"]  # an hour ahead, in 1-minute buckets
    assert raw.zcard("chronoq:{gen:0}:delayed") == 0 and not raw.exists("chronoq:{gen:0}:jobs")
    ids = [r.id for r in many]
    assert ids == sorted(ids) and len(set(ids)) == 300  # one producer's ids still increase
    for n, result in [(-1, one), *enumerate(many)]:
        info = q.get("gen", result.id)
        assert info is not None and info.state is chronoq.State.DELAYED
        assert info.payload == {"n": n} and info.due_at == result.due_at
    assert q.stats("gen")["delayed"] == 301


def test_an_id_that_names_another_bucket_is_indexed(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    """Python's hint (far_ids.hinted) and Lua's reading of it agree: a ULID
    given by the producer that names the bucket of its due time is kept
    without an index entry; one that names another bucket is indexed."""
    q = open_queue(server.url)
    raw = raw_client(server)
    due_ms = (int(time.time()) + 2 * HOUR) * 1000
    due_ms -= due_ms % 60_000
    bucket = due_ms // 60_000
    named = hinted(new_id(), bucket)
    other = hinted(new_id(), bucket + 1)
    assert q.put("hint", "a", id=named, run_at=due_ms / 1000 + 30).created
    assert q.put("hint", "b", id=other, run_at=due_ms / 1000 + 30).created
    index = raw.hkeys("chronoq:{hint:0}:faridx")
    assert len(index) == 1, index
    for job_id, payload in ((named, "a"), (other, "b")):
        info = q.get("hint", job_id)
        assert info is not None and info.payload == payload
        assert not q.put("hint", "again", id=job_id, run_at=due_ms / 1000 + 30).created


@pytest.mark.parametrize("width_ms", [60_000, 3_600_000])
def test_an_element_keeps_a_generated_id_and_a_due_time_short(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    width_ms: int,
) -> None:
    """A generated id that names its bucket is kept as 13 bytes, not a length and
    17 (5 bytes less than a producer's id of 17 bytes); the due time as 2 bytes
    from the bucket's start while buckets are at most 65,536 ms wide (4 less).
    Every read decodes both forms: get, a put of the same id, reschedule, the
    listing, delete and promotion (by a consumer with a longer horizon)."""
    q = open_queue(f"{server.url}?far_bucket_ms={width_ms}&horizon_ms=1000")
    raw = raw_client(server)
    due_ms = (int(time.time()) + 3 * HOUR) * 1000
    due_ms -= due_ms % width_ms
    due_ms += width_ms // 2 + 7  # mid-bucket, off any round number
    generated = q.put("short", {"n": 1}, run_at=due_ms / 1000).id
    given = hinted(new_id(), due_ms // width_ms + 1)  # 17 bytes, naming another bucket
    assert q.put("short", {"n": 1}, id=given, run_at=due_ms / 1000).created
    elements = [
        e
        for key in raw.scan_iter("chronoq:{short:0}:far:*")
        if key.count(b":") == 5
        for e in raw.lrange(key, 0, -1)
    ]
    by_flags = {e[0]: len(e) for e in elements}
    short_due = 4 if width_ms <= 65_536 else 0
    assert set(by_flags) == {2 | short_due, 1 | short_due}  # short id; indexed
    assert by_flags[2 | short_due] == by_flags[1 | short_due] - 5
    record = 21 + len(b'{"n":1}')  # as the jobs hash holds it (2_record.lua)
    assert by_flags[1 | short_due] == 1 + 1 + 17 + record - short_due
    for job_id in (generated, given):
        info = q.get("short", job_id)
        assert info is not None and info.due_at == due_ms and info.payload == {"n": 1}
        assert not q.put("short", "again", id=job_id, run_at=due_ms / 1000).created
    assert {j.id for j in q.jobs("short").jobs} == {generated, given}
    assert {j.due_at for j in q.jobs("short").jobs} == {due_ms}
    q.reschedule("short", given, run_at=due_ms / 1000 + 1)
    info = q.get("short", given)
    assert info is not None and info.due_at == due_ms + 1000
    assert q.delete("short", generated) and q.get("short", generated) is None
    # promoted by a consumer whose horizon reaches the bucket: decoded into delayed
    wider = open_queue(f"{server.url}?far_bucket_ms={width_ms}&horizon_ms={8 * HOUR * 1000}")
    assert wider.stats("short")["delayed"] == 1
    assert not far_keys(raw, "short")["buckets"]
    assert raw.zscore("chronoq:{short:0}:delayed", id_key(given)) == due_ms + 1000
    info = wider.get("short", given)
    assert info is not None and info.due_at == due_ms + 1000 and info.payload == {"n": 1}


def test_a_producers_id_far_is_deduplicated_and_replaced(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    first = q.put("dup", {"v": 1}, id="order-1", delay=HOUR)
    again = q.put("dup", {"v": 2}, id="order-1", delay=2 * HOUR)
    assert first.created and not again.created and again.due_at == first.due_at
    got = q.put_many("dup", [Job({"v": 3}, id="order-1", delay=5), Job({"v": 4}, id="order-2")])
    assert [r.created for r in got] == [False, True]
    assert raw.hkeys("chronoq:{dup:0}:faridx") == [b"order-1"]
    # replace: far to near, then near to far
    near = q.put("dup", {"v": 5}, id="order-1", replace=True)
    assert near.created and raw.hlen("chronoq:{dup:0}:faridx") == 0
    info = q.get("dup", "order-1")
    assert info is not None and info.state is chronoq.State.READY and info.payload == {"v": 5}
    far = q.put("dup", {"v": 6}, id="order-1", delay=HOUR, replace=True)
    assert far.created and raw.hget("chronoq:{dup:0}:jobs", b"order-1") is None
    info = q.get("dup", "order-1")
    assert info is not None and info.state is chronoq.State.DELAYED and info.payload == {"v": 6}
    assert q.stats("dup")["total"] == 2


def test_reschedule_and_delete_move_jobs_between_the_tiers(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    job_id = q.put("move", "x", delay=HOUR).id
    assert q.reschedule("move", job_id, delay=3 * HOUR)  # far to far
    info = q.get("move", job_id)
    assert info is not None and info.due_at - info.created_at >= 3 * HOUR * 1000
    assert raw.hlen("chronoq:{move:0}:faridx") == 1  # its id names the old bucket
    assert q.reschedule("move", job_id, delay=0)  # far to near: ready now
    assert [j.id for j in q.reserve("move", wait=1)] == [job_id]
    assert raw.hlen("chronoq:{move:0}:faridx") == 0
    ready = q.put("move", "y", id="y").id
    assert q.reschedule("move", ready, delay=HOUR)  # near to far
    assert raw.zcard("chronoq:{move:0}:ready") == 0 and q.stats("move")["delayed"] == 1
    assert q.delete("move", ready) and not q.delete("move", ready)
    assert q.get("move", ready) is None and not far_keys(raw, "move")["buckets"]
    kept = q.put("move", "z", id="z", delay=HOUR, unique_for=HOUR)
    assert q.delete("move", "z")
    assert not q.put("move", "z", id="z", delay=HOUR).created  # remembered across the tiers
    assert kept.created
    kinds = [e.event for e in q.events("move", limit=100).events]
    assert kinds.count("reschedule") == 3 and kinds.count("delete") == 2


def test_a_far_bucket_is_promoted_before_it_falls_due(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    q = open_queue(f"{server.url}?horizon_ms=1000&far_bucket_ms=1000")
    raw = raw_client(server)
    start = (time.time_ns() // 1_000_000 // 1000 + 4) * 1000  # a bucket more than 3 s ahead
    results = q.put_many("soon", [Job(n, run_at=(start + n % 900) / 1000) for n in range(2000)])
    assert all(r.created for r in results)
    assert raw.zcard("chronoq:{soon:0}:delayed") == 0 and far_keys(raw, "soon")["buckets"]
    got: dict[str, int] = {}
    deadline = time.monotonic() + 15
    while len(got) < 2000 and time.monotonic() < deadline:
        for job in q.reserve("soon", count=100, wait=1):
            got[job.id] = time.time_ns() // 1_000_000
            assert got[job.id] >= job.due_at, "delivered before its due time"
            q.ack(job)
    assert len(got) == 2000
    # promoted a horizon ahead, in slices: the bucket was near before its start
    assert not far_keys(raw, "soon")["buckets"] and not raw.exists("chronoq:{soon:0}:farn")


def test_promotion_takes_a_slice_per_call(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    q = open_queue(f"{server.url}?horizon_ms=1000&far_bucket_ms=1000")
    raw = raw_client(server)
    start = (time.time_ns() // 1_000_000 // 1000 + 3) * 1000
    q.put_many("slice", [Job(n, run_at=start / 1000 + 0.5) for n in range(3 * FAR_SLICE)])
    wait_until(lambda: time.time_ns() // 1_000_000 >= start - 1000, what="the promotion time")
    stats = q.stats("slice")  # its upkeep promotes one slice
    assert raw.zcard("chronoq:{slice:0}:delayed") == FAR_SLICE
    assert stats["delayed"] == 3 * FAR_SLICE  # near or far, the same count
    q.stats("slice")
    q.stats("slice")
    assert raw.zcard("chronoq:{slice:0}:delayed") == 3 * FAR_SLICE
    assert not far_keys(raw, "slice")["buckets"]


def test_the_listing_sees_far_jobs_first(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue]
) -> None:
    q = open_queue(server.url)
    far = {r.id for r in q.put_many("list", [Job(n, delay=HOUR + n) for n in range(250)])}
    far.add(q.put("list", "x", id="far-user", delay=2 * HOUR).id)
    near = {r.id for r in q.put_many("list", [Job(n) for n in range(30)])}
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = q.jobs("list", cursor=cursor, limit=40)
        seen += [j.id for j in page.jobs]
        pages += 1
        if page.cursor is None:
            break
        cursor = page.cursor
    assert set(seen) == far | near and len(seen) == len(far | near)
    assert set(seen[: len(far)]) == far and pages > 2
    with pytest.raises(InvalidInput, match="bad job cursor"):
        q.jobs("list", cursor="f1.x.2")


def test_purge_removes_far_jobs_with_their_events(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put_many("purge", [Job(n, delay=HOUR) for n in range(500)])
    q.put_many("purge", [Job(n, id=f"u-{n}", delay=2 * HOUR) for n in range(10)])
    q.put("purge", "near")
    assert q.purge("purge") == 511
    assert not [k for k in raw.scan_iter("chronoq:{purge:0}:far*")]
    purged = [e for e in q.events("purge", limit=2000).events if e.event == "delete"]
    assert len(purged) == 511 and all(e.error == "purged" for e in purged)


def test_a_store_with_the_tier_off_still_promotes_its_far_jobs(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    on = open_queue(f"{server.url}?horizon_ms=1000&far_bucket_ms=1000")
    raw = raw_client(server)
    start = (time.time_ns() // 1_000_000 // 1000 + 3) * 1000
    job_id = on.put("off", "x", run_at=start / 1000 + 0.2).id
    off = open_queue(f"{server.url}?horizon_ms=off&far_bucket_ms=1000")
    assert off.get("off", job_id) is not None
    assert off.put("off", "y", delay=HOUR).created
    assert raw.zcard("chronoq:{off:0}:delayed") == 1  # no new far job
    [job] = off.reserve("off", wait=6)
    assert job.id == job_id and time.time_ns() // 1_000_000 >= job.due_at


def test_a_forecast_reads_the_count_strings_that_hold_buckets(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    """With 1 ms buckets a 30-day forecast spans 40 million buckets (625,000
    count strings): it must read those holding jobs, not walk the span (a call
    of seconds makes a cluster fail its node over)."""
    q = open_queue(f"{server.url}?horizon_ms=0&far_bucket_ms=1")
    raw = raw_client(server)
    now = time.time()
    days = range(30)
    q.put_many("wide", [Job(n, run_at=now + day * 86400 + 60) for day in days for n in range(2)])

    def mget_calls() -> int:
        return int(raw.info("commandstats").get("cmdstat_mget", {}).get("calls", 0))

    before = mget_calls()
    daily = q.forecast("wide", until=now + 30 * 86400, step=86400)
    assert mget_calls() - before == 1  # 60 jobs in 60 buckets: one MGET of their strings
    assert sum(daily.counts) + daily.later == 60 and daily.counts[1:] == (2,) * 29


def test_an_indexed_job_is_read_at_its_place_not_searched(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    """The index keeps an indexed job's place in its page (counted from the
    page's first element ever): a put of the same ids again, a get, reads one
    element each (LINDEX), not the page, also once promotion has taken
    elements off the pages' heads."""
    q = open_queue(f"{server.url}?horizon_ms=1000&far_bucket_ms=1000")
    raw = raw_client(server)
    start = (time.time_ns() // 1_000_000 // 1000 + 3) * 1000
    jobs = [Job(n, id=f"order-{n}", run_at=start / 1000 + 0.5) for n in range(3 * FAR_SLICE)]
    q.put_many("placed", jobs)

    def calls(name: str) -> int:
        return int(raw.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))

    lranges, lindexes = calls("lrange"), calls("lindex")
    assert not any(r.created for r in q.put_many("placed", jobs))
    assert (calls("lrange") - lranges, calls("lindex") - lindexes) == (0, len(jobs))
    wait_until(lambda: time.time_ns() // 1_000_000 >= start - 1000, what="the promotion time")
    q.stats("placed")  # one slice promoted: the pages' heads trimmed
    assert raw.zcard("chronoq:{placed:0}:delayed") == FAR_SLICE
    lranges = calls("lrange")
    for n in range(3 * FAR_SLICE):
        info = q.get("placed", f"order-{n}")
        assert info is not None and info.payload == n
    assert calls("lrange") == lranges


def test_a_listing_cursor_made_by_hand_is_refused_or_bounded(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    """A page past the last is refused; a listing reads a bounded number of
    elements per call even when deleted jobs leave most of them empty."""
    q = open_queue(server.url)
    raw = raw_client(server)
    ids = [r.id for r in q.put_many("tomb", [Job(n, delay=HOUR) for n in range(2000)])]
    start = int(far_keys(raw, "tomb")["buckets"].pop())
    for cursor in (f"f{start}.16.0", f"f{start}.99999.0"):
        with pytest.raises(InvalidInput, match="bad job cursor"):
            q.jobs("tomb", cursor=cursor)
    for job_id in ids[:-1]:
        q.delete("tomb", job_id)

    def lranges() -> int:
        return int(raw.info("commandstats").get("cmdstat_lrange", {}).get("calls", 0))

    seen: list[str] = []
    cursor: str | None = None
    calls = 0
    while True:
        before = lranges()
        page = q.jobs("tomb", cursor=cursor, limit=1)
        assert lranges() - before <= 4 + 16  # 4 * limit elements + a call per page
        seen += [j.id for j in page.jobs]
        calls += 1
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == [ids[-1]] and calls > 2


def test_purge_takes_a_far_bucket_a_slice_at_a_time(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chronoq.backends.redis import topicwide

    monkeypatch.setattr(topicwide, "_PURGE_BATCH", 100)
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put_many("slices", [Job(n, delay=HOUR) for n in range(1000)])  # one or two buckets
    assert len(far_keys(raw, "slices")["buckets"]) <= 2
    raw.config_resetstat()
    assert q.purge("slices") == 1000
    calls = int(raw.info("commandstats")["cmdstat_fcall"]["calls"])
    assert calls >= 1000 // 100
    assert not list(raw.scan_iter("chronoq:{slices:0}:far*"))


def test_past_due_far_jobs_of_many_buckets_count_as_ready(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue]
) -> None:
    """No consumer: 1,500 buckets fall due unpromoted (a weekend's worth of
    minutes); stats and the forecast count every one, not the first 1,000."""
    q = open_queue(f"{server.url}?horizon_ms=0&far_bucket_ms=1")
    due = time.time() + 1.0
    q.put_many("weekend", [Job(n, run_at=due + n / 1000) for n in range(1500)])
    time.sleep(2.6)
    stats = q.stats("weekend")  # its upkeep promotes a slice; the rest stay far
    assert (stats["ready"], stats["delayed"]) == (1500, 0)
    ahead = q.forecast("weekend", until=time.time() + 3600)
    assert sum(ahead.counts) + ahead.later == 0


def test_a_process_with_another_bucket_width_follows_the_stores(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue]
) -> None:
    """far_bucket_ms should be one per store; a process given another reads and
    writes with the store's, so no id or due time is misread."""
    writer = open_queue(f"{server.url}?horizon_ms=1000&far_bucket_ms=2000")
    other = open_queue(f"{server.url}?horizon_ms=1000&far_bucket_ms=1000")
    start = (time.time_ns() // 1_000_000 // 2000 + 3) * 2000
    put = writer.put_many("width", [Job(n, run_at=start / 1000 + 1.5) for n in range(20)])
    more = other.put("width", "late", run_at=start / 1000 + 1.9)
    for result in [*put, more]:
        info = other.get("width", result.id)
        assert info is not None and info.due_at == result.due_at
    # within the bucket's second half, unpromoted (a forecast promotes nothing):
    # wholly due by the caller's width, not by the store's
    wait_until(lambda: time.time_ns() // 1_000_000 >= start + 1050, what="mid-bucket")
    ahead = other.forecast("width", until=start / 1000 + 10, step=1)
    assert (sum(ahead.counts), ahead.later) == (21, 0)
    stats = other.stats("width")
    assert stats["ready"] + stats["delayed"] == 21
    got: list[str] = []
    deadline = time.monotonic() + 15
    while len(got) < 21 and time.monotonic() < deadline:
        jobs = other.reserve("width", count=21, wait=1)
        assert all(time.time_ns() // 1_000_000 >= j.due_at for j in jobs)
        got += [j.id for j in jobs]
    assert sorted(got) == sorted([r.id for r in put] + [more.id])


def test_far_jobs_take_a_fraction_of_near_memory(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Callable[..., Any]
) -> None:
    """The harness's job (bench/peers), 5,000 of them an hour ahead: used_memory
    per job, the event log included, far against near (horizon off)."""
    raw = raw_client(server)

    def per_job(url: str, topic: str) -> float:
        q = open_queue(url)
        q.put(topic, "warm-up", delay=HOUR)
        before = int(raw.info("memory")["used_memory"])
        due = time.time() + HOUR
        for k in range(5000):
            q.put(topic, {"i": f"enq-{k}", "due": round(due + k / 1000, 3)}, run_at=due + k / 1000)
        return (int(raw.info("memory")["used_memory"]) - before) / 5000

    far = per_job(server.url, "mem-far")
    near = per_job(f"{server.url}?horizon_ms=off", "mem-near")
    assert far < 140 and far < near / 2, (far, near)
