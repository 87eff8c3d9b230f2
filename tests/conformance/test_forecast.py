"""Conformance: the forecast (docs/contract.md §3) through both Python APIs
on every backend: delayed jobs counted per step from the store's now, the
rest in ``later``, nothing but the delayed state counted, and every count
following the jobs as they move. A sharded Redis store sums its shards.

Delays sit well inside their steps (never within 0.1 h of a boundary), so
the few ms between a put and the forecast's ``start`` move no job to
another step."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Forecast
from chronoq.errors import InvalidInput

from ..aio_bridge import BridgedQueue

H = 3600.0
# id -> delay in hours: two in the first hour, one in the second, two in the
# third, and two beyond three hours
DELAYS = {"a": 0.4, "b": 0.7, "c": 1.4, "d": 2.2, "e": 2.6, "f": 5.0, "g": 50.0}


def put_delays(q: Any, topic: str, delays: dict[str, float]) -> None:
    q.put_many(topic, [chronoq.Job(None, id=job_id, delay=h * H) for job_id, h in delays.items()])


def hours_from_now(hours: float) -> float:
    """Epoch seconds ``hours`` from now, by this machine's clock: the store's
    now comes after it, so the forecast's steps are ``ceil(hours)``."""
    return time.time() + hours * H


def delayed(q: Any, topic: str) -> int:
    return int(q.stats(topic)["delayed"])


def test_counts_per_step_and_later(queue: Any, topic: str) -> None:
    put_delays(queue, topic, DELAYS)
    hourly = queue.forecast(topic, until=hours_from_now(3))
    assert isinstance(hourly, Forecast)
    assert (hourly.topic, hourly.step, hourly.counts, hourly.later) == (topic, 3600.0, (2, 1, 2), 2)
    assert isinstance(hourly.start, int) and type(hourly.counts) is tuple
    half_hourly = queue.forecast(topic, until=hours_from_now(3), step=H / 2)
    assert half_hourly.counts == (1, 1, 1, 0, 1, 1) and half_hourly.later == 2
    assert half_hourly.step == 1800.0
    for each in (hourly, half_hourly):
        assert sum(each.counts) + each.later == delayed(queue, topic) == 7
    daily = queue.forecast(topic, until=hours_from_now(1), step=24 * H)  # one step past until
    assert daily.counts == (6,) and daily.later == 1


def test_a_topic_without_delayed_jobs_forecasts_zeros(queue: Any, topic: str) -> None:
    empty = queue.forecast(topic, until=hours_from_now(2.5), step=H)
    assert empty.counts == (0, 0, 0) and empty.later == 0


def test_only_delayed_jobs_count(queue: Any, topic: str) -> None:
    queue.put(topic, "dead", id="dead")
    [job] = queue.reserve(topic)
    queue.bury(job)
    queue.put(topic, "reserved", id="reserved")
    [held] = queue.reserve(topic)
    queue.put(topic, "ready", id="ready")
    # due in 50 ms and then left alone: ready, though no reserve has moved it yet
    queue.put(topic, "fell due", id="fell-due", delay=0.05)
    queue.put(topic, "delayed", id="delayed", delay=0.5 * H)
    time.sleep(0.2)
    found = queue.forecast(topic, until=hours_from_now(2))  # first: stats may promote it
    assert found.counts == (1, 0) and found.later == 0
    stats = queue.stats(topic)
    assert (stats["delayed"], stats["ready"], stats["reserved"], stats["dead"]) == (1, 2, 1, 1)
    queue.ack(held)


def test_counts_follow_reschedule_and_delete(queue: Any, topic: str) -> None:
    queue.put(topic, None, id="x", delay=0.5 * H)

    def counts() -> tuple[tuple[int, ...], int]:
        found = queue.forecast(topic, until=hours_from_now(3))
        assert sum(found.counts) + found.later == delayed(queue, topic)
        return found.counts, found.later

    assert counts() == ((1, 0, 0), 0)
    assert queue.reschedule(topic, "x", delay=2.5 * H)
    assert counts() == ((0, 0, 1), 0)
    assert queue.reschedule(topic, "x", run_at=datetime.now(UTC) + timedelta(days=30))
    assert counts() == ((0, 0, 0), 1)
    assert queue.reschedule(topic, "x", delay=0)  # ready now: no longer forecast
    assert counts() == ((0, 0, 0), 0)
    assert queue.reschedule(topic, "x", delay=1.5 * H)
    assert counts() == ((0, 1, 0), 0)
    assert queue.delete(topic, "x")
    assert counts() == ((0, 0, 0), 0)


def test_a_nacked_job_is_forecast_at_its_retry(queue: Any, topic: str) -> None:
    queue.put(topic, None, id="retry")
    [job] = queue.reserve(topic)
    assert queue.forecast(topic, until=hours_from_now(2)).counts == (0, 0)  # reserved
    queue.nack(job, delay=1.5 * H)
    assert queue.forecast(topic, until=hours_from_now(2)).counts == (0, 1)


def test_start_is_the_stores_now(queue: Any, topic: str) -> None:
    # a job put with no delay is due at the store's now of its put
    before = queue.put(topic, None).due_at
    found = queue.forecast(topic, until=hours_from_now(1))
    after = queue.put(topic, None).due_at
    assert before <= found.start <= after


def test_until_takes_a_datetime_in_any_zone(queue: Any, topic: str) -> None:
    put_delays(queue, topic, DELAYS)
    naive = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=3)  # naive means UTC
    east = datetime.now(timezone(timedelta(hours=5, minutes=30))) + timedelta(hours=3)
    for until in (naive, east):
        found = queue.forecast(topic, until=until)
        assert found.counts == (2, 1, 2) and found.later == 2


def test_the_most_steps(queue: Any, topic: str) -> None:
    queue.put(topic, None, id="late", delay=9000.5)
    # 10,000 steps of a second (9,999 if the store's now came a second after
    # this clock's), one of them holding the job: its step is 9,000 from the put,
    # or up to a minute before on Redis, whose far tier counts a job in the step
    # of its minute bucket's start (docs/contract.md §3, forecast)
    found = queue.forecast(topic, until=time.time() + 10_000, step=1)
    assert 9_999 <= len(found.counts) <= 10_000 and found.later == 0
    assert sum(found.counts) == 1 and 8939 <= found.counts.index(1) <= 9000
    with pytest.raises(InvalidInput, match=r"at most 10000 steps.* 2000\d steps of 1 s") as over:
        queue.forecast(topic, until=time.time() + 20_000.5, step=1)
    assert "larger step or an earlier until" in str(over.value)
    assert delayed(queue, topic) == 1  # a refused forecast changed nothing


def _ago(seconds: float) -> Any:
    return lambda: time.time() - seconds


def _ahead() -> float:
    return hours_from_now(3)


@pytest.mark.parametrize(
    ("until", "step", "message"),
    [
        (_ago(60), H, "until must be later than now, by the store's clock"),
        (_ago(0.001), H, "until must be later than now"),
        (lambda: datetime(2000, 1, 1), H, "until must be later than now"),
        (lambda: "tomorrow", H, "until must be a datetime or epoch seconds, got 'tomorrow'"),
        (lambda: True, H, "until must be a datetime or epoch seconds"),
        (lambda: float("nan"), H, "until must be a datetime or epoch seconds"),
        (lambda: time.time() * 1000, H, r"is not an epoch time in seconds .*milliseconds"),
        (_ahead, 0.5, "step must be at least 1 s, got 0.5"),
        (_ahead, 0, "step must be at least 1 s"),
        (_ahead, -1, "step must be between 0 and"),
        (_ahead, "1h", "step must be a number of seconds, got '1h'"),
        (_ahead, float("inf"), "step must be between 0 and"),
    ],
)
def test_bad_until_or_step_is_invalid_input(
    queue: Any, topic: str, until: Any, step: Any, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        queue.forecast(topic, until=until(), step=step)


def test_until_is_keyword_only(queue: Any, topic: str) -> None:
    with pytest.raises(TypeError):
        queue.forecast(topic, hours_from_now(1))


# -- a sharded Redis store --------------------------------------------------------------


@pytest.fixture(params=["sync", "aio"])
def sharded(request: pytest.FixtureRequest, store_url: str) -> Iterator[Any]:
    """The test's store with its topics over 4 shards, through each API."""
    if not store_url.startswith("redis"):
        pytest.skip("a SQLite store keeps a topic in one shard")
    url = f"{store_url}&shards=4"
    q: Any = (
        chronoq.connect(url)
        if request.param == "sync"
        else BridgedQueue(lambda: chronoq.aio.connect(url))
    )
    yield q
    q.close()


def test_a_sharded_store_sums_its_shards(sharded: Any, topic: str) -> None:
    assert sharded.shards == 4
    delays = {f"{job_id}{n}": h for n in range(6) for job_id, h in DELAYS.items()}
    put_delays(sharded, topic, delays)
    per_shard = sharded.stats(topic, per_shard=True)["shards"]
    assert len(per_shard) == 4 and all(shard["delayed"] > 0 for shard in per_shard)
    hourly = sharded.forecast(topic, until=hours_from_now(3))
    assert hourly.counts == (12, 6, 12) and hourly.later == 12
    assert sum(hourly.counts) + hourly.later == delayed(sharded, topic) == 42
    half_hourly = sharded.forecast(topic, until=hours_from_now(3), step=H / 2)
    assert half_hourly.counts == (6, 6, 6, 0, 6, 6) and half_hourly.later == 12
    # a shard but the first alone: it counts from the start the first one picked
    shard = next(n for n in (1, 2, 3) if per_shard[n]["delayed"])
    mine = {job_id for job_id in delays if sharded.shard_of(job_id) == shard}
    for job_id in delays.keys() - mine:
        assert sharded.delete(topic, job_id)
    alone = sharded.forecast(topic, until=hours_from_now(3))
    expected = [0, 0, 0]
    for job_id in mine:
        if delays[job_id] < 3:
            expected[int(delays[job_id])] += 1
    assert list(alone.counts) == expected and alone.later == len(mine) - sum(expected)
    assert sum(expected) > 0
