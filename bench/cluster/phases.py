"""The timed phases of the cluster benchmark: each prepares its jobs untimed, then runs
metered (wall time, and what the servers spent: stores.Meter), on a topic of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common import PAYLOAD, RUN, batches, consume, make_jobs, produce_on
from stores import Meter, Store, Usage

import chronoq

LAG_RATE = 200.0  # jobs/s put live in the lag phase
LAG_MAX_DELAY = 0.5  # s; delays uniform in [0.05, this]

Prepare = Callable[[chronoq.Queue, str, int], Any]
Run = Callable[[chronoq.Queue, str, int, Any], int]


@dataclass(frozen=True)
class Phase:
    key: str
    label: str
    prepare: Prepare
    run: Run


@dataclass(frozen=True)
class Sample:
    """One phase on one store in one round."""

    store: str
    phase: str
    round: int
    jobs: int
    seconds: float
    usage: Usage
    lags: tuple[float, ...] = ()

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds

    @property
    def cpu_us_per_job(self) -> float:
        return self.usage.total_cpu / self.jobs * 1e6

    @property
    def calls_per_job(self) -> float:
        return self.usage.total_calls / self.jobs


def no_prepare(q: chronoq.Queue, topic: str, n: int) -> None:
    return None


def run_put_one(q: chronoq.Queue, topic: str, n: int, _: object) -> int:
    put = q.put
    for i in range(n):
        put(topic, {**PAYLOAD, "n": i})
    return n


def chunked(size: int) -> Prepare:
    def prepare(q: chronoq.Queue, topic: str, n: int) -> list[list[chronoq.Job]]:
        return list(batches(make_jobs(n), size))

    return prepare


def run_put_many(q: chronoq.Queue, topic: str, n: int, chunks: list[list[chronoq.Job]]) -> int:
    for chunk in chunks:
        q.put_many(topic, chunk)
    return n


def fill(q: chronoq.Queue, topic: str, n: int) -> None:
    for chunk in batches(make_jobs(n), 1000):
        q.put_many(topic, chunk)


def drain_by(count: int) -> Run:
    """reserve(count) then ack (count 1) or ack_many until the ``n`` jobs are gone."""

    def run(q: chronoq.Queue, topic: str, n: int, _: object) -> int:
        done = 0
        deadline = time.monotonic() + 120
        while done < n and time.monotonic() < deadline:
            jobs = q.reserve(topic, count)
            if count == 1 and jobs:
                q.ack(jobs[0])
            elif jobs:
                q.ack_many(jobs)
            done += len(jobs)
        if done != n:
            raise RuntimeError(f"drained {done} jobs of {n} from {topic}")
        return n

    return run


PHASES = (
    Phase("put_one", "put, one at a time", no_prepare, run_put_one),
    Phase("put_many_100", "put_many, batches of 100", chunked(100), run_put_many),
    Phase("put_many_1000", "put_many, batches of 1,000", chunked(1000), run_put_many),
    Phase("reserve_1", "reserve(count=1) + ack", fill, drain_by(1)),
    Phase("reserve_100", "reserve(count=100) + ack_many", fill, drain_by(100)),
)


def topic_of(store: Store, phase: str, rnd: int) -> str:
    return f"bench.{RUN}.{store.key}.{phase}.{rnd}"


def measure(store: Store, q: chronoq.Queue, meter: Meter, phase: Phase, n: int, rnd: int) -> Sample:
    topic = topic_of(store, phase.key, rnd)
    state = phase.prepare(q, topic, n)
    meter.start()
    began = time.perf_counter()
    done = phase.run(q, topic, n, state)
    seconds = time.perf_counter() - began
    usage = meter.stop()
    store.flush()
    return Sample(store.key, phase.key, rnd, done, seconds, usage)


def measure_lag(store: Store, meter: Meter, n: int, rnd: int) -> Sample:
    """A consumer thread in reserve(wait=0.5) on a Queue of its own; this thread puts ``n``
    jobs at LAG_RATE with delays uniform in [0.05, LAG_MAX_DELAY] s on another Queue."""
    topic = topic_of(store, "lag", rnd)
    consumer, producer = chronoq.connect(store.url), chronoq.connect(store.url)
    lags: list[float] = []
    give_up = time.monotonic() + n / LAG_RATE + LAG_MAX_DELAY + 10
    failed = threading.Event()

    def run() -> None:
        lags.extend(consume(consumer, topic, n, give_up, failed.is_set, count=1))

    thread = threading.Thread(target=run, name="bench-consumer")
    meter.start()
    began = time.perf_counter()
    thread.start()
    time.sleep(0.2)  # let the consumer block in reserve(wait=...)
    try:
        produce_on(producer, topic, n, LAG_RATE, LAG_MAX_DELAY, seed=rnd)
    except BaseException:
        failed.set()
        raise
    finally:
        thread.join()
        seconds = time.perf_counter() - began
        usage = meter.stop()
        consumer.close()
        producer.close()
        store.flush()
    return Sample(store.key, "lag", rnd, len(lags), seconds, usage, tuple(lags))
