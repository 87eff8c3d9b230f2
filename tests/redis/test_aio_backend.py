"""chronoq.aio on Redis: the native redis.asyncio backend (aio_backend.py), on
real servers: cancelled waits, wake-ups from other processes, restarts,
replication, and many waiting tasks on one topic."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
import redis

import chronoq
import chronoq.aio
from chronoq import Job
from chronoq.backends.redis.aio_backend import AsyncRedisBackend
from chronoq.errors import BackendUnavailable, ChronoqError, DurabilityError

from ..children import Child
from ..redis_server import RedisServer
from .conftest import ServerFactory, blocked_clients, wait_until

T = TypeVar("T")
AOF = ("--appendonly", "yes", "--appendfsync", "always")


def run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(main())


async def until(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` without blocking the event loop (a test helper)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        await asyncio.sleep(0.01)


def test_the_asyncio_api_runs_on_redis_asyncio(server: RedisServer) -> None:
    async def main() -> None:
        async with chronoq.aio.connect(f"{server.url}?shards=2") as q:
            assert isinstance(q.backend, AsyncRedisBackend)
            await q.put("t", {"n": 1}, id="a")
        with chronoq.connect(server.url) as sync:
            aq = chronoq.aio.AsyncQueue.from_queue(sync)
            assert isinstance(aq.backend, AsyncRedisBackend)
            assert (await aq.put("u", 1, id="b")).created
            await aq.close()
            assert sync.get("u", "b") is not None  # closing it left the sync queue open

    run(main)


def test_connections_kept_between_calls_count_against_max_connections(
    server: RedisServer,
) -> None:
    """The asyncio link keeps up to 8 connections between round trips, which
    the pool counts as in use: with ``max_connections`` under that, the
    commands that went through the client's pool found none left."""

    async def main() -> None:
        async with chronoq.aio.connect(f"{server.url}?max_connections=4") as q:
            await asyncio.gather(*(q.put("t", n) for n in range(4)))  # 4 connections kept
            assert await q.topics() == ["t"]  # SMEMBERS: a command of its own
            assert len((await q.events("t")).events) == 4
            await asyncio.gather(*(q.put("t", n) for n in range(3)), q.topics())  # 4 at once

    run(main)


# -- waiting --------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_cancelled_waiting_reserve_leaves_nothing_behind(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    raw = raw_client(server)

    async def main() -> None:
        async with chronoq.aio.connect(server.url) as q:
            await q.put("t", "later", id="delayed", delay=30)  # the waiter takes its timer
            waiter = asyncio.create_task(q.reserve("t", wait=20))
            await until(lambda: blocked_clients(raw) == 1, what="the consumer to block")
            assert raw.get("chronoq:{t:0}:timer") is not None
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(waiter, 5)  # not held up by a blocked connection
            await until(lambda: blocked_clients(raw) == 0, what="the BLPOP to end")
            assert raw.get("chronoq:{t:0}:timer") is None  # handed on at close
            assert (await q.stats("t"))["reserved"] == 0

            # the next waiter gets a later put at once, on the same pool
            started = time.monotonic()
            after = asyncio.create_task(q.reserve("t", wait=20))
            await until(lambda: blocked_clients(raw) == 1, what="the next consumer to block")
            await q.put("t", "now", id="now")
            [job] = await asyncio.wait_for(after, 15)
            assert job.id == "now"
            assert time.monotonic() - started < 20 - 2  # woken, not timed out
            assert (await q.stats("t"))["reserved"] == 1
            await q.ack(job)

    run(main)


@pytest.mark.timeout(60)
def test_cancelling_waiters_at_random_moments_leases_nothing(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    raw = raw_client(server)
    rng = random.Random(7)
    rounds = 40

    async def main() -> None:
        received: list[str] = []
        async with chronoq.aio.connect(server.url) as q:
            for n in range(rounds):
                waiter = asyncio.create_task(q.reserve("c", count=2, wait=5))
                await asyncio.sleep(rng.uniform(0, 0.01))
                await q.put("c", n, id=f"job-{n}", max_attempts=1000)
                await asyncio.sleep(rng.uniform(0, 0.003))
                waiter.cancel()
                try:
                    jobs = await asyncio.wait_for(waiter, 5)
                except asyncio.CancelledError:
                    continue
                for job in jobs:  # it returned before the cancel: its jobs are ours
                    received.append(job.id)
                    await q.ack(job)
            stats = await q.stats("c")
            # no job is leased by a reserve that did not return
            assert (stats["reserved"], stats["dead"]) == (0, 0)
            assert stats["ready"] + len(received) == rounds
            assert len(set(received)) == len(received)
            await until(lambda: blocked_clients(raw) == 0, what="every BLPOP to end")
            # every connection is fit for use: a drain sees every job left
            left = await q.reserve("c", count=rounds, wait=1)
            assert sorted(j.id for j in left) == sorted(
                {f"job-{n}" for n in range(rounds)} - set(received)
            )
            await q.ack_many(left)

    run(main)


@pytest.mark.timeout(30)
def test_a_timed_out_wait_keeps_its_connection(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    raw = raw_client(server)

    async def main() -> None:
        async with chronoq.aio.connect(server.url) as q:
            assert await q.reserve("idle", wait=0.1) == []  # connections opened
            before = raw.info("stats")["total_connections_received"]
            for _ in range(5):  # our timer ends each BLPOP: CLIENT UNBLOCK, no reconnect
                assert await q.reserve("idle", wait=0.1) == []
            assert raw.info("stats")["total_connections_received"] == before
            assert blocked_clients(raw) == 0

    run(main)


@pytest.mark.timeout(30)
def test_a_waiter_gets_a_delayed_job_at_its_due_time(server: RedisServer) -> None:
    async def main() -> None:
        async with chronoq.aio.connect(f"{server.url}?shards=2") as q:
            put = await q.put("due", "x", id="x", delay=0.4)
            started = time.monotonic()
            [job] = await q.reserve("due", wait=10)
            assert time.time_ns() // 1_000_000 >= put.due_at == job.due_at
            assert time.monotonic() - started < 10 - 2  # the client's timer, not the wait

    run(main)


PRODUCER = r"""
import json, sys
import chronoq

args = json.loads(sys.argv[1])
with chronoq.connect(args["url"]) as q:
    print("ready", flush=True)
    for line in sys.stdin:
        r = q.put(args["topic"], "from a process", id=line.strip(), delay=args["delay"])
        print(r.due_at, flush=True)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("delay", [0, 0.3], ids=["due-now", "due-soon"])
def test_a_put_in_another_process_wakes_an_async_waiter(
    server: RedisServer,
    raw_client: Callable[..., Any],
    spawn: Callable[..., Child],
    delay: float,
) -> None:
    raw = raw_client(server)
    producer = spawn(PRODUCER, url=f"{server.url}?shards=2", topic="x", delay=delay)
    assert producer.expect() == "ready"
    wait = 30.0

    async def main() -> None:
        async with chronoq.aio.connect(f"{server.url}?shards=2") as q:
            started = time.monotonic()
            waiter = asyncio.create_task(q.reserve("x", wait=wait))
            await until(lambda: blocked_clients(raw) == 1, what="the consumer to block")
            producer.send("from-child")
            due_at = int(await asyncio.to_thread(producer.expect))
            [job] = await asyncio.wait_for(waiter, wait)
            assert time.time_ns() // 1_000_000 >= due_at == job.due_at
            assert job.id == "from-child"
            assert time.monotonic() - started < wait / 2  # woken well before the wait ends
            await q.ack(job)

    run(main)
    producer.proc.stdin.close()  # type: ignore[union-attr]
    assert producer.finish() == 0, producer.stderr()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch", [False, True], ids=["one-by-one", "put_many"])
def test_many_waiters_each_put_wakes_one(
    server: RedisServer, raw_client: Callable[..., Any], batch: bool
) -> None:
    raw = raw_client(server)
    waiters = 16

    async def main() -> list[list[chronoq.Reservation]]:
        async with chronoq.aio.connect(server.url) as q:
            tasks = [asyncio.create_task(q.reserve("herd", wait=30)) for _ in range(waiters)]
            await until(lambda: blocked_clients(raw) == waiters, what="every consumer to block")
            if batch:
                await q.put_many("herd", [Job(n, id=f"job-{n}") for n in range(waiters)])
            else:
                for n in range(waiters):
                    await q.put("herd", n, id=f"job-{n}")
            results = await asyncio.wait_for(asyncio.gather(*tasks), 25)
            for jobs in results:
                await q.ack_many(jobs)
            return results

    results = run(main)
    # every waiter was woken by one put and got one job; no job went to two
    assert sorted(len(jobs) for jobs in results) == [1] * waiters
    assert sorted(j.id for jobs in results for j in jobs) == sorted(
        f"job-{n}" for n in range(waiters)
    )
    with chronoq.connect(server.url) as q:
        events = q.events("herd", limit=10_000).events
    reserved = Counter(e.id for e in events if e.event.value == "reserve")
    assert reserved == Counter({f"job-{n}": 1 for n in range(waiters)})


# -- Redis going away -----------------------------------------------------------------


def assert_unavailable(exc: BaseException, port: int) -> None:
    assert isinstance(exc, BackendUnavailable), repr(exc)
    assert not isinstance(exc, redis.RedisError)
    assert f"127.0.0.1:{port}" in str(exc)
    rendered = "".join(traceback.format_exception(exc)) + repr(exc)
    assert "redis.exceptions" not in rendered
    assert "secret" not in rendered


CALLS: dict[str, Callable[[chronoq.aio.AsyncQueue, chronoq.Reservation], Any]] = {
    "put": lambda q, j: q.put("t", 1),
    "put_many": lambda q, j: q.put_many("t", [Job(1), Job(2)]),
    "reserve": lambda q, j: q.reserve("t"),
    "reserve_wait": lambda q, j: q.reserve("t", wait=1),
    "ack": lambda q, j: q.ack(j),
    "nack": lambda q, j: q.nack(j),
    "get": lambda q, j: q.get("t", j.id),
    "stats": lambda q, j: q.stats("t"),
    "topics": lambda q, j: q.topics(),
    "requeue": lambda q, j: q.requeue("t"),
    "events": lambda q, j: q.events(),
}


@pytest.mark.timeout(90)
def test_server_killed_and_restarted(
    make_server: ServerFactory, raw_client: Callable[..., Any]
) -> None:
    server = make_server(*AOF)
    raw = raw_client(server)
    raw.config_set("requirepass", "secret")  # this connection stays logged in
    url = f"redis://:secret@127.0.0.1:{server.port}/0"

    async def main() -> None:
        async with chronoq.aio.connect(url) as q:
            await q.put("t", "first", id="a")
            [job] = await q.reserve("t", ttr=60)
            waiter = asyncio.create_task(q.reserve("w", wait=20))
            await until(lambda: blocked_clients(raw) == 1, what="a waiter")

            server.stop(kill=True)
            with pytest.raises(BackendUnavailable) as caught:
                await asyncio.wait_for(waiter, 10)  # the waiting consumer hears of it
            assert_unavailable(caught.value, server.port)
            for name, call in CALLS.items():
                try:
                    await call(q, job)
                except BaseException as exc:
                    assert_unavailable(exc, server.port)
                else:
                    raise AssertionError(f"{name} did not fail while Redis was down")

            server.start()
            after = raw_client(server)
            after.config_set("requirepass", "secret")  # a restart forgot it
            # the next calls reconnect; the lease taken before the kill is still live
            await q.ack(job)
            assert await q.get("t", "a") is None
            assert (await q.put("t", "after", id="c")).created
            [again] = await q.reserve("t", wait=1)
            assert again.id == "c"
            await q.ack(again)
            waiter = asyncio.create_task(q.reserve("t", wait=20))
            await until(lambda: blocked_clients(after) == 1, what="a waiter after the restart")
            await q.put("t", "woken", id="d")
            assert [j.id for j in await asyncio.wait_for(waiter, 15)] == ["d"]

    run(main)


@pytest.mark.timeout(30)
def test_connections_cut_while_idle_are_opened_again(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    raw = raw_client(server)

    async def main() -> None:
        async with chronoq.aio.connect(server.url) as q:
            await q.put("t", 1, id="a")
            [job] = await q.reserve("t")
            await q.ack(job)
            assert await q.reserve("t", wait=0.1) == []  # a call and a wait connection
            assert raw.client_kill_filter(_type="normal", skipme=True) >= 2
            # seen before anything is sent on them: no error, nothing sent twice
            assert (await q.put("t", 2, id="b")).created
            [job] = await q.reserve("t", wait=5)
            assert job.id == "b"
            await q.ack(job)
            assert (await q.stats("t"))["total"] == 0

    run(main)


@pytest.mark.timeout(30)
def test_function_flush_between_calls_is_transparent(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    raw = raw_client(server)

    async def main() -> None:
        async with chronoq.aio.connect(f"{server.url}?shards=2") as q:
            raw.function_flush()
            many = await q.put_many("t", [Job(n, id=f"m{n}") for n in range(450)])
            assert [r.id for r in many] == [f"m{n}" for n in range(450)]
            assert all(r.created for r in many)
            raw.function_flush()
            jobs = await q.reserve("t", count=450)
            assert len(jobs) == 450
            raw.function_flush()
            assert await q.ack_many(jobs) == []
            raw.function_flush()
            assert (await q.stats("t"))["total"] == 0

    run(main)


# -- replication ------------------------------------------------------------------------


@pytest.fixture
def primary_and_replica(make_server: ServerFactory) -> Iterator[tuple[RedisServer, RedisServer]]:
    primary = make_server("--repl-diskless-sync-delay", "0")
    replica = make_server("--replicaof", "127.0.0.1", str(primary.port))
    client = redis.Redis(port=primary.port)
    client.set("probe", "1")  # WAIT with no write of its own would not wait for the sync
    wait_until(lambda: client.wait(1, 100) >= 1, timeout=20, what="the replica to sync")
    client.delete("probe")
    client.close()
    yield primary, replica


@pytest.mark.timeout(60)
def test_replicas_through_the_async_api(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = primary_and_replica

    async def main() -> None:
        async with chronoq.aio.connect(f"{primary.url}?replicas=1&replica_timeout_ms=2000") as q:
            assert (await q.put("t", {"n": 1}, id="a")).created
            [job] = await q.reserve("t")
            await q.ack(job)
        with chronoq.connect(replica.url) as on_replica:
            # what was confirmed is on the replica: the put, the reserve and the ack
            kinds = [e.event.value for e in on_replica.events("t").events]
            assert kinds == ["put", "reserve", "ack"]
        async with chronoq.aio.connect(f"{primary.url}?replicas=2&replica_timeout_ms=200") as q:
            with pytest.raises(DurabilityError, match="only 1 of 2 replicas"):
                await q.put("t", 1, id="x")
            assert await q.get("t", "x") is not None  # applied on the primary all the same
        replica.stop(kill=True)
        async with chronoq.aio.connect(f"{primary.url}?replicas=1&replica_timeout_ms=300") as q:
            with pytest.raises(DurabilityError, match="only 0 of 1"):
                await q.put("t", 1, id="after")
            assert await q.get("t", "after") is not None  # reads need no replica

    run(main)


@pytest.mark.timeout(30)
def test_an_async_queue_is_bound_to_the_event_loop_it_is_first_used_on(
    server: RedisServer,
) -> None:
    q = chronoq.aio.connect(server.url)  # made outside any loop: bound at its first call
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()

    def on_other(coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, other).result(10)

    async def elsewhere() -> None:
        for call in (
            q.put("t", 2, id="b"),
            q.reserve("t", wait=0.1),
            q.recurring_list("t"),
        ):
            with pytest.raises(ChronoqError, match="another event loop"):
                await asyncio.wait_for(call, 5)

    async def again() -> None:
        async with q:
            assert (await q.put("t", 3, id="c")).created

    try:
        assert on_other(q.put("t", 1, id="a")).created
        asyncio.run(elsewhere())  # a clear error, not a RuntimeError or a hang
        assert on_other(q.get("t", "b")) is None
        on_other(q.close())
        asyncio.run(again())  # closed, it holds no connection: a new loop may use it
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shards", [1, 3])
def test_a_wake_up_that_no_reserve_looked_at_goes_to_the_next_waiter(
    server: RedisServer, shards: int
) -> None:
    """One BLPOP over two topics' wake lists takes the token of a put on b;
    if its consumer then looks only at a (``tried``), the token goes back to
    b's list, and a waiter of b alone is woken by it at once. A token whose
    topic was looked at is spent."""
    url = f"{server.url}?shards={shards}&prefix=cq-{random.getrandbits(48):x}"

    async def main() -> None:
        async with chronoq.aio.connect(url) as q:
            both = await q.watch_topics(["a", "b"])
            alone = await q.watch("b")
            try:
                await q.put("b", 1, id="j1")
                assert await both.wait(5)  # woken by b's token
                await both.unused({"a"})  # ... but looked at a only
                started = time.monotonic()
                assert await alone.wait(5)
                assert time.monotonic() - started < 2  # by the token, not after 5 s
                await q.put("b", 2, id="j2")
                assert await both.wait(5)
                await both.unused({"a", "b"})  # b was looked at: the token is spent
                assert not await alone.wait(0.5)
            finally:
                await both.close()
                await alone.close()

    run(main)


@pytest.mark.timeout(30)
def test_waits_keep_their_connection_after_a_close_and_a_new_loop(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    """A closed AsyncQueue may be used again on another loop: its waits
    there reuse their blocking connection as before the close."""
    raw = raw_client(server)
    q = chronoq.aio.connect(server.url)

    async def waits() -> int:
        assert await q.reserve("idle", wait=0.05) == []  # connections opened
        before = raw.info("stats")["total_connections_received"]
        for _ in range(5):
            assert await q.reserve("idle", wait=0.05) == []
        await q.close()
        return int(raw.info("stats")["total_connections_received"] - before)

    assert run(waits) == 0
    assert run(waits) == 0  # a new loop, after the close
