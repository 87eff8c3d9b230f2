"""One fault run: producers and workers started on a store, the test's faults in between, then
the heal, a full drain and the checker. ``finish()`` returns the checker's report and keeps the
history directory (printing its path and the failing jobs' timelines) when a check fails;
``cleanup()`` kills every child still running, whatever happened."""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import chronoq
from chronoq.errors import ChronoqError

from ..children import all_events
from .checker import Report, check, shown, timeline
from .history import History, read_history
from .processes import Proc, child_env, python_argv

__all__ = ["Run", "Setup"]


@dataclass(frozen=True)
class Setup:
    producers: int = 2
    jobs: int = 1500  # per producer
    rate: float = 300.0  # puts a second, per producer
    workers: int = 2
    concurrency: int = 4
    prefetch: int | None = 4
    ttr: float = 2.0  # the jobs' lease, seconds
    worker_ttr: float | None = None  # --ttr of the workers
    groups: int = 0  # the jobs spread over this many groups
    limits: tuple[tuple[str, float], ...] = ()  # set_limits of the topic before the run


class Run:
    def __init__(self, url: str, workdir: Path, setup: Setup | None = None) -> None:
        self.setup = setup or Setup()
        self.topic = f"f-{uuid.uuid4().hex[:10]}"
        self.url = url
        self.workdir = workdir
        self.history_dir = workdir / "history"
        self.history_dir.mkdir(parents=True, exist_ok=True)
        self.logs = workdir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.producers: list[Proc] = []
        self.workers: list[Proc] = []
        self.started = time.monotonic()

    # -- children --------------------------------------------------------------------------

    def start(self) -> None:
        if self.setup.limits:
            with chronoq.connect(self.url) as q:
                q.set_limits(self.topic, **dict(self.setup.limits))  # type: ignore[arg-type]
        for _ in range(self.setup.workers):
            self.start_worker()
        for proc in range(self.setup.producers):
            self.start_producer(proc)

    def start_producer(self, proc: int, jobs: int | None = None) -> Proc:
        s = self.setup
        argv = python_argv("-m", "tests.faults.producer", self.url, self.topic)
        argv += [str(self.history_dir / f"producer-{proc}.jsonl"), "--proc", str(proc)]
        argv += ["--jobs", str(jobs or s.jobs), "--rate", str(s.rate), "--ttr", str(s.ttr)]
        argv += ["--groups", str(s.groups)]
        p = Proc("producer", argv, self.logs / f"producer-{proc}.log", child_env())
        self.producers.append(p)
        return p

    def start_worker(self) -> Proc:
        s = self.setup
        argv = python_argv("-m", "chronoq.cli.main", "worker", "tests.faults.handler:handlers")
        argv += ["--store", self.url, "--concurrency", str(s.concurrency), "--log-format", "json"]
        argv += ["--grace", "5", "--no-recurring"]
        argv += [] if s.prefetch is None else ["--prefetch", str(s.prefetch)]
        argv += [] if s.worker_ttr is None else ["--ttr", str(s.worker_ttr)]
        env = child_env(
            CHRONOQ_FAULTS_TOPIC=self.topic, CHRONOQ_FAULTS_HISTORY=str(self.history_dir)
        )
        p = Proc("worker", argv, self.logs / f"worker-{len(self.workers)}.log", env)
        self.workers.append(p)
        return p

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]

    def wait_started(self, timeout: float = 15.0) -> None:
        """Until some job has started: the faults must land on a busy run."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(
                path.stat().st_size and path.name.startswith("worker-")
                for path in self.history_dir.glob("*.jsonl")
            ):
                return
            time.sleep(0.05)
        raise AssertionError(f"no job started in {timeout} s\n{self.logs_text()}")

    def wait_producers(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        for p in self.producers:
            if p.wait(max(0.1, deadline - time.monotonic())) is None:
                raise AssertionError(f"producer {p.pid} still runs after {timeout} s\n{p.log()}")

    # -- the end ---------------------------------------------------------------------------

    def drain(self, timeout: float = 30.0) -> None:
        """Until the store holds none of the topic's jobs (dead ones aside), the workers
        working; store errors meanwhile count as "not yet"."""
        deadline = time.monotonic() + timeout
        last: object = None
        with chronoq.connect(self.url) as q:
            while time.monotonic() < deadline:
                with contextlib.suppress(ChronoqError):
                    last = stats = q.stats(self.topic)
                    if stats["total"] - stats["dead"] == 0:
                        return
                time.sleep(0.1)
        raise AssertionError(f"not drained in {timeout} s: {last}\n{self.logs_text()}")

    def stop_workers(self) -> None:
        for w in self.workers:
            w.signal(15)
        for w in self.workers:
            w.stop(timeout=10)

    def tracebacks(self) -> list[str]:
        return [str(p.log_path) for p in self.all() if "Traceback" in p.log()]

    def finish(self, drain_timeout: float = 30.0) -> Report:
        """Wait for the producers, drain, stop the workers, check; print the summary (and the
        timelines of failing jobs, keeping the history) and return the report."""
        self.wait_producers()
        self.drain(drain_timeout)
        self.stop_workers()
        history = read_history(self.history_dir)
        with chronoq.connect(self.url) as q:
            dead = [j.id for j in q.dead(self.topic, limit=10_000)]

            def state_of(job_id: str) -> str | None:
                info = q.get(self.topic, job_id)
                return None if info is None else info.state.value

            report = check(history, state_of, dead)
            took = time.monotonic() - self.started
            print(f"\n[{self.topic}] {took:.1f} s: {report.summary()}")
            if not report.ok or self.tracebacks():
                self.explain(q, report, history, state_of)
        return report

    def explain(self, q: chronoq.Queue, report: Report, history: History, state_of: object) -> None:
        print(f"history kept in {self.workdir}")
        for kind, ids in report.failures().items():
            print(f"{kind}: {len(ids)} job(s), e.g. {ids[:10]}")
        failing = shown(report)
        if failing:
            try:
                events = all_events(q, self.topic)
            except ChronoqError:
                events = []
            for job_id in failing:
                info = q.get(self.topic, job_id)
                state = None if info is None else info.state.value
                mine = [e for e in events if e.id == job_id]
                print(timeline(job_id, history, mine, state))
        for path in self.tracebacks():
            print(f"Traceback in {path}")

    def all(self) -> list[Proc]:
        return [*self.producers, *self.workers]

    def logs_text(self, lines: int = 15) -> str:
        return "\n".join(
            f"--- {p.kind} {p.pid} ({p.log_path.name}) ---\n"
            + "\n".join(p.log().splitlines()[-lines:])
            for p in self.all()
        )

    def cleanup(self) -> None:
        for p in self.all():
            p.kill()
