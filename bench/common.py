"""What the benchmarks in bench/ share: figure types, the machine and command
lines, timing helpers, the backend-agnostic chronoq runs (put, put_many,
reserve + ack, the lag consumer), the timer floor and the output tables.

Not runnable on its own: ``bench/sqlite.py`` and ``bench/redis.py`` import it.
"""

from __future__ import annotations

import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import chronoq

REPEATS = 3
BATCH = 1000  # jobs per put_many call
RESERVE_COUNT = 100  # jobs per reserve call in the drain loop
PAYLOAD = {"order": 42, "kind": "close"}
RUN = uuid.uuid4().hex[:8]  # topic prefix: a --store that already holds data is left alone


@dataclass
class Rate:
    """A throughput figure: jobs/s of every repetition."""

    key: str
    label: str
    n: int
    runs: list[float]
    target: float | None = None
    baseline: Rate | None = None

    @property
    def best(self) -> float:
        return max(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def ok(self) -> bool | None:
        return None if self.target is None else self.median >= self.target

    @property
    def ratio(self) -> float | None:
        return None if self.baseline is None else self.median / self.baseline.median

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "unit": "jobs/s",
            "n": self.n,
            "runs": self.runs,
            "best": self.best,
            "median": self.median,
            "target_min": self.target,
            "met": self.ok,
            "baseline": None if self.baseline is None else self.baseline.key,
            "ratio_to_baseline": self.ratio,
        }


@dataclass
class Lag:
    """A lag figure in ms: delivery wall time - due_at (or timer oversleep)."""

    key: str
    label: str
    samples: list[float]
    expected: int | None  # jobs put; None for the timer floor
    p99_limit: float | None = None

    def pct(self, p: float) -> float:
        return percentile(self.samples, p) if self.samples else math.nan

    @property
    def early(self) -> int:
        return sum(1 for lag in self.samples if lag < 0)

    @property
    def ok(self) -> bool | None:
        if self.expected is None:
            return None
        if len(self.samples) != self.expected or self.early:
            return False
        return self.p99_limit is None or self.pct(99) <= self.p99_limit

    @property
    def target(self) -> str:
        if self.expected is None:
            return ""
        limit = "" if self.p99_limit is None else f"p99 ≤ {self.p99_limit:g} ms, "
        return f"{limit}0 early, all in"

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "unit": "ms",
            "p50": self.pct(50),
            "p99": self.pct(99),
            "max": max(self.samples, default=math.nan),
            "min": min(self.samples, default=math.nan),
            "early": self.early,
            "delivered": len(self.samples),
            "expected": self.expected,
            "target_p99_max": self.p99_limit,
            "met": self.ok,
        }


# -- machine and command -------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(**versions: str) -> dict[str, Any]:
    """The machine, and the versions of Python, of ``versions`` and of chronoq."""
    return {
        "python": platform.python_version(),
        **versions,
        "chronoq": chronoq.__version__,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "source": source_revision(),
        "loadavg_start": list(os.getloadavg()),
    }


def source_revision() -> str:
    """The git commit of the chronoq being measured, and whether its source differs."""
    src = Path(chronoq.__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"{src} (not a git checkout)"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def command() -> str:
    argv = list(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    return shlex.join(argv)


# -- timing helpers --------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def repeat_rate(n: int, once: Callable[[int], float]) -> list[float]:
    """Run ``once(rep)`` (returns seconds spent on ``n`` items) REPEATS times."""
    return [n / once(rep) for rep in range(REPEATS)]


def batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- chronoq throughput ------------------------------------------------------------------


def bench_put_one(q: chronoq.Queue, n: int) -> list[float]:
    def once(rep: int) -> float:
        topic = f"bench.{RUN}.put1.{rep}"
        put = q.put
        start = time.perf_counter()
        for i in range(n):
            put(topic, {**PAYLOAD, "n": i})
        return time.perf_counter() - start

    return repeat_rate(n, once)


def make_jobs(n: int) -> list[chronoq.Job]:
    return [chronoq.Job({**PAYLOAD, "n": i}) for i in range(n)]


def bench_put_many(q: chronoq.Queue, n: int) -> list[float]:
    def once(rep: int) -> float:
        topic = f"bench.{RUN}.putmany.{rep}"
        chunks = list(batches(make_jobs(n), BATCH))
        start = time.perf_counter()
        for chunk in chunks:
            q.put_many(topic, chunk)
        return time.perf_counter() - start

    return repeat_rate(n, once)


def bench_drain(q: chronoq.Queue, n: int) -> tuple[list[float], list[float]]:
    """jobs/s of each run's drain loop alone, and from its first put_many to empty."""
    totals: list[float] = []

    def once(rep: int) -> float:
        topic = f"bench.{RUN}.drain.{rep}"
        chunks = list(batches(make_jobs(n), BATCH))
        put_start = time.perf_counter()
        for chunk in chunks:
            q.put_many(topic, chunk)
        done = 0
        start = time.perf_counter()
        while jobs := q.reserve(topic, RESERVE_COUNT):
            q.ack_many(jobs)
            done += len(jobs)
        end = time.perf_counter()
        if done != n:
            raise RuntimeError(f"drained {done} jobs of {n}")
        totals.append(n / (end - put_start))
        return end - start

    return repeat_rate(n, once), totals


# -- hand-over lag ------------------------------------------------------------------------


def produce_on(
    q: chronoq.Queue, topic: str, n: int, rate: float, max_delay: float, seed: int
) -> None:
    """Put ``n`` jobs at ``rate`` per second, each with a delay uniform in
    [0.05, ``max_delay``] seconds."""
    rng = random.Random(seed)
    start = time.monotonic()
    for i in range(n):
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        q.put(topic, {"i": i}, delay=rng.uniform(0.05, max_delay))


def consume(
    q: chronoq.Queue,
    topic: str,
    expected: int,
    give_up: float,
    failed: Callable[[], bool],
    count: int = 10,
) -> list[float]:
    """Lag in ms (delivery wall time - due_at) of every job delivered; stops
    early when ``failed()`` says the producer died."""
    lags: list[float] = []
    while len(lags) < expected and time.monotonic() < give_up and not failed():
        jobs = q.reserve(topic, count=count, wait=0.5)
        delivered = time.time() * 1000
        lags.extend(delivered - job.due_at for job in jobs)
        if jobs:
            q.ack_many(jobs)
    return lags


def bench_timer_floor(samples: int) -> list[float]:
    """How late ``threading.Event().wait(t)`` returns, in ms, for t in 1-20 ms."""
    rng = random.Random(3)
    event = threading.Event()
    late: list[float] = []
    for _ in range(samples):
        t = rng.uniform(0.001, 0.02)
        start = time.perf_counter()
        event.wait(t)
        late.append((time.perf_counter() - start - t) * 1000)
    return late


# -- output ---------------------------------------------------------------------------------


def status(ok: bool | None) -> str:
    return "" if ok is None else ("[green]met[/]" if ok else "[red]MISSED[/]")


def rate_table(rates: list[Rate]) -> Table:
    table = Table(title=f"Throughput, jobs/s ({REPEATS} runs each; targets apply to the median)")
    for name in ("figure", "N", "best", "median", "target", "", "median vs baseline"):
        table.add_column(name, justify="left" if name in ("figure", "target") else "right")
    baselines = {id(r.baseline) for r in rates if r.baseline is not None}
    for r in rates:
        target = "" if r.target is None else f"≥ {r.target:,.0f}"
        if r.baseline is not None:
            vs = f"{r.ratio:.0%} of {r.baseline.label}"
        else:
            vs = "(baseline)" if id(r) in baselines else ""
        table.add_row(
            r.label, f"{r.n:,}", f"{r.best:,.0f}", f"{r.median:,.0f}", target, status(r.ok), vs
        )
    return table


def lag_table(lags: list[Lag]) -> Table:
    floor = next(lag for lag in lags if lag.expected is None)
    table = Table(title="Hand-over lag, ms: wall time at delivery - due_at")
    for name in ("figure", "p50", "p99", "max", "early", "delivered", "p99/floor", "target", ""):
        table.add_column(name, justify="left" if name in ("figure", "target") else "right")
    for lag in lags:
        timed = lag.expected is not None
        table.add_row(
            lag.label,
            f"{lag.pct(50):.2f}",
            f"{lag.pct(99):.2f}",
            f"{max(lag.samples, default=math.nan):.2f}",
            f"{lag.early}" if timed else "",
            f"{len(lag.samples)}/{lag.expected}" if timed else f"{len(lag.samples)} waits",
            f"{lag.pct(99) / max(floor.pct(99), 0.001):.1f}x" if timed else "",
            lag.target,
            status(lag.ok),
        )
    return table


def console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 130)


def command_and_machine(out: Console, report: dict[str, Any]) -> None:
    """The command and machine lines every benchmark's report starts with."""
    info = report["machine"]
    out.print(f"[bold]command[/]   {report['command']}")
    out.print(
        f"[bold]machine[/]   {info['cpu']}, {info['cores']} cores, {info['platform']}; "
        f"load avg {info['loadavg_start'][0]:.2f} before, {info['loadavg_end'][0]:.2f} after "
        "(a shared machine: expect noise)"
    )


def render_header(out: Console, report: dict[str, Any], versions: str) -> None:
    """The command, machine, versions and store lines every benchmark starts with."""
    info = report["machine"]
    command_and_machine(out, report)
    out.print(
        f"[bold]versions[/]  Python {info['python']}, {versions}, "
        f"chronoq {info['chronoq']} at {info['source']}"
    )
    out.print(f"[bold]store[/]     {report['store']}; took {report['seconds']:.0f} s")
