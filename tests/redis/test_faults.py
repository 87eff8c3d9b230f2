"""Redis going away and coming back (docs/contract.md §2.2, §2.3, §4): functions flushed,
the server restarted or killed, durability of acknowledged writes with AOF.
Every test runs its own redis-server processes, never the session one."""

from __future__ import annotations

import itertools
import json
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

import chronoq
from chronoq import Job
from chronoq.errors import BackendUnavailable

from ..children import Child, all_events
from ..redis_server import RedisServer
from .conftest import ServerFactory, blocked_clients, wait_until

AOF = ("--appendonly", "yes", "--appendfsync", "always")


def library(q: chronoq.Queue) -> str:
    return str(q.backend._scripts.library)  # type: ignore[attr-defined]


def loaded(raw: Any, q: chronoq.Queue) -> bool:
    return bool(raw.function_list(library=library(q)))


# -- the function library flushed between calls ------------------------------------------


def test_function_flush_between_calls_is_transparent(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue], raw_client: Any
) -> None:
    raw = raw_client(server)
    q = open_queue(f"{server.url}?shards=2")

    def flushed() -> None:
        raw.function_flush()
        assert not loaded(raw, q)

    flushed()
    assert q.put("t", {"n": 1}, id="a").created
    assert loaded(raw, q)  # loaded again when the call found it missing
    flushed()
    q.put_many("t", [Job(2, id="b"), Job(3, id="c", delay=60)])
    flushed()
    # several calls per shard, each found missing: their results still in order
    many = q.put_many("u", [Job(n, id=f"m{n}") for n in range(450)] + [Job(0, id="m3")])
    assert [r.id for r in many] == [f"m{n}" for n in range(450)] + ["m3"]
    assert all(r.created for r in many[:450]) and not many[450].created
    assert many[450].due_at == many[3].due_at
    flushed()
    [job] = q.reserve("t")
    assert (job.id, job.payload) == ("a", {"n": 1})
    flushed()
    q.touch(job, ttr=10)
    flushed()
    q.ack(job)
    flushed()
    assert q.get("t", "a") is None
    assert q.get("t", "c") is not None
    flushed()
    assert q.stats("t")["total"] == 2
    flushed()
    assert q.reschedule("t", "c", delay=0)
    flushed()
    jobs = q.reserve("t", count=5, wait=1)
    assert sorted(j.id for j in jobs) == ["b", "c"]
    flushed()
    assert q.ack_many(jobs) == []
    flushed()
    assert q.stats("t")["total"] == 0
    history = [e.event.value for e in all_events(q, "t") if e.id == "a"]
    assert history == ["put", "reserve", "touch", "ack"]


# -- restart ----------------------------------------------------------------------------


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_same_queue_keeps_working_after_restart(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    kill: bool,
) -> None:
    server = make_server(*AOF)
    q = open_queue(server.url)
    q.put("t", "first", id="a")
    q.put("t", "later", id="b", delay=60)
    [job] = q.reserve("t", ttr=60)
    port = server.port

    server.stop(kill=kill)
    server.start()
    assert server.port == port
    raw = raw_client(server)
    assert loaded(raw, q)  # the library is data: the AOF brought it back with the jobs

    # the old connection is dead: the next call reconnects
    q.ack(job)  # the lease taken before the restart is still the live one
    assert q.get("t", "a") is None
    info = q.get("t", "b")
    assert info is not None and info.state is chronoq.State.DELAYED
    assert q.put("t", "after", id="c").created
    [again] = q.reserve("t", wait=1)
    assert (again.id, again.payload) == ("c", "after")
    q.ack(again)
    # a consumer waiting after the restart is woken by a put, as before
    got: list[chronoq.Reservation] = []
    waiter = threading.Thread(target=lambda: got.extend(q.reserve("t", wait=10)))
    waiter.start()
    wait_until(lambda: blocked_clients(raw) == 1, what="the consumer to block")
    q.put("t", "woken", id="d")
    waiter.join(5)
    assert not waiter.is_alive()
    assert [j.id for j in got] == ["d"]


# -- Redis down ------------------------------------------------------------------------

TOPIC = "down"
CALLS: dict[str, Callable[[chronoq.Queue, chronoq.Reservation], Any]] = {
    "put": lambda q, j: q.put(TOPIC, 1),
    "put_many": lambda q, j: q.put_many(TOPIC, [Job(1), Job(2)]),
    "reserve": lambda q, j: q.reserve(TOPIC),
    "reserve_wait": lambda q, j: q.reserve(TOPIC, wait=2),
    "ack": lambda q, j: q.ack(j),
    "ack_ids": lambda q, j: q.ack(TOPIC, j.id, j.lease),
    "ack_many": lambda q, j: q.ack_many([j]),
    "nack": lambda q, j: q.nack(j, delay=1),
    "touch": lambda q, j: q.touch(j),
    "bury": lambda q, j: q.bury(j),
    "get": lambda q, j: q.get(TOPIC, j.id),
    "delete": lambda q, j: q.delete(TOPIC, j.id),
    "reschedule": lambda q, j: q.reschedule(TOPIC, j.id, delay=1),
    "stats": lambda q, j: q.stats(TOPIC),
    "topics": lambda q, j: q.topics(),
    "dead": lambda q, j: q.dead(TOPIC),
    "requeue": lambda q, j: q.requeue(TOPIC),
    "requeue_ids": lambda q, j: q.requeue(TOPIC, [j.id]),
    "purge": lambda q, j: q.purge(TOPIC),
    "pause": lambda q, j: q.pause(TOPIC),
    "resume": lambda q, j: q.resume(TOPIC),
    "events": lambda q, j: q.events(TOPIC),
    "events_all": lambda q, j: q.events(),
}


@pytest.mark.timeout(20)
@pytest.mark.parametrize("password", [False, True], ids=["no-password", "password"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_method_raises_backend_unavailable_while_down(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    call: str,
    password: bool,
) -> None:
    url = server.url
    if password:
        # as `--requirepass secret` (RedisServer's start-up PING cannot authenticate)
        raw_client(server).config_set("requirepass", "secret")
        url = f"redis://:secret@127.0.0.1:{server.port}/0"
    q = open_queue(url)
    q.put_many(TOPIC, [Job(1, id="x", max_attempts=1)])
    [job] = q.reserve(TOPIC, ttr=60)  # a live lease, and a pooled connection
    server.stop()

    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        CALLS[call](q, job)
    assert time.monotonic() - started < 5  # no hang (reserve_wait: wait=2 s at most)
    exc = caught.value
    message = str(exc)
    assert f"127.0.0.1:{server.port}" in message
    assert not isinstance(exc, redis.RedisError)
    rendered = "".join(traceback.format_exception(exc)) + repr(exc) + repr(q) + q.url
    assert "redis.exceptions" not in rendered  # no redis-py traceback chained in
    if password:
        assert "secret" not in rendered
        assert f"redis://:***@127.0.0.1:{server.port}/0" in message
    else:
        assert message.startswith(f"{server.url}")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_server_lost_while_consumer_waits_raises_backend_unavailable(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    kill: bool,
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    outcome: list[object] = []

    def consume() -> None:
        try:
            outcome.append(q.reserve("t", wait=5))
        except Exception as exc:
            outcome.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    wait_until(lambda: blocked_clients(raw) == 1, what="the consumer to block")
    raw.close()
    server.stop(kill=kill)
    consumer.join(10)
    assert not consumer.is_alive()
    [error] = outcome
    assert isinstance(error, BackendUnavailable), repr(error)
    assert f"127.0.0.1:{server.port}" in str(error)


# -- durability with AOF (appendfsync always) ---------------------------------------------

PRODUCER = r"""
import json, sys
import chronoq
from chronoq.errors import BackendUnavailable

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
n = 0
while True:
    try:
        r = q.put(args["topic"], {"n": n}, id=f"job-{n}", delay=60 if n % 3 == 0 else 0)
    except BackendUnavailable:
        print("down", flush=True)
        break
    print(r.id, flush=True)
    n += 1
q.close()
"""


@pytest.mark.timeout(40)
def test_every_acknowledged_put_survives_kill_9(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    spawn: Callable[..., Child],
) -> None:
    server = make_server(*AOF)
    assert raw_client(server).config_get("appendfsync") == {"appendfsync": "always"}
    producer = spawn(PRODUCER, url=server.url, topic="aof")
    for _ in range(200):
        assert producer.expect().startswith("job-")
    server.stop(kill=True)  # mid-stream: the producer is still putting
    assert producer.finish() == 0, producer.stderr()
    assert producer.stderr() == ""
    assert producer.lines[-1] == "down"
    acknowledged = producer.lines[:-1]
    assert len(acknowledged) >= 200
    assert acknowledged == [f"job-{n}" for n in range(len(acknowledged))]

    server.start()
    q = open_queue(server.url)
    for n, job_id in enumerate(acknowledged):
        info = q.get("aof", job_id)
        assert info is not None, f"{job_id} was acknowledged, then lost"
        assert info.payload == {"n": n}
        expected = chronoq.State.DELAYED if n % 3 == 0 else chronoq.State.READY
        assert info.state is expected
    # the put in flight at the kill is all there or not at all; the indexes agree
    stats = q.stats("aof")
    assert stats["total"] - len(acknowledged) in (0, 1)
    raw = raw_client(server)
    assert stats["total"] == raw.hlen("chronoq:{aof:0}:jobs")
    assert stats["delayed"] == len([n for n in range(stats["total"]) if n % 3 == 0])


CONSUMER = r"""
import json, os, random, sys, time
import chronoq
from chronoq.errors import BackendUnavailable, LeaseLost

args = json.loads(sys.argv[1])
topic, ttr = args["topic"], args["ttr"]
q = chronoq.connect(args["url"])
rng = random.Random(args["seed"])
leases, outages, errors = [], 0, []
print("ready", flush=True)
give_up = time.monotonic() + 30
while True:
    if time.monotonic() > give_up:
        errors.append("gave up after 30 s")
        break
    # wait=0: a consumer blocked in reserve(wait>0) when Redis dies gets redis-py's
    # ConnectionError (test_server_lost_while_consumer_waits_...): not tested here
    try:
        jobs = q.reserve(topic, count=3, ttr=ttr)
    except BackendUnavailable:
        outages += 1
        time.sleep(0.02)
        continue
    if not jobs:
        if os.path.exists(args["done_file"]):
            try:
                if q.stats(topic)["total"] == 0:
                    break
            except BackendUnavailable:
                outages += 1
        time.sleep(0.005)
        continue
    for job in jobs:
        if rng.random() < 0.03:
            time.sleep(ttr * 1.5)  # outlive the lease: the job must come back
        try:
            q.ack(job)
            outcome = "acked"
        except LeaseLost:
            outcome = "lost"
        except BackendUnavailable:
            outcome = "unknown"
            outages += 1
        start = job.deadline - round(job.ttr * 1000)
        leases.append([job.id, job.lease, start, job.deadline, job.attempts, outcome])
with open(args["out"], "w") as out:
    json.dump({"leases": leases, "outages": outages, "errors": errors}, out)
q.close()
"""


def check_event_log(events: list[chronoq.Event], ids: set[str]) -> None:
    """Per job: never reserved while leased; ends acked exactly once."""
    by_id: dict[str, list[chronoq.Event]] = defaultdict(list)
    for event in events:
        by_id[event.id].append(event)
    assert set(by_id) == ids
    for job_id, history in by_id.items():
        kinds = [e.event.value for e in history]
        assert kinds[0] == "put" and kinds[-1] == "ack", (job_id, kinds)
        assert kinds.count("ack") == 1, (job_id, kinds)
        leased = False
        for kind in kinds[1:]:
            if kind == "reserve":
                assert not leased, f"{job_id} reserved while leased: {kinds}"
                leased = True
            elif kind in ("expire", "ack", "nack", "dead", "bury"):
                assert leased, (job_id, kinds)
                leased = False


@pytest.mark.timeout(50)
def test_leases_stay_exclusive_across_kill_9(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Any,
    spawn: Callable[..., Child],
    tmp_path: Path,
) -> None:
    total, consumers, ttr = 400, 3, 0.4
    server = make_server(*AOF)
    q = open_queue(server.url)
    ids = {f"job-{n}" for n in range(total)}
    q.put_many("work", [Job(n, id=f"job-{n}", max_attempts=50) for n in range(total)])
    done_file = tmp_path / "done"
    children = [
        spawn(
            CONSUMER,
            url=server.url,
            topic="work",
            ttr=ttr,
            seed=i,
            done_file=str(done_file),
            out=str(tmp_path / f"out-{i}.json"),
        )
        for i in range(consumers)
    ]
    for child in children:
        assert child.expect() == "ready"
    raw = raw_client(server)
    wait_until(lambda: raw.hlen("chronoq:{work:0}:jobs") <= total - 80, what="some acks")
    raw.close()
    server.stop(kill=True)
    time.sleep(0.3)  # long enough for every consumer to notice
    server.start()
    done_file.touch()
    for child in children:
        assert child.finish() == 0, child.stderr()
        assert child.stderr() == ""

    results = [json.loads((tmp_path / f"out-{i}.json").read_text()) for i in range(consumers)]
    assert [e for r in results for e in r["errors"]] == []
    assert sum(r["outages"] for r in results) > 0  # the kill really hit them mid-stream
    leases = [lease for r in results for lease in r["leases"]]
    # a reservation is (job, token): one token per reserve call, never reused
    assert len({(lease[0], lease[1]) for lease in leases}) == len(leases)
    assert any(lease[4] > 1 for lease in leases)  # some leases expired: jobs came back
    spans: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for job_id, _, start, deadline, _, outcome in leases:
        spans[job_id].append((start, deadline, outcome))
    assert set(spans) == ids
    for job_id, mine in spans.items():
        mine.sort()
        for (_, end, outcome), (start, _, _) in itertools.pairwise(mine):
            assert start >= end, f"{job_id} had two live leases: {mine}"
            assert outcome != "acked", f"{job_id} delivered again after an ack: {mine}"
    acked = Counter(lease[0] for lease in leases if lease[5] == "acked")
    assert max(acked.values()) == 1

    check_event_log(all_events(q, "work"), ids)
    assert all(q.get("work", job_id) is None for job_id in ids)  # all acked, none lost
    assert q.stats("work")["total"] == 0
