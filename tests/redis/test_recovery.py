"""What a failure half-way leaves, and how the backend gets past it: stale
index entries are dropped by reserve (which reads on past them and still
times a waiter) and by the upkeep; a call cut after Redis ran it is not sent
again; a restart is picked up on the next call; every valid job packs; the
record's limits (6-byte ttr, unsigned due_at) read back everywhere."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import chronoq
from chronoq import Job
from chronoq.backends.redis.codec import F_ATT, RESERVED, _record, leased_fields
from chronoq.errors import BackendUnavailable, InvalidInput, LeaseLost
from chronoq.states import State

from ..children import all_events
from .conftest import ServerFactory, blocked_clients, wait_until

Q = Callable[[str], chronoq.Queue]


def keys(topic: str, shard: int = 0) -> dict[str, str]:
    tag = f"chronoq:{{{topic}:{shard}}}:"
    return {part: tag + part for part in ("jobs", "delayed", "ready", "leased", "dead", "forget")}


def stale_member(name: bytes, seq: int = 999_999) -> bytes:
    return seq.to_bytes(6, "big") + name


def check_indexes(raw: Any, topic: str) -> None:
    """Every index entry agrees with its record: ready members carry the record's
    seq and are due, delayed entries are pending, leased scores are the deadline."""
    k = keys(topic)
    now = int(raw.time()[0]) * 1000 + int(raw.time()[1]) // 1000
    for member in raw.zrange(k["ready"], 0, -1):
        record = raw.hget(k["jobs"], member[6:])
        assert record is not None, member
        assert record[0] < 32, member  # pending
        assert record[15:21] == member[:6], member  # the record's seq
        assert _record(record)["due"] <= now + 5, member
    for job_id, score in raw.zrange(k["delayed"], 0, -1, withscores=True):
        record = raw.hget(k["jobs"], job_id)
        assert record is not None and record[0] < 32, job_id
        assert _record(record)["due"] == int(score), job_id
    for job_id, score in raw.zrange(k["leased"], 0, -1, withscores=True):
        record = raw.hget(k["jobs"], job_id)
        assert record is not None and record[0] // 32 == RESERVED, job_id
        assert _record(record)["at"] == int(score), job_id


class CuttingProxy:
    """A TCP proxy to a redis-server. Once armed, it forwards the next request
    but cuts the connection instead of forwarding the reply: Redis ran the call,
    the client sees a connection error (a network drop at the worst moment)."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.armed = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            for src, dst, replies in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, replies), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while data := src.recv(65536):
                if replies and self.armed.is_set():
                    self.armed.clear()
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


# -- confirmed bugs ---------------------------------------------------------------------


def test_a_poll_behind_a_stale_ready_member_gets_the_ready_job(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """reserve.lua drops a stale member but does not look further: reserve()
    without a wait returns [] although a valid job is ready."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", "real", id="real")
    raw.zadd(keys("t")["ready"], {stale_member(b"ghost"): 0})  # sorts first
    assert [j.id for j in q.reserve("t")] == ["real"]


def test_reserve_count_is_filled_past_stale_members(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put_many("t", [Job("a", id="a"), Job("b", id="b")])
    raw.zadd(keys("t")["ready"], {stale_member(b"ghost"): 0})
    assert sorted(j.id for j in q.reserve("t", 2)) == ["a", "b"]


@pytest.mark.timeout(20)
def test_a_waiter_whose_reserve_dropped_only_stale_members_wakes_for_a_delayed_job(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """When every member reserve looked at was stale it returns {-1, 0}: no wake
    time, no timer taken, no token (the ready set is empty now). A consumer then
    sleeps its whole wait although a delayed job falls due meanwhile."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", "later", id="later", delay=0.8)
    assert q.reserve("t") == []  # nothing ready: the put's wake token is dropped
    raw.zadd(keys("t")["ready"], {stale_member(b"ghost"): 0})
    started = time.monotonic()
    jobs = q.reserve("t", wait=6)
    elapsed = time.monotonic() - started
    assert [j.id for j in jobs] == ["later"]
    assert elapsed < 3, f"the job due after 0.8 s was reserved after {elapsed:.1f} s"


def test_a_generated_id_put_cut_after_redis_ran_it_is_not_run_twice(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """The connection can be cut after Redis ran a call, as with a timeout: the
    call raises BackendUnavailable and is not sent again, so a generated-id
    put is stored once (not twice, with a stale ready member sorting first)."""
    server = make_server()
    raw = raw_client(server)
    proxy = CuttingProxy(server.port)
    try:
        q = open_queue(f"redis://127.0.0.1:{proxy.port}/0")
        q.put("t", "warm", id="warm")  # the library loaded, the connection used
        q.ack(q.reserve("t")[0])
        proxy.armed.set()
        with pytest.raises(BackendUnavailable):
            q.put("t", {"k": "v"})
        assert not proxy.armed.is_set()  # the cut happened
        puts = [e.id for e in all_events(q, "t") if e.event.value == "put" and e.id != "warm"]
        members = [m for m in raw.zrange(keys("t")["ready"], 0, -1) if m[6:] != b"warm"]
        got = [j.id for j in q.reserve("t")]
        assert (len(puts), len(members), got) == (1, 1, puts)
    finally:
        proxy.close()


def test_a_huge_int_duration_is_invalid_input_not_overflow_error(
    make_server: ServerFactory, open_queue: Q
) -> None:
    """(job.py, outside the diff) duration_ms and run_at_ms call math.isfinite /
    float() on an int too large for a float: OverflowError escapes validation."""
    q = open_queue(make_server().url)
    for kwargs in ({"delay": 10**400}, {"ttr": 10**400}, {"run_at": 10**400}):
        with pytest.raises(InvalidInput):
            q.put("t", 1, **kwargs)  # type: ignore[arg-type]


# -- pinned: passing --------------------------------------------------------------------


def test_every_path_writing_ready_members_keeps_the_record_seq(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """put, put with replace (from ready, delayed, dead; twice in one call), nack,
    expire (upkeep and by id), requeue, reschedule and promotion: every ready
    member carries its record's seq, so reserve drops none of them."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", 0, id="dead-rep", max_attempts=1)
    [dr] = q.reserve("t", ttr=30)
    q.bury(dr)
    q.put("t", 1, id="dead-rep", replace=True)
    q.put("t", 0, id="plain")
    q.put("t", 0, id="rep-ready")
    q.put("t", 1, id="rep-ready", replace=True)
    q.put("t", 0, id="rep-delayed", delay=60)
    q.put("t", 1, id="rep-delayed", replace=True)
    q.put_many("t", [Job(0, id="twice"), Job(1, id="twice")], replace=True)
    q.put("t", 0, id="nacked")
    q.put("t", 0, id="dead", max_attempts=1)
    q.put("t", 0, id="expired")
    q.put("t", 0, id="expired-by-id")
    q.put("t", 0, id="resched", delay=60)
    q.put("t", 0, id="promoted", delay=0.2)
    check_indexes(raw, "t")
    by_id = {j.id: j for j in q.reserve("t", 5, ttr=0.1)}
    assert set(by_id) == {"dead-rep", "plain", "rep-ready", "rep-delayed", "twice"}
    for j in by_id.values():
        assert j.payload == (0 if j.id == "plain" else 1), j.id
        q.ack(j)
    [n, d, e, e2] = q.reserve("t", 4, ttr=0.1)
    assert [n.id, d.id, e.id, e2.id] == ["nacked", "dead", "expired", "expired-by-id"]
    q.nack(n, delay=0)
    q.bury(d)
    check_indexes(raw, "t")
    time.sleep(0.25)
    q.put("t", "x", id="expired-by-id")  # current() expires the lease, no replace
    assert q.requeue("t", ["dead"]) == 1
    assert q.reschedule("t", "resched", delay=0)
    check_indexes(raw, "t")
    got = q.reserve("t", 100)  # upkeep: expired, promoted
    expected = {"nacked", "dead", "expired", "expired-by-id", "resched", "promoted"}
    assert sorted(j.id for j in got) == sorted(expected)
    check_indexes(raw, "t")
    assert q.ack_many(got) == []
    assert q.stats("t")["total"] == 0


def test_touch_keeps_a_lease_past_its_first_deadline(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", "p", id="j")
    [r] = q.reserve("t", ttr=0.3)
    deadline = q.touch(r, ttr=5)
    assert raw.zscore(keys("t")["leased"], "j") == deadline
    time.sleep(0.45)
    assert q.reserve("t") == []  # the upkeep ran past the first deadline
    info = q.get("t", "j")
    assert info is not None and info.state is State.RESERVED and info.deadline == deadline
    q.ack(r)
    assert "expire" not in [e.event.value for e in all_events(q, "t")]


def test_a_lease_taken_again_is_reclaimed_only_at_its_own_deadline(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", "p", id="j")
    [first] = q.reserve("t", ttr=0.2)
    time.sleep(0.3)
    [second] = q.reserve("t", ttr=5)  # expired and leased again in one call
    assert (second.id, second.attempts) == ("j", 2)
    check_indexes(raw, "t")
    time.sleep(0.2)
    assert q.reserve("t") == []
    with pytest.raises(LeaseLost):
        q.ack(first)
    q.ack(second)
    kinds = [e.event.value for e in all_events(q, "t")]
    assert kinds == ["put", "reserve", "expire", "reserve", "ack"]


def test_stale_entries_of_live_jobs_in_other_indexes_drop_no_job(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    """A delayed entry of a ready or reserved job, a leased entry of a pending
    job, a forget entry of a pending job: each is dropped (or harmless), the job
    stays as it was and is reserved exactly once."""
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    k = keys("t")
    q.put("t", "r", id="ready-job")
    q.put("t", "x", id="reserved-job")
    q.put("t", "u", id="uf-job", unique_for=60)
    [held] = q.reserve("t", ttr=30)
    assert held.id == "ready-job"
    q.put("t", "r2", id="ready-job2")
    raw.zadd(k["delayed"], {"ready-job2": 1, "reserved-job": 1})
    raw.zadd(k["leased"], {"uf-job": 1})
    raw.zadd(k["forget"], {"uf-job": 1, "reserved-job": 1})
    got = q.reserve("t", 10)
    assert sorted(j.id for j in got) == ["ready-job2", "reserved-job", "uf-job"]
    assert [j.attempts for j in got] == [1, 1, 1]
    assert q.reserve("t", 10) == []
    assert q.ack_many([held, *got]) == []
    assert q.get("t", "uf-job") is None and not q.put("t", "again", id="uf-job").created
    kinds = [e.event.value for e in all_events(q, "t")]
    assert "expire" not in kinds and "dead" not in kinds


@pytest.mark.timeout(40)
@pytest.mark.parametrize("first", ["put", "put_many", "reserve_wait", "ack"])
def test_first_call_after_kill_9_restart_is_transparent_with_a_socket_timeout(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any], first: str
) -> None:
    server = make_server("--appendonly", "yes", "--appendfsync", "always")
    q = open_queue(server.url + "?socket_timeout=0.5")
    q.put("t", "before", id="before")
    [held] = q.reserve("t", ttr=60)
    server.stop(kill=True)
    server.start()
    if first == "put":
        assert q.put("t", "after", id="after").created
    elif first == "put_many":
        results = q.put_many("t", [Job(n, id=f"j{n}") for n in range(450)])
        assert all(r.created for r in results) and len(results) == 450
    elif first == "reserve_wait":
        started = time.monotonic()
        assert q.reserve("t", wait=1.5) == []  # longer than the socket timeout
        assert 1.3 < time.monotonic() - started < 3
    else:
        q.ack(held)
        assert q.get("t", "before") is None


@pytest.mark.timeout(30)
def test_a_waiter_longer_than_the_socket_timeout_is_woken_by_a_put(
    make_server: ServerFactory, open_queue: Q, raw_client: Callable[..., Any]
) -> None:
    server = make_server()
    q = open_queue(server.url + "?socket_timeout=0.2")
    raw = raw_client(server)
    q.put("t", "warm", id="warm")
    q.ack(q.reserve("t")[0])
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.reserve("t", wait=5)))
    waiter.start()
    wait_until(lambda: blocked_clients(raw) == 1, what="the consumer to block")
    time.sleep(0.6)  # three socket timeouts
    q.put("t", "woken", id="w")
    waiter.join(5)
    assert not waiter.is_alive()
    assert [[j.id for j in jobs] for jobs in got] == [["w"]]
    q.put("t", "due", id="d", delay=0.7)  # a due-time wake, timed by the client
    started = time.monotonic()
    [job] = q.reserve("t", wait=5)
    assert job.id == "d" and time.monotonic() - started < 2


def test_odd_but_valid_values_pack_in_a_multi_call_put_many(
    make_server: ServerFactory, open_queue: Q
) -> None:
    """Values that pass validation by the slow paths (subclasses, -0.0, dates
    before 1970 or after 9999-12-31 UTC, a non-byte memoryview) all pack: the
    lazily packed batch goes through whole."""

    class F(float):
        pass

    class Int(int):
        pass

    far = datetime.max.replace(tzinfo=timezone(timedelta(hours=-23, minutes=-59)))
    odd = [
        Job(1, id="neg0", delay=-0.0),
        Job(2, id="floatsub", delay=F(1.5), ttr=F(2.0), unique_for=F(3.0)),
        Job(3, id="intsub", delay=Int(2), ttr=Int(3), unique_for=Int(4)),
        Job(4, id="year1", run_at=datetime(1, 1, 1)),
        Job(5, id="year1-tz", run_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=23)))),
        Job(6, id="past-9999", run_at=far),
        Job(7, id="run-at-int", run_at=Int(5)),
        Job(memoryview(b"abcd").cast("f"), id="mv"),
        Job(bytearray(b"\x00\xff"), id="ba", ttr=0.0015),
    ]
    jobs = [Job(n, id=f"j{n}") for n in range(250)] + odd + [Job(n) for n in range(200)]
    results = open_queue(make_server().url).put_many("t", jobs)
    assert all(r.created for r in results) and len(results) == len(jobs)
    by_id = {r.id: r for r in results}
    assert by_id["past-9999"].due_at == int(far.timestamp() * 1000)
    assert by_id["year1"].due_at <= time.time() * 1000 + 1000  # due now


def test_far_future_due_and_every_field_read_back_from_get_and_events(
    make_server: ServerFactory, open_queue: Q
) -> None:
    q = open_queue(make_server().url)
    ten_years = 10 * 365 * 24 * 3600
    put = q.put(
        "t",
        {"p": 1},
        id="far",
        run_at=datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        priority=-1000,
        ttr=ten_years,
        max_attempts=1_000_000,
        unique_for=ten_years,
    )
    assert put.due_at == 253_402_300_799_999
    info = q.get("t", "far")
    assert info is not None and info.state is State.DELAYED and info.due_at == put.due_at
    assert (info.ttr, info.unique_for, info.max_attempts) == (ten_years, ten_years, 1_000_000)
    [event] = all_events(q, "t")
    assert (event.due_at, event.priority) == (put.due_at, -1000)
    assert q.reschedule("t", "far", delay=0)
    [r] = q.reserve("t")
    assert (r.ttr, r.max_attempts, r.priority, r.payload) == (ten_years, 1_000_000, -1000, {"p": 1})
    q.nack(r, delay=0, error="e")
    [r] = q.reserve("t")
    info = q.get("t", "far")
    assert info is not None and info.deadline == r.deadline and info.last_error == "e"
    assert (r.attempts, r.ttr, info.unique_for) == (2, ten_years, ten_years)


@pytest.mark.parametrize("due", [0, 2**47 - 1, 2**47, 2**48 - 1])
@pytest.mark.parametrize("created", [-(2**47), -1, 0, 2**47 - 1])
def test_leased_fields_fast_path_agrees_with_the_record_reader(due: int, created: int) -> None:
    lease = b"0123456789abcdef"
    for deadline in (-(2**47), 0, 2**47 - 1):
        raw = (
            struct.pack(">BHIh", RESERVED * 32 + F_ATT, due >> 32, due & 0xFFFFFFFF, -1000)
            + created.to_bytes(6, "big", signed=True)
            + (42).to_bytes(6, "big")
            + struct.pack(">I", 7)
            + deadline.to_bytes(6, "big", signed=True)
            + bytes([len(lease)])
            + lease
            + b"payload"
        )
        r = _record(raw)
        slow = (r["attempts"], r["at"], r["due"], r["priority"], r["max"], r["ttr"])
        slow += (r["created"], r["payload"])
        assert (
            leased_fields(raw) == slow == (7, deadline, due, -1000, 5, 30_000, created, b"payload")
        )
