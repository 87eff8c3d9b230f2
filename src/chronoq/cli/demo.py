"""``chronoq demo``: schedule jobs with mixed delays and priorities on a
throwaway topic, consume them with a thread blocked in ``reserve(wait=...)``
(no polling), and show every delivery's lag live. Lag is measured by the
consumer: the wall-clock ms when ``reserve`` returned minus the job's due time."""

from __future__ import annotations

import logging
import math
import random
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from chronoq.cli.output import clock_ms, now_ms
from chronoq.job import Job, Reservation
from chronoq.queue import Queue

__all__ = ["DemoReport", "plan", "run_demo"]

log = logging.getLogger("chronoq")

WAVES = 4  # puts happen in waves over the first half, so consumers are woken by puts too
BURST = (10, 5, 0, -5, -10)  # priorities of jobs sharing one due time: shows the ordering
RESERVE_BATCH = 50
MAX_WAIT_S = 1.0  # bounds how long a stop request waits for the consumer
GRACE_S = 5.0  # after the last due time, give up on missing jobs
RECENT = 12


@dataclass(frozen=True, slots=True)
class Wave:
    """Jobs to put ``at`` seconds after the start: ``(id, due offset s, priority)``."""

    at: float
    jobs: list[tuple[str, float, int]]


def plan(jobs: int, seconds: float, rng: random.Random) -> list[Wave]:
    """Spread ``jobs`` due times over ``seconds``; about a third of them come in
    bursts of five with one due time and five priorities."""
    waves = [Wave(k * seconds / (2 * WAVES), []) for k in range(WAVES)]
    index = group = 0
    while index < jobs:
        wave = waves[group % WAVES]
        due = rng.uniform(wave.at + min(0.2, seconds / 4), seconds)
        size = min(len(BURST), jobs - index) if rng.random() < 0.35 else 1
        priorities = rng.sample(BURST, size) if size > 1 else [rng.choice((-5, 0, 0, 0, 5, 10))]
        for priority in priorities:
            wave.jobs.append((f"job-{index:04d}", due, priority))
            index += 1
        group += 1
    return [wave for wave in waves if wave.jobs]


@dataclass(frozen=True, slots=True)
class Delivery:
    id: str
    priority: int
    due_at: int
    delivered_at: int

    @property
    def lag_ms(self) -> int:
        return self.delivered_at - self.due_at


def percentile(values: list[int], pct: float) -> int | None:
    """Nearest-rank percentile of sorted ``values``."""
    if not values:
        return None
    return values[max(0, math.ceil(pct / 100 * len(values)) - 1)]


@dataclass(frozen=True)
class DemoReport:
    """The outcome of a demo run."""

    topic: str
    store: str
    total: int
    delivered: int
    duplicates: int
    early: int
    lags: list[int]
    elapsed: float
    purged: int = 0

    @property
    def ok(self) -> bool:
        return self.delivered == self.total and self.early == 0

    def lag(self) -> dict[str, int | None]:
        return {
            "p50": percentile(self.lags, 50),
            "p99": percentile(self.lags, 99),
            "max": self.lags[-1] if self.lags else None,
        }

    def doc(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "store": self.store,
            "jobs": self.total,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "early": self.early,
            "lag_ms": self.lag(),
            "elapsed_s": round(self.elapsed, 3),
            "purged": self.purged,
            "ok": self.ok,
        }

    def lag_text(self) -> str:
        lag = self.lag()
        return "  ".join(f"{k} {'-' if v is None else v} ms" for k, v in lag.items())

    def summary(self) -> Text:
        mark, style = ("✓", "bold green") if self.ok else ("✗", "bold red")
        return Text.assemble(
            (f"{mark} {self.delivered}/{self.total} jobs delivered, {self.early} early", style),
            f", in {self.elapsed:.1f} s. Lag (delivery − due): {self.lag_text()}.\n",
            f"  Topic {self.topic} purged ({self.purged} jobs were left in it) on {self.store}.",
        )


@dataclass
class DemoState:
    """What the consumer saw so far; rendered live by ``__rich__``."""

    topic: str
    store: str
    total: int
    seconds: float
    started: float = field(default_factory=time.monotonic)
    scheduled: int = 0
    seen: set[str] = field(default_factory=set)
    lags: list[int] = field(default_factory=list)
    duplicates: int = 0
    recent: deque[Delivery] = field(default_factory=lambda: deque(maxlen=RECENT))
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, jobs: list[Reservation], delivered_at: int) -> None:
        with self.lock:
            for job in jobs:
                delivery = Delivery(job.id, job.priority, job.due_at, delivered_at)
                if job.id in self.seen:
                    self.duplicates += 1
                    continue
                self.seen.add(job.id)
                self.lags.append(delivery.lag_ms)
                self.recent.append(delivery)

    def complete(self) -> bool:
        with self.lock:
            return len(self.seen) >= self.total

    def report(self) -> DemoReport:
        with self.lock:
            lags = sorted(self.lags)
            return DemoReport(
                self.topic, self.store, self.total, len(self.seen), self.duplicates,
                sum(1 for lag in lags if lag < 0), lags, time.monotonic() - self.started,
            )  # fmt: skip

    def __rich__(self) -> RenderableType:
        with self.lock:
            recent = list(self.recent)
            scheduled = self.scheduled
        return Group(_recent_table(recent), _summary_panel(self.report(), scheduled, self.seconds))


def _lag_cell(lag: int) -> Text:
    if lag < 0:
        return Text(f"{lag} EARLY", style="bold red")
    return Text(str(lag), style="green" if lag <= 5 else "yellow" if lag <= 50 else "red")


def _recent_table(recent: list[Delivery]) -> Table:
    table = Table(title="Recent deliveries", title_justify="left", header_style="bold")
    table.add_column("job")
    table.add_column("priority", justify="right")
    table.add_column("due (UTC)")
    table.add_column("delivered (UTC)")
    table.add_column("lag ms", justify="right")
    for item in recent:
        table.add_row(
            item.id, str(item.priority), clock_ms(item.due_at), clock_ms(item.delivered_at),
            _lag_cell(item.lag_ms),
        )  # fmt: skip
    return table


def _summary_panel(report: DemoReport, scheduled: int, seconds: float) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    bar = Table.grid(padding=(0, 1))
    progress = f"{report.delivered}/{report.total}"
    bar.add_row(ProgressBar(report.total, report.delivered, width=30), progress)
    grid.add_row("delivered", bar)
    grid.add_row("scheduled", f"{scheduled}/{report.total} put, due over {seconds:g} s")
    grid.add_row("lag", Text(report.lag_text()))
    grid.add_row(
        "early", Text(str(report.early), style="green" if report.early == 0 else "bold red")
    )
    grid.add_row("elapsed", f"{report.elapsed:.1f} s")
    return Panel(
        grid,
        title="chronoq demo",
        title_align="left",
        subtitle=Text(f"{report.topic} on {report.store}"),
        subtitle_align="left",
        expand=False,
    )


def _guard(
    state: DemoState, stop: threading.Event, target: Callable[[], None]
) -> Callable[[], None]:
    def run() -> None:
        try:
            target()
        except BaseException as exc:  # handed to the main thread, which re-raises it
            state.error = exc
            stop.set()

    return run


def _produce(queue: Queue, state: DemoState, waves: list[Wave], stop: threading.Event) -> None:
    start_epoch = time.time() - (time.monotonic() - state.started)
    for wave in waves:
        if stop.wait(max(0.0, state.started + wave.at - time.monotonic())):
            return
        batch = [
            Job({"n": int(job_id[4:])}, run_at=start_epoch + due, id=job_id, priority=priority)
            for job_id, due, priority in wave.jobs
        ]
        queue.put_many(state.topic, batch)
        with state.lock:
            state.scheduled += len(batch)
        log.debug("demo: put %d jobs on %s", len(batch), state.topic)


def _consume(queue: Queue, state: DemoState, stop: threading.Event) -> None:
    deadline = state.started + state.seconds + GRACE_S
    while not stop.is_set() and not state.complete():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        jobs = queue.reserve(state.topic, RESERVE_BATCH, wait=min(remaining, MAX_WAIT_S))
        delivered_at = now_ms()
        if jobs:
            state.record(jobs, delivered_at)
            queue.ack_many(jobs)


def run_demo(
    queue: Queue,
    console: Console,
    *,
    jobs: int = 300,
    seconds: float = 10.0,
    live: bool = True,
    topic: str | None = None,
    seed: int | None = None,
) -> DemoReport:
    """Run the demo on ``queue``; purges its topic before returning."""
    topic = topic or f"demo-{secrets.token_hex(4)}"
    waves = plan(jobs, seconds, random.Random(seed))
    state = DemoState(topic, queue.url, jobs, seconds)
    stop = threading.Event()
    producer = threading.Thread(
        target=_guard(state, stop, lambda: _produce(queue, state, waves, stop)), daemon=True
    )
    consumer = threading.Thread(
        target=_guard(state, stop, lambda: _consume(queue, state, stop)), daemon=True
    )
    try:
        producer.start()
        consumer.start()
        if live and console.is_terminal:
            with Live(state, console=console, refresh_per_second=4):
                consumer.join()
        else:
            consumer.join()
    finally:
        stop.set()
        producer.join()
        consumer.join()
        purged = queue.purge(topic)
    if state.error is not None:
        raise state.error
    report = replace(state.report(), purged=purged)
    if live:
        if not console.is_terminal:  # no live updates: show the last frame once
            console.print(state)
        console.print(report.summary())
    return report
