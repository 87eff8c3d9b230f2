"""The jobs of the scale benchmark and the processes that put them.

Every job has the peer harness's shape (bench/peers/run.py ``enqueue_figures``):
payload ``{"i": "enq-<k>", "due": <due, s>}`` (~40 bytes of JSON), ``run_at`` its due
time, a generated id. A fill is split over producer processes (spawned: they share
no connection and no lock with this one), each putting its share with ``put_many`` in
batches of 1,000; a rich progress bar follows their shared count."""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import chronoq

__all__ = ["BATCH", "DAY_S", "SPAWN", "Putting", "Spread", "jobs_of", "put_all"]

BATCH = 1000  # jobs per put_many call, as in bench/redis.py and the peers' bulk API
DAY_S = 86_400.0
SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Spread:
    """Due times uniform in [first, first + span) seconds since the epoch, on whole ms
    (the store keeps ms); ``seed`` makes a fill repeatable."""

    first: float
    span: float
    seed: int = 1


def jobs_of(lo: int, hi: int, spread: Spread, rng: random.Random) -> list[chronoq.Job]:
    """Jobs ``lo`` to ``hi - 1``, in the harness's shape."""
    out = []
    for k in range(lo, hi):
        due = round(spread.first + rng.random() * spread.span, 3)
        out.append(chronoq.Job({"i": f"enq-{k}", "due": due}, run_at=due))
    return out


@dataclass
class Shared:
    """What the producer processes and this one share: how many are connected, a
    start signal, jobs put so far, the latest time.monotonic() (system-wide on
    Linux) at which a producer ended, and the seconds spent building Job values."""

    ready: Synchronized[int]
    go: Event
    done: Synchronized[int]
    finished: Synchronized[float]
    build_s: Synchronized[float]

    @classmethod
    def new(cls) -> Shared:
        return cls(
            SPAWN.Value("q", 0),
            SPAWN.Event(),
            SPAWN.Value("q", 0),
            SPAWN.Value("d", 0.0),
            SPAWN.Value("d", 0.0),
        )


@dataclass(frozen=True)
class Putting:
    """A fill: its wall time (all producers connected → the last put's reply) and the
    producers' time spent building jobs (included in it)."""

    jobs: int
    producers: int
    seconds: float
    build_seconds: float

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


def _produce(url: str, topic: str, lo: int, hi: int, spread: Spread, shared: Shared) -> None:
    """One producer process: jobs ``lo`` to ``hi - 1``, put in batches once ``go`` is set."""
    rng = random.Random(spread.seed * 1_000_003 + lo)
    with chronoq.connect(url) as q:
        q.get(topic, "warm-up")  # connected, the functions loaded, before the clock starts
        with shared.ready.get_lock():
            shared.ready.value += 1
        shared.go.wait()
        for first in range(lo, hi, BATCH):
            last = min(hi, first + BATCH)
            built = time.perf_counter()
            jobs = jobs_of(first, last, spread, rng)
            building = time.perf_counter() - built
            q.put_many(topic, jobs)
            with shared.done.get_lock():
                shared.done.value += last - first
                shared.build_s.value += building
        with shared.finished.get_lock():
            shared.finished.value = max(shared.finished.value, time.monotonic())


def put_all(
    url: str, topic: str, n: int, spread: Spread, producers: int, label: str, say: Console
) -> Putting:
    """Put ``n`` jobs over ``producers`` processes, with a progress bar on ``say``."""
    shared = Shared.new()
    share = -(-n // producers // BATCH) * BATCH  # whole batches, the last process the rest
    procs = [
        SPAWN.Process(
            target=_produce,
            args=(url, topic, lo, min(n, lo + share), spread, shared),
            daemon=True,
        )
        for lo in range(0, n, share)
    ]
    for proc in procs:
        proc.start()
    try:
        while shared.ready.value < len(procs):
            _check(procs, label)
            time.sleep(0.01)
        started = time.monotonic()
        shared.go.set()
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=say,
            transient=True,
        ) as bar:
            task = bar.add_task(label, total=n)
            while any(proc.is_alive() for proc in procs):
                _check(procs, label)
                bar.update(task, completed=shared.done.value)
                time.sleep(0.2)
        _check(procs, label)
        if shared.done.value != n:
            raise RuntimeError(f"{label}: {shared.done.value:,} jobs put of {n:,}")
        return Putting(n, len(procs), shared.finished.value - started, shared.build_s.value)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
            proc.join()


def _check(procs: Sequence[BaseProcess], label: str) -> None:
    failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
    if failed:
        raise RuntimeError(f"{label}: a producer process failed (exit code {failed[0]})")
