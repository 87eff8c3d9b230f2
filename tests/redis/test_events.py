"""The Redis event log's packed entries (lua/lib/3_events.lua, emit_event): every field
survives the packing at the edges of its encodings, and the log keeps its
numbering when its counter key is lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chronoq
from chronoq import Job

from ..children import all_events
from ..redis_server import RedisServer


def test_every_event_field_survives_packing(
    server: RedisServer, open_queue: Callable[[str], chronoq.Queue]
) -> None:
    q = open_queue(server.url)
    month = 31 * 24 * 3600  # due_at - ts over 2^31 ms: the 6-byte encoding
    far = q.put("t", "far", id="far", delay=month, priority=-7)
    q.put("t", "x", id="x" * 256, priority=1000, max_attempts=1000)  # longest id
    error = "é" * 40_000  # the facade keeps 10,000 characters: 20,000 bytes here
    for _ in range(300):  # attempts past 255: the 4-byte encoding
        [job] = q.reserve("t")
        q.nack(job, delay=0, error=error)
    events = [e for e in all_events(q, "t") if e.id == "x" * 256]
    assert [e.event.value for e in events[:3]] == ["put", "reserve", "nack"]
    reserves = [e for e in events if e.event.value == "reserve"]
    assert [e.attempt for e in reserves] == list(range(1, 301))
    assert all(e.priority == 1000 for e in events)
    assert all(e.lag_ms is not None and e.lag_ms >= 0 for e in reserves)
    nack = next(e for e in events if e.event.value == "nack")
    assert nack.error == error[:9_999] + "…"
    [put_far] = [e for e in all_events(q, "t") if e.id == "far"]
    assert (put_far.due_at, put_far.priority, put_far.attempt) == (far.due_at, -7, 0)
    assert put_far.due_at - put_far.ts_ms == month * 1000
    assert put_far.lag_ms is None and put_far.error is None


def test_log_goes_on_after_its_counter_is_deleted(
    server: RedisServer,
    open_queue: Callable[[str], chronoq.Queue],
    raw_client: Callable[..., Any],
) -> None:
    q = open_queue(server.url)
    raw = raw_client(server)
    q.put_many("t", [Job(n, id=f"a-{n}") for n in range(300)])
    page = q.events("t", limit=100)
    raw.delete("chronoq:{t:0}:evseq")  # e.g. restored from an older dump on its own
    q.put_many("t", [Job(n, id=f"b-{n}") for n in range(300)])
    q.put("t", "c", id="c")
    rest: list[chronoq.Event] = []
    cursor = page.cursor
    while (more := q.events("t", cursor=cursor, limit=70)).events:
        rest += more.events
        cursor = more.cursor
    ids = [e.id for e in page.events + rest]
    assert ids == [f"a-{n}" for n in range(300)] + [f"b-{n}" for n in range(300)] + ["c"]
    seqs = [e.seq for e in page.events + rest]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
