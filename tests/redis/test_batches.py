"""How the Redis backend uses Redis: put_many runs as several script calls of
at most 200 jobs, sent in one round trip, so Redis serves others between them,
and the batch still behaves as one put_many (results in order, an id repeated
later in the batch sees the first); each thread keeps one connection while it
lives."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import chronoq
from chronoq import Job

from ..children import all_events
from .conftest import ServerFactory

PUT_CHUNK = 200  # backend.py


def test_a_big_put_many_is_several_bounded_calls_in_one_round_trip(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    server = make_server("--slowlog-log-slower-than", "0", "--slowlog-max-len", "10000")
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put("t", "warm", id="warm")  # the library is loaded
    raw.slowlog_reset()
    jobs = [Job(n, id=f"j-{n}", delay=60 if n % 2 else 0) for n in range(1000)]
    jobs.append(Job("again", id="j-3"))  # same id as an earlier job, in the last chunk
    results = q.put_many("t", jobs)

    assert [r.id for r in results] == [f"j-{n}" for n in range(1000)] + ["j-3"]
    assert all(r.created for r in results[:1000])
    assert not results[1000].created and results[1000].due_at == results[3].due_at
    info = q.get("t", "j-3")
    assert info is not None and info.payload == 3
    functions = q.backend._scripts.functions  # type: ignore[attr-defined]
    puts = [
        e
        for e in raw.slowlog_get(10_000)
        if e["command"].split()[:2] == [b"FCALL", functions["put"].encode()]
    ]
    assert len(puts) == -(-1001 // PUT_CHUNK)
    stats = q.stats("t")
    assert (stats["ready"], stats["delayed"]) == (501, 500)  # with "warm"
    assert sorted(e.id for e in all_events(q, "t") if e.event.value == "put") == sorted(
        ["warm", *(f"j-{n}" for n in range(1000))]
    )


def test_threads_that_end_give_their_connection_back(
    make_server: ServerFactory,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    server = make_server()
    q = open_queue(server.url)
    raw = raw_client(server)
    for round_ in range(10):  # like a server with a thread per request: 100 threads in all
        threads = [
            threading.Thread(target=q.put, args=("t", n), kwargs={"id": f"{round_}-{n}"})
            for n in range(10)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    gc.collect()
    assert q.stats("t")["total"] == 100
    clients = len(raw.client_list()) - 1  # without the raw client itself
    assert clients <= 12, f"{clients} connections open after 100 threads came and went"


def test_a_reservation_reads_the_leased_record_like_get_does(
    make_server: ServerFactory, open_queue: Callable[[str], chronoq.Queue]
) -> None:
    """reserve returns each job's leased record and the client reads it on a
    fast path (every field at its default) or the general one: both agree with get."""
    q = open_queue(make_server().url)
    q.put("t", {"plain": 1}, id="plain")
    q.put("t", b"\x00raw", ttr=7, max_attempts=9, priority=-3, unique_for=60)
    q.put("t", [1, 2], id="failed", max_attempts=3)
    first = q.reserve("t", 3)
    failed = next(r for r in first if r.id == "failed")
    q.nack(failed, delay=0, error="boom " * 10)  # the record now carries an error
    for r in first:
        if r.id != "failed":
            q.nack(r, delay=0)
    jobs = q.reserve("t", 3, ttr=2.5)
    assert sorted(r.id for r in jobs) == sorted(r.id for r in first)
    for r in jobs:
        info = q.get("t", r.id)
        assert info is not None
        assert r.lease == jobs[0].lease  # one token per reserve call
        assert (r.payload, r.attempts, r.deadline, r.due_at) == (
            info.payload,
            info.attempts,
            info.deadline,
            info.due_at,
        )
        assert (r.priority, r.max_attempts, r.created_at) == (
            info.priority,
            info.max_attempts,
            info.created_at,
        )
        assert r.attempts == 2 and r.ttr == 2.5
    assert q.ack_many(jobs) == []
