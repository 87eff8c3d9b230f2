"""Recurring jobs (chronoq.recurring), on every backend and through both APIs:
defining, listing and removing schedules, and ``run_recurring`` putting each
occurrence once, with missed ones collapsed, from many callers at once."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq import Recurring, Worker
from chronoq.backends.sqlite import schedules as sqlite_schedules
from chronoq.errors import InvalidInput
from chronoq.schedule import Schedule

from .children import all_events


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def sleep_until(at_ms: int) -> None:
    time.sleep(max(at_ms - now_ms(), 0) / 1000)


def occurrence_at(job_id: str, name: str) -> int:
    prefix, at = job_id.split("@")
    assert prefix == name
    return int(at)


def put_ids(q: Any, topic: str) -> list[str]:
    return [e.id for e in all_events(q, topic) if e.event == "put"]


# -- defining, listing, removing ---------------------------------------------------------


def test_define_list_redefine_remove(api_queue: Any, topic: str) -> None:
    q = api_queue
    before = now_ms()
    nightly = q.recurring(topic, name="nightly", cron="0 3 * * *", payload={"report": "daily"})
    assert isinstance(nightly, Recurring)
    assert (nightly.topic, nightly.name, nightly.cron, nightly.every) == (
        topic,
        "nightly",
        "0 3 * * *",
        None,
    )
    assert (nightly.tz, nightly.payload, nightly.priority) == ("UTC", {"report": "daily"}, 0)
    assert (nightly.ttr, nightly.max_attempts, nightly.last_at) == (30.0, 5, None)
    assert before - 5_000 <= nightly.created_at <= now_ms() + 5_000
    assert nightly.next_at == Schedule("n", cron="0 3 * * *").next_after(nightly.created_at)

    tick = q.recurring(
        topic, name="a.tick", every=60, payload=b"\x00\xffraw", priority=7, ttr=1.5, max_attempts=2
    )
    assert (tick.every, tick.cron, tick.payload) == (60, None, b"\x00\xffraw")
    assert (tick.priority, tick.ttr, tick.max_attempts) == (7, 1.5, 2)
    assert [r.name for r in q.recurring_list(topic)] == ["a.tick", "nightly"]
    assert q.recurring_list(topic + "-other") == []

    paris = q.recurring(topic, name="nightly", cron="30 9 * * 1-5", tz="Europe/Paris", payload=1)
    assert (paris.cron, paris.tz, paris.payload) == ("30 9 * * 1-5", "Europe/Paris", 1)
    assert paris.created_at == nightly.created_at  # a redefinition keeps its creation time
    assert [(r.name, r.cron, r.payload) for r in q.recurring_list(topic)] == [
        ("a.tick", None, b"\x00\xffraw"),
        ("nightly", "30 9 * * 1-5", 1),
    ]

    assert q.recurring_remove(topic, "nightly") is True
    assert q.recurring_remove(topic, "nightly") is False
    assert [r.name for r in q.recurring_list(topic)] == ["a.tick"]


def test_schedules_are_not_jobs(api_queue: Any, topic: str) -> None:
    """topics() lists topics with jobs (or paused), not those with only
    schedules; purge deletes jobs and keeps schedules; defining appends no event."""
    q = api_queue
    q.recurring(topic, name="hourly", cron="0 * * * *")
    assert topic not in q.topics()
    assert all_events(q, topic) == []
    q.put(topic, {"plain": True})
    assert q.purge(topic) == 1
    assert [r.name for r in q.recurring_list(topic)] == ["hourly"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "n", "cron": "0 3 * *"}, "5 fields"),
        ({"name": "n", "cron": "0 25 * * *"}, "invalid cron"),
        ({"name": "n", "cron": "0 0 30 2 *"}, "never fires"),
        ({"name": "n", "cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"name": "n", "cron": "0 3 * * *", "every": 60}, "give cron or every"),
        ({"name": "n"}, "give cron or every"),
        ({"name": "n", "every": 0}, "every must be"),
        ({"name": "bad name", "every": 60}, "invalid schedule name"),
        ({"name": "n@1", "every": 60}, "invalid schedule name"),
        ({"name": 7, "every": 60}, "invalid schedule name"),
        ({"name": "n", "every": 60, "payload": object()}, "not JSON-serializable"),
        ({"name": "n", "every": 60, "payload": b"x" * 2_000_000}, "over the limit"),
        ({"name": "n", "every": 60, "priority": 5000}, "priority must be"),
        ({"name": "n", "every": 60, "ttr": 0}, "ttr must be"),
        ({"name": "n", "every": 60, "max_attempts": 0}, "max_attempts must be"),
    ],
)
def test_bad_definitions_are_refused_and_write_nothing(
    api_queue: Any, topic: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        api_queue.recurring(topic, **kwargs)
    assert api_queue.recurring_list(topic) == []


def test_bad_topics_and_names_are_refused(api_queue: Any, topic: str) -> None:
    with pytest.raises(InvalidInput, match="invalid topic"):
        api_queue.recurring("bad topic", name="n", every=60)
    with pytest.raises(InvalidInput, match="invalid topic"):
        api_queue.recurring_list("bad topic")
    with pytest.raises(InvalidInput, match="invalid topic"):
        api_queue.run_recurring("")
    with pytest.raises(InvalidInput, match="invalid schedule name"):
        api_queue.recurring_remove(topic, "has space")


# -- running --------------------------------------------------------------------------------


def test_an_every_schedule_puts_each_due_occurrence_once(api_queue: Any, topic: str) -> None:
    q = api_queue
    r = q.recurring(topic, name="tick", every=0.5, payload={"n": 1}, priority=3, max_attempts=2)
    assert r.next_at is not None and r.next_at > r.created_at
    sleep_until(r.next_at + 20)
    run = q.run_recurring(topic)
    assert len(run.put) == 1 and run.put[0].created
    first = run.put[0].id
    at = occurrence_at(first, "tick")
    assert at % 500 == 0 and at > r.created_at
    assert run.next_at is not None and run.next_at > at

    job = q.get(topic, first)
    assert job is not None
    assert (job.payload, job.priority, job.max_attempts, job.ttr) == ({"n": 1}, 3, 2, 30.0)
    assert job.due_at >= at and job.unique_for > 0.5
    (listed,) = q.recurring_list(topic)
    assert listed.last_at == at

    for _ in range(3):  # a later occurrence may fall due meanwhile; this one never again
        assert first not in [p.id for p in q.run_recurring(topic).put]
    assert put_ids(q, topic).count(first) == 1


def test_missed_occurrences_collapse_into_the_latest(api_queue: Any, topic: str) -> None:
    q = api_queue
    r = q.recurring(topic, name="fast", every=0.2)
    time.sleep(1.0)  # down: about five occurrences missed
    start = now_ms()
    run = q.run_recurring(topic)
    end = now_ms()
    (put,) = run.put
    at = occurrence_at(put.id, "fast")
    assert start // 200 * 200 <= at <= end // 200 * 200  # the latest one due
    assert (at - r.created_at) // 200 >= 3  # with several missed before it
    assert put_ids(q, topic) == [put.id]


def test_an_acked_occurrence_is_not_put_again(api_queue: Any, topic: str) -> None:
    q = api_queue
    r = q.recurring(topic, name="job", every=0.5)
    sleep_until(r.next_at + 20)
    (put,) = q.run_recurring(topic).put
    (job,) = q.reserve(topic)
    assert job.id == put.id
    q.ack(job)
    assert put.id not in [p.id for p in q.run_recurring(topic).put]
    # a caller that read the schedule before the mark and puts late: remembered
    late = q.put(topic, None, id=put.id, run_at=occurrence_at(put.id, "job") / 1000)
    assert late.created is False
    q.purge(topic)  # forgets the remembered ids, not the schedule's last occurrence
    assert put.id not in [p.id for p in q.run_recurring(topic).put]


def test_a_cron_schedule_does_not_fire_for_an_occurrence_before_it(
    api_queue: Any, topic: str
) -> None:
    q = api_queue
    r = q.recurring(topic, name="minutely", cron="* * * * *")
    run = q.run_recurring(topic)
    assert run.put == [] or all(occurrence_at(p.id, "minutely") > r.created_at for p in run.put)
    assert run.next_at is not None and run.next_at % 60_000 == 0
    assert run.next_at - 60_000 <= now_ms() < run.next_at + 60_000


def test_a_redefinition_keeps_the_last_occurrence(api_queue: Any, topic: str) -> None:
    q = api_queue
    r = q.recurring(topic, name="job", every=0.5, payload=1)
    sleep_until(r.next_at + 20)
    (put,) = q.run_recurring(topic).put
    again = q.recurring(topic, name="job", every=0.5, payload=2)
    assert (again.created_at, again.last_at) == (r.created_at, occurrence_at(put.id, "job"))
    assert put.id not in [p.id for p in q.run_recurring(topic).put]


def test_several_schedules_in_one_run_and_removal(api_queue: Any, topic: str) -> None:
    q = api_queue
    a = q.recurring(topic, name="a", every=0.3)
    q.recurring(topic, name="b", every=0.4)
    q.recurring(topic, name="never-yet", cron="0 0 1 1 *")
    time.sleep(0.9)
    run = q.run_recurring(topic)
    assert sorted(p.id.split("@")[0] for p in run.put) == ["a", "b"]
    assert run.next_at is not None and run.next_at <= now_ms() + 400
    assert q.recurring_remove(topic, "a") and q.recurring_remove(topic, "b")
    time.sleep(0.35)
    assert q.run_recurring(topic).put == []
    assert q.get(topic, next(p.id for p in run.put if p.id.startswith("a@"))) is not None
    assert a.next_at is not None


def test_mark_only_raises_and_ignores_a_removed_schedule(queue: chronoq.Queue, topic: str) -> None:
    backend = queue.backend
    assert backend.schedules_put(topic, "s", b"{}") is True
    assert backend.schedules_put(topic, "s", b'{"v":1}') is False
    backend.schedules_mark(topic, "s", 2_000)
    backend.schedules_mark(topic, "s", 1_000)
    now, (stored,) = backend.schedules_list(topic)
    assert (stored.name, stored.spec, stored.last_at) == ("s", b'{"v":1}', 2_000)
    assert abs(now - now_ms()) < 5_000 and stored.created_at <= now
    assert backend.schedules_remove(topic, "s") is True
    backend.schedules_mark(topic, "s", 3_000)
    assert backend.schedules_list(topic)[1] == []
    assert backend.schedules_put(topic, "s", b"{}") is True
    assert backend.schedules_list(topic)[1][0].last_at is None


def test_an_older_sqlite_store_gets_the_schedules_table(sqlite_url: str, tmp_path: Path) -> None:
    chronoq.connect(sqlite_url).close()
    with sqlite3.connect(tmp_path / "chronoq.db") as db:
        db.execute("DROP TABLE schedules")
    db.close()
    with chronoq.connect(sqlite_url) as q:
        q.recurring("t", name="n", every=60)
        assert [r.name for r in q.recurring_list("t")] == ["n"]


# -- many callers at once -------------------------------------------------------------------

RACE = r"""
import json, sys, time
import chronoq

args = json.loads(sys.argv[1])
q = chronoq.connect(args["url"])
print("ready", flush=True)
sys.stdin.readline()
calls, created = [], []
end = time.time() + args["seconds"]
while time.time() < end:
    start = time.time_ns() // 1_000_000
    run = q.run_recurring(args["topic"])
    calls.append([start, time.time_ns() // 1_000_000])
    created += [p.id for p in run.put]
    time.sleep(0.002)
print(json.dumps({"calls": calls, "created": created}), flush=True)
q.close()
"""
RACE_S = 1.2
EVERY_MS = 100


def call_in_a_loop(q: Any, topic: str, records: list[dict[str, list[Any]]]) -> None:
    """What a RACE child does, in a thread."""
    calls, created = [], []
    end = time.time() + RACE_S
    while time.time() < end:
        start = now_ms()
        run = q.run_recurring(topic)
        calls.append([start, now_ms()])
        created += [p.id for p in run.put]
        time.sleep(0.002)
    records.append({"calls": calls, "created": created})


def ack_in_a_loop(q: Any, topic: str) -> None:
    """Acks each occurrence at once: then only the mark and unique_for dedupe."""
    end = time.time() + RACE_S + 0.3
    while time.time() < end:
        for job in q.reserve(topic, count=10, wait=0.05):
            q.ack(job)


def assert_no_gap_but_collapse(
    records: list[dict[str, list[Any]]], created: set[int], created_at: int
) -> None:
    """A call that read the schedule entirely within an occurrence's interval
    saw that occurrence due, so it exists (whoever put it)."""
    for record in records:
        for start, end in record["calls"]:
            at = start // EVERY_MS * EVERY_MS
            if at == end // EVERY_MS * EVERY_MS and at > created_at:
                assert at in created, f"occurrence {at} was due during a call and never put"


def test_racing_callers_put_each_occurrence_once(
    api_queue: Any, store_url: str, topic: str, spawn: Any
) -> None:
    q = api_queue
    r = q.recurring(topic, name="race", every=EVERY_MS / 1000)
    children = [spawn(RACE, url=store_url, topic=topic, seconds=RACE_S) for _ in range(2)]
    for child in children:
        assert child.expect() == "ready"
    records: list[dict[str, list[Any]]] = []
    threads = [threading.Thread(target=call_in_a_loop, args=(q, topic, records)) for _ in "ab"]
    threads.append(threading.Thread(target=ack_in_a_loop, args=(q, topic)))
    for child in children:
        child.send("go")
    for thread in threads:
        thread.start()
    for child in children:
        records.append(json.loads(child.expect()))
        assert child.finish() == 0, child.stderr()
    for thread in threads:
        thread.join()

    assert len(records) == 4
    reported = [job_id for record in records for job_id in record["created"]]
    logged = put_ids(q, topic)
    assert Counter(logged).most_common(1)[0][1] == 1, "an occurrence was put twice"
    assert sorted(reported) == sorted(logged)  # each creation reported by one caller
    created = {occurrence_at(job_id, "race") for job_id in logged}
    assert all(at % EVERY_MS == 0 and at > r.created_at for at in created)
    assert_no_gap_but_collapse(records, created, r.created_at)
    assert len(created) >= RACE_S * 1000 / EVERY_MS / 3  # most were put


# -- a store clock that differs from the local one (Redis TIME on another machine) --

SKEW_MS = 3_600_000  # the store's clock is an hour behind this machine's


@pytest.fixture
def store_clock_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    real = sqlite_schedules.now_ms
    monkeypatch.setattr(sqlite_schedules, "now_ms", lambda: real() - SKEW_MS)


@pytest.mark.usefixtures("store_clock_behind")
def test_run_recurring_says_how_long_to_wait_by_the_stores_clock(
    sqlite_url: str, topic: str
) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.recurring(topic, name="tick", every=60)
        run = q.run_recurring(topic)
        assert run.next_at is not None and run.next_in is not None
        assert 0 < run.next_in <= 60  # not next_at minus the local clock: an hour ago


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("store_clock_behind")
def test_a_worker_ahead_of_the_stores_clock_does_not_spin(
    sqlite_url: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.recurring(topic, name="tick", every=60)
        calls = 0
        listing = q.backend.schedules_list

        def counted(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return listing(*args)

        monkeypatch.setattr(q.backend, "schedules_list", counted)
        worker = Worker(q, {topic: lambda job: None})
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        time.sleep(1.5)  # the worker refreshes every second when nothing is due sooner
        worker.stop(now=True)
        thread.join(20)
        assert not thread.is_alive()
        # the next occurrence is a minute away by the store's clock: a worker
        # that compared it with its own clock (an hour ahead) called again at once
        assert calls <= 5, f"run_recurring called {calls} times in 1.5 s"
