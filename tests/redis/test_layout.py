"""How the Redis backend lays out its keys and wakes its consumers (docs/contract.md §4,
§6, §7): one hash slot per ``{topic:shard}``, jobs spread over shards by a
stable hash of their id, capped event streams, one wake-up per put, and
due-time wake-ups timed in the client."""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.cluster import key_slot

import chronoq
from chronoq import Job
from chronoq.backends.redis.codec import decode_entry
from chronoq.backends.redis.keys import PARTS, shard_of

from ..children import all_events
from ..redis_server import RedisServer, free_port
from .conftest import blocked_clients, wait_until

# Generous: a wake-up that happened at all comes within milliseconds; one that
# did not comes at the end of the wait.
WOKEN_WITHIN_S = 1.5


def scan(client: Any, pattern: str) -> set[str]:
    return {key.decode() for key in client.scan_iter(match=pattern, count=1000)}


def drain(q: chronoq.Queue, topic: str) -> list[chronoq.Reservation]:
    """Reserve and ack one job at a time until nothing is due."""
    got = []
    while jobs := q.reserve(topic):
        got += jobs
        q.ack_many(jobs)
    return got


# -- key names and hash slots ------------------------------------------------------------


def test_every_key_of_a_shard_is_in_one_hash_slot(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    prefix: str,
) -> None:
    q = open_queue(f"{server.url}?prefix={prefix}&shards=2")
    topics = ["orders.close", "a:b-c_d.1"]  # ':' inside a topic must not break the tag
    for topic in topics:
        q.put_many(topic, [Job(n, id=f"live-{n}") for n in range(20)])  # leased below
        q.put_many(topic, [Job(n, id=f"done-{n}", unique_for=60) for n in range(20)])  # forget
        q.put_many(topic, [Job(n, id=f"dead-{n}") for n in range(20)])  # dead
        got = {j.id: j for j in q.reserve(topic, count=60, ttr=60)}
        q.ack_many([j for i, j in got.items() if i.startswith("done-")])
        for job_id, job in got.items():
            if job_id.startswith("dead-"):
                q.bury(job)
        q.put_many(topic, [Job(n, id=f"later-{n}", delay=60) for n in range(20)])  # delayed
        q.put_many(topic, [Job(n, id=f"now-{n}") for n in range(20)])  # ready, wake tokens
        q.put_many(topic, [Job(n, id=f"far-{n}", delay=3600) for n in range(20)])  # far, indexed
        q.put_many(topic, [Job(n, delay=3600) for n in range(20)])  # far, ids name their bucket
    q.pause(topics[0])

    found = scan(raw_client(server), "*")
    # the two keys outside any shard (each written on its own): the topic set,
    # and the set of topics whose event logs an export reads
    outside = {f"{prefix}:topics", f"{prefix}:logs"}
    assert outside <= found
    # a far bucket's pages: the part "far", then :<bucket start>:<page>; the far
    # buckets' counts: "farc:<group>"
    pattern = re.compile(
        rf"{re.escape(prefix)}:\{{(?P<topic>.+):(?P<shard>\d+)\}}:(?P<part>\w+)(:\d+(:\d+)?)?"
    )
    by_shard: dict[tuple[str, int], set[str]] = defaultdict(set)
    for key in found - outside:
        match = pattern.fullmatch(key)
        assert match, f"{key!r} is not <prefix>:{{<topic>:<shard>}}:<part>"
        assert match["part"] in {*PARTS, "farc"}, key
        by_shard[match["topic"], int(match["shard"])].add(match["part"])
        tag = f"{{{match['topic']}:{match['shard']}}}"
        assert key_slot(key.encode()) == key_slot(tag.encode()), key
    assert set(by_shard) == {(topic, shard) for topic in topics for shard in (0, 1)}
    for (topic, shard), parts in by_shard.items():
        slots = {key_slot(f"{prefix}:{{{topic}:{shard}}}:{part}".encode()) for part in parts}
        assert len(slots) == 1, (topic, shard)
        # "timer" lives only while a consumer waits (see test_one_waiter_times_a_due_job)
        expected = {*PARTS, "farc"} - {"timer", "guard"}
        expected -= {"paused"} if topic != topics[0] else set()
        assert parts == expected, (topic, shard, sorted(expected - parts))


@pytest.fixture(scope="module")
def cluster_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A one-node Redis Cluster: every slot is local, but multi-key commands whose
    keys are in different slots fail with CROSSSLOT, as on a real cluster."""
    # the bus port is given: the default, port + 10000, is out of range for high ports
    server = RedisServer(
        tmp_path_factory.mktemp("redis-cluster"),
        *("--cluster-enabled", "yes", "--cluster-port", str(free_port())),
    )
    raw = redis.Redis(host="127.0.0.1", port=server.port)
    try:
        raw.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_until(
            lambda: b"cluster_state:ok" in raw.execute_command("CLUSTER", "INFO"),
            what="the cluster to be ok",
        )
        yield server
    finally:
        raw.close()
        server.stop(kill=True)


@pytest.mark.parametrize(
    ("scheme", "shards"), [("redis", 1), ("redis+cluster", 4), ("redis+cluster", 16)]
)
def test_every_operation_runs_on_a_cluster_node(
    cluster_node: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    prefix: str,
    scheme: str,
    shards: int,
) -> None:
    """One shard runs on a cluster node through redis://; several need
    redis+cluster://, whose consumers wait on each shard's wake key on its own
    (one BLPOP cannot span slots)."""
    q = open_queue(f"{scheme}://127.0.0.1:{cluster_node.port}?shards={shards}&prefix={prefix}")
    q.put_many("c", [Job(n, id=f"j{n}", priority=n % 3) for n in range(40)])
    q.put("c", "late", id="late", delay=0.2)
    assert q.stats("c")["total"] == 41
    jobs = q.reserve("c", count=40)
    assert len(jobs) == 40
    q.nack(jobs[0], delay=0)
    q.touch(jobs[1])
    q.bury(jobs[2])
    assert q.ack_many(jobs[3:]) == []
    assert q.requeue("c") == 1
    assert q.reschedule("c", "late", delay=0.1)
    got: list[chronoq.Reservation] = []
    while len(got) < 3 and (more := q.reserve("c", count=10, wait=5)):  # waits in BLPOP
        got += more
    assert {j.id for j in got} == {jobs[0].id, jobs[2].id, "late"}
    assert q.get("c", jobs[1].id) is not None
    assert q.delete("c", jobs[1].id)
    q.pause("c")
    q.resume("c")
    assert q.dead("c") == []
    assert len(q.events("c").events) > 40
    assert q.purge("c") >= 0


# -- shards ----------------------------------------------------------------------------


def test_jobs_spread_over_shards_and_by_id_calls_touch_one_shard(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    prefix: str,
) -> None:
    q = open_queue(f"{server.url}?prefix={prefix}&shards=4")
    raw = raw_client(server)
    ids = [f"job-{n}" for n in range(200)]
    q.put_many("s", [Job(n, id=job_id) for n, job_id in enumerate(ids)])

    def jobs_key(shard: int) -> str:
        return f"{prefix}:{{s:{shard}}}:jobs"

    sizes = [raw.hlen(jobs_key(shard)) for shard in range(4)]
    assert all(size > 0 for size in sizes), sizes
    assert sum(sizes) == 200
    for job_id in ids:
        home = shard_of(job_id, 4)
        assert [raw.hexists(jobs_key(s), job_id) for s in range(4)] == [s == home for s in range(4)]

    # get and delete run on the job's shard only: every key any command names
    # (the script's KEYS and what the script calls) is of that shard
    for job_id in ("job-7", "job-8", "job-9"):
        home = shard_of(job_id, 4)
        with raw.monitor() as monitor:
            assert q.get("s", job_id) is not None
            assert q.delete("s", job_id)
            assert q.get("s", job_id) is None
            raw_client(server).echo("end-of-test-calls")
            touched: set[str] = set()
            while "end-of-test-calls" not in (command := monitor.next_command()["command"]):
                touched |= {word for word in command.split() if word.startswith(prefix)}
        assert touched, "MONITOR saw no chronoq key"
        assert {re.search(r"\{s:(\d+)\}", key)[1] for key in touched} == {str(home)}, touched  # type: ignore[index]

    got = []
    while jobs := q.reserve("s", count=7):
        got += jobs
        q.ack_many(jobs)
    counts = Counter(j.id for j in got)
    assert set(counts) == set(ids) - {"job-7", "job-8", "job-9"}
    assert max(counts.values()) == 1
    assert q.stats("s")["total"] == 0


def test_priority_order_within_each_shard(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], prefix: str
) -> None:
    q = open_queue(f"{server.url}?prefix={prefix}&shards=4")
    rng = random.Random(7)
    jobs = [Job(n, id=f"p-{n}", priority=rng.randint(-3, 3)) for n in range(120)]
    q.put_many("prio", jobs)  # one script per shard: one due time, put order = list order
    expected: dict[int, list[str]] = defaultdict(list)
    for _, job in sorted(enumerate(jobs), key=lambda item: (-item[1].priority, item[0])):
        assert job.id is not None
        expected[shard_of(job.id, 4)].append(job.id)
    assert len(expected) == 4

    seen: dict[int, list[str]] = defaultdict(list)
    for job in drain(q, "prio"):
        seen[shard_of(job.id, 4)].append(job.id)
    assert seen == expected


# -- the event stream -------------------------------------------------------------------


@pytest.mark.parametrize("shards", [1, 2])
def test_event_stream_is_capped(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    prefix: str,
    shards: int,
) -> None:
    cap = 1000
    q = open_queue(f"{server.url}?prefix={prefix}&shards={shards}&events_max={cap}")
    raw = raw_client(server)
    tags = [f"{prefix}:{{ev:{shard}}}:" for shard in range(shards)]

    def held(tag: str) -> list[chronoq.Event]:
        entries = raw.xrange(tag + "events", "-", "+")
        return [e for entry_id, f in entries for e in decode_entry("ev", entry_id, f)]

    sizes: list[int] = []
    for batch in range(10):
        q.put_many("ev", [Job(n, id=f"e-{batch}-{n}") for n in range(1000 * shards)])
        for _ in range(10):
            q.ack_many(q.reserve("ev", count=100 * shards))
        sizes += [len(held(tag)) for tag in tags]
    assert q.stats("ev")["total"] == 0
    for tag in tags:
        added = int(raw.get(tag + "evseq"))
        assert added >= 25 * cap, added  # really 3 events per job, 10,000 jobs per shard
        events = held(tag)
        # the newest events, numbered without a gap up to the last one added
        assert [e.seq for e in events] == list(range(added - len(events) + 1, added + 1))
    # MINID ~ trims whole stream nodes: a little over the cap, never under it
    assert all(cap <= size < cap + 600 for size in sizes), sizes
    assert all_events(q, "ev")[-1].id.startswith("e-9-")


# -- wake-ups -----------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shards", [1, 4])
def test_one_put_wakes_one_of_many_waiting_consumers(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    shards: int,
) -> None:
    consumers, wait = 8, 4.0
    q = open_queue(f"{server.url}?shards={shards}")
    raw = raw_client(server)
    returned: list[tuple[float, list[chronoq.Reservation]]] = []
    lock = threading.Lock()

    def consume() -> None:
        jobs = q.reserve("herd", wait=wait)
        with lock:
            returned.append((time.monotonic(), jobs))

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    wait_until(lambda: blocked_clients(raw) == consumers, what="every consumer to block")
    put_at = time.monotonic()
    q.put("herd", "only one", id="the-job")
    time.sleep(WOKEN_WITHIN_S)
    with lock:
        early = list(returned)
    assert len(early) == 1, f"{len(early)} consumers returned after one put"
    assert [j.id for j in early[0][1]] == ["the-job"]
    assert early[0][0] - put_at < WOKEN_WITHIN_S
    assert blocked_clients(raw) == consumers - 1  # the others still wait in BLPOP

    for thread in threads:
        thread.join(wait + 5)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(len(jobs) for _, jobs in returned) == [0] * (consumers - 1) + [1]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("already", [None, 5.0, 0.15], ids=["empty", "later-job", "earlier-job"])
def test_waiting_consumer_gets_a_delayed_job_at_its_due_time(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    already: float | None,
) -> None:
    q = open_queue(f"{server.url}?shards=2")
    raw = raw_client(server)
    if already is not None:  # a job the consumer already sleeps towards
        q.put("due", "already", id="already", delay=already)
    result: list[tuple[int, list[chronoq.Reservation]]] = []
    received = threading.Event()

    def consume() -> None:
        while not received.is_set():
            jobs = q.reserve("due", wait=10)
            result.append((time.time_ns() // 1_000_000, jobs))
            if any(j.id == "target" for j in jobs):
                received.set()
            for job in jobs:
                q.ack(job)

    consumer = threading.Thread(target=consume)
    started = time.monotonic()
    consumer.start()
    wait_until(lambda: blocked_clients(raw) == 1, what="the consumer to block")
    put = q.put("due", "target", id="target", delay=0.3)
    assert received.wait(WOKEN_WITHIN_S + 0.3), "the consumer did not get the job in time"
    consumer.join(5)
    assert time.monotonic() - started < 10 - 1  # well before the wait ended
    for at_ms, jobs in result:
        for job in jobs:
            assert at_ms >= job.due_at, f"{job.id} delivered {job.due_at - at_ms} ms early"
    [(_, target)] = [(at, jobs) for at, jobs in result if any(j.id == "target" for j in jobs)]
    assert target[0].due_at == put.due_at
    reserve = [e for e in all_events(q, "due") if e.event.value == "reserve"]
    assert all(e.ts_ms >= e.due_at and (e.lag_ms or 0) >= 0 for e in reserve), reserve
