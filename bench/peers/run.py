"""chronoq side by side with RQ, arq, huey, Dramatiq, Celery, SAQ and BullMQ,
in one run against one private redis-server (a free loopback port, never 6379).

    .venv/bin/python bench/peers/run.py [--quick] [--systems a,b] [--out DIR]

For each system, through its own delayed-job API and its own standard worker
at concurrency 4, with the same job body (bench/peers/jobbody.py):

1. enqueue: 5,000 jobs due in an hour, one call each, then through the bulk
   API where there is one; Redis memory per delayed job from INFO;
2. drain: 5,000 jobs due at the same moment, with the worker running;
3. lag: jobs due one every 1/rate s at 40, 400 and 5,000 jobs/s, put ahead of
   time; each job's start minus its due time; early (> 1 ms before due), lost
   (never started) and duplicate starts over all phases.

Peers run from their own venvs (bench/.venvs/, built on first use from
bench/peers/requirements/); BullMQ runs in Node, its producer timed in Node
too (bench/peers/node/, packages installed under bench/.venvs/bullmq). Every
system's driver answers the same verbs (driver.py). Results: a table on
stdout (with each ratio's best peer), and in ``--out``
(default bench/peers/out/): results.json, table.md and lag charts (PNG).
See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
sys.path.append(sys.path.pop(sys.path.index(str(HERE.parent))))  # after redis-py: bench/redis.py

import redis  # noqa: E402
from catalogue import BY_NAME, SYSTEMS, System, interpreter_for  # noqa: E402
from common import command, machine  # noqa: E402
from measure import Phase, Records, spread  # noqa: E402
from report import charts, console_table, markdown_table  # noqa: E402
from rich.console import Console  # noqa: E402
from servers import private_server  # noqa: E402

STALL_S = 20.0  # a phase ends when no job started for this long after the last due time
CAP_S = 300.0  # ... or this long after it, whatever happens
STOP_S = 15.0  # a worker gets this long to stop on SIGTERM before SIGKILL


@dataclass(frozen=True)
class Sizes:
    enqueue: int
    rounds: int  # enqueue rounds, taking turns between the systems
    drain: int
    rates: tuple[tuple[int, float], ...]  # (jobs/s, seconds of due times)

    @classmethod
    def for_run(cls, quick: bool) -> Sizes:
        if quick:
            return cls(300, 1, 300, ((40, 1.0), (400, 1.0), (5000, 0.2)))
        return cls(5000, 3, 5000, ((40, 10.0), (400, 10.0), (5000, 2.0)))


class Bench:
    def __init__(self, out: Path, url: str, sizes: Sizes, say: Console) -> None:
        self.out, self.url, self.sizes, self.say = out, url, sizes, say
        self.redis = redis.Redis.from_url(url)
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "work").mkdir(exist_ok=True)

    # -- one system --------------------------------------------------------------

    def prepare(self, system: System) -> tuple[Path, dict[str, Any]]:
        """The system's interpreter (its venv built if needed) and what its
        adapter says of it (version, bulk API)."""
        interpreter = interpreter_for(system, self.out / "logs" / f"venv-{system.name}.log")
        self.say.log(f"[bold]{system.label}[/]: {interpreter}")
        store = self.store(system, "probe")
        about = json.loads(self.driver(system, interpreter, store, "describe"))
        return interpreter, {"name": system.name, "label": system.label, **about}

    def run(self, system: System, interpreter: Path, result: dict[str, Any]) -> dict[str, Any]:
        """The worker phases (drain, lag at each rate), after the enqueue rounds."""
        self.say.log(f"[bold]{system.label}[/]: worker phases")
        store = self.store(system, "work")
        records = Records(self.out / "work" / f"{system.name}.records")
        records.path.unlink(missing_ok=True)
        worker = self.start_worker(system, interpreter, store, records.path)
        phases: list[Phase] = []
        try:
            warm = spread("warm", time.time() + 1.0, 10, 4)
            self.put(system, interpreter, store, warm, bool(result["bulk"]))
            if not records.wait_for(warm.ids, warm.jobs[-1][1], 60.0, 60.0):
                raise RuntimeError(f"{system.name}: the worker ran no job within 60 s")
            rate = result["enqueue_best"]
            for name, n, per_s in self.plan():
                first_due = time.time() + self.lead(n, rate, result)
                if per_s is None:  # all due at once
                    phase = Phase(name, [(f"{name}-{k}", round(first_due, 3)) for k in range(n)])
                else:
                    phase = spread(name, first_due, per_s, n)
                self.put(system, interpreter, store, phase, bool(result["bulk"]))
                self.say.log(f"  {name}: {n:,} jobs")
                records.wait_for(phase.ids, phase.jobs[-1][1], STALL_S, CAP_S)
                phases.append(phase)
                time.sleep(0.5)
        finally:
            self.stop_worker(worker)
        records.refresh()
        result["drain_per_s"] = phases[0].drain_rate(records)
        result["phases"] = {phase.name: phase.outcome(records) for phase in phases}
        for key in ("early", "lost", "duplicates"):
            result[key] = sum(outcome[key] for outcome in result["phases"].values())
        self.say.log(
            f"  drain {result['drain_per_s'] or 0:,.0f}/s; "
            f"early {result['early']}, lost {result['lost']}, dup {result['duplicates']}"
        )
        return result

    def plan(self) -> list[tuple[str, int, float | None]]:
        """(phase, jobs, jobs/s of due times or None for all due at once)."""
        lags = [
            (f"lag{per_s}", max(1, round(per_s * s)), float(per_s)) for per_s, s in self.sizes.rates
        ]
        return [("drain", self.sizes.drain, None), *lags]

    def lead(self, n: int, rate: float, result: dict[str, Any]) -> float:
        """Seconds from now to the first due time: the enqueue of ``n`` jobs
        at ``rate`` with a margin, plus the driver's start-up."""
        return 1.0 + result["startup_s"] * 1.5 + n / rate * 1.5

    def enqueue_figures(self, system: System, interpreter: Path, bulk: bool) -> dict[str, Any]:
        """One enqueue round: ``sizes.enqueue`` jobs due in an hour, one call
        each into an empty store (with the memory they take), then the same
        through the bulk API into another."""
        n = self.sizes.enqueue
        far = time.time() + 3600
        store = self.store(system, "enqueue")
        figures: dict[str, Any] = {}
        before = self.footprint(system, store)
        phase = Phase("enqueue", [(f"enq-{k}", round(far + k / 1000, 3)) for k in range(n)])
        spawned = time.time()
        timing = self.put(system, interpreter, store, phase, bulk=False)
        figures["startup_s"] = timing["started"] - spawned
        figures["enqueue_single"] = n / (timing["finished"] - timing["started"])
        figures["bytes_per_job"] = (self.footprint(system, store) - before) / n
        figures["bytes_kind"] = "disk" if system.store == "sqlite" else "redis"
        figures["enqueue_bulk"] = None
        if bulk:
            store = self.store(system, "enqueue-bulk")
            timing = self.put(system, interpreter, store, phase, bulk=True)
            figures["enqueue_bulk"] = n / (timing["finished"] - timing["started"])
        self.say.log(
            f"  {system.label}: enqueue {figures['enqueue_single']:,.0f}/s single, "
            f"{figures['enqueue_bulk'] or 0:,.0f}/s bulk; {figures['bytes_per_job']:,.0f} B/job"
        )
        return figures

    # -- plumbing ----------------------------------------------------------------

    def store(self, system: System, purpose: str) -> str:
        """A clean store for ``purpose``: Redis flushed, or a new SQLite file."""
        if system.store == "sqlite":
            path = self.out / "work" / f"{system.name}-{purpose}.db"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            return f"sqlite:///{path}"
        self.redis.flushall()
        return self.url

    def footprint(self, system: System, store: str) -> int:
        if system.store == "sqlite":
            path = store.removeprefix("sqlite:///")
            return sum(
                os.path.getsize(f"{path}{s}") for s in ("", "-wal") if os.path.exists(f"{path}{s}")
            )
        return int(self.redis.info("memory")["used_memory"])

    def env(self, store: str, record: Path | None = None) -> dict[str, str]:
        env = dict(os.environ, BENCH_STORE=store, PYTHONPATH=f"{HERE}:{HERE / 'systems'}")
        env["BENCH_RECORD"] = str(record or self.out / "work" / "unused.records")
        return env

    def driver(self, system: System, interpreter: Path, store: str, *args: str) -> str:
        argv = [str(interpreter), str(system.driver), system.adapter, *args]
        done = subprocess.run(argv, env=self.env(store), capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{system.name}: {' '.join(args[:1])} failed:\n{done.stderr}")
        return done.stdout.strip().splitlines()[-1]

    def put(
        self, system: System, interpreter: Path, store: str, phase: Phase, bulk: bool
    ) -> dict[str, Any]:
        plan = self.out / "work" / "plan.json"
        plan.write_text(json.dumps({"jobs": phase.jobs}))
        timing: dict[str, Any] = json.loads(
            self.driver(
                system, interpreter, store, "enqueue", str(plan), "bulk" if bulk else "single"
            )
        )
        phase.enqueue_finished = timing["finished"]
        first_due = min(due for _, due in phase.jobs)
        if timing["finished"] > first_due:
            phase.notes.append(
                f"enqueue ended {timing['finished'] - first_due:.3f} s after the first due time"
            )
        return timing

    def start_worker(
        self, system: System, interpreter: Path, store: str, record: Path
    ) -> subprocess.Popen[bytes]:
        argv = self.worker_argv(system, interpreter, store)
        with (self.out / "logs" / f"{system.name}-worker.log").open("wb") as log:
            return subprocess.Popen(  # the child keeps its own copy of the log file
                argv,
                cwd=HERE / "systems",
                env=self.env(store, record),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def worker_argv(self, system: System, interpreter: Path, store: str) -> list[str]:
        answer = self.driver(system, interpreter, store, "worker-argv", str(interpreter))
        return list(json.loads(answer))

    def stop_worker(self, worker: subprocess.Popen[bytes]) -> None:
        for sig, wait in ((signal.SIGTERM, STOP_S), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(worker.pid, sig)
            except ProcessLookupError:
                return
            try:
                worker.wait(wait)
                os.killpg(worker.pid, signal.SIGKILL)  # stragglers of the group
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                pass
            return


def attempt(failed: dict[str, str], system: System, say: Console, step: Any, *args: Any) -> Any:
    """``step(*args)``, or None when it raised: the failure goes in ``failed``
    (the system's row says so) and the other systems go on."""
    try:
        return step(*args)
    except Exception as exc:
        say.log(f"[red]{system.label} failed[/]: {exc}")
        failed[system.name] = str(exc)[:200]
        return None


def enqueue_medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each enqueue figure over the rounds, and every round's."""
    figures: dict[str, Any] = {"enqueue_runs": runs, "bytes_kind": runs[0]["bytes_kind"]}
    for key in ("enqueue_single", "enqueue_bulk", "bytes_per_job", "startup_s"):
        values = [run[key] for run in runs if run[key] is not None]
        figures[key] = statistics.median(values) if values else None
    figures["enqueue_best"] = max(figures["enqueue_single"], figures["enqueue_bulk"] or 0)
    return figures


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: checks the run works")
    parser.add_argument(
        "--systems",
        default=",".join(s.name for s in SYSTEMS),
        help="comma-separated, from: " + ", ".join(s.name for s in SYSTEMS),
    )
    parser.add_argument("--out", type=Path, default=HERE / "out", help="results, table and charts")
    args = parser.parse_args(argv)
    unknown = [name for name in args.systems.split(",") if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown system(s): {', '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say = Console(stderr=True)
    (args.out / "work").mkdir(parents=True, exist_ok=True)
    sizes = Sizes.for_run(args.quick)
    report: dict[str, Any] = {"command": command(), "machine": machine(), "sizes": sizes.__dict__}
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    with private_server(args.out / "work", None) as url:
        bench = Bench(args.out, url, sizes, say)
        report["machine"]["redis_server"] = bench.redis.info("server")["redis_version"]
        systems = [BY_NAME[name] for name in args.systems.split(",")]
        failed: dict[str, str] = {}
        ready: dict[str, tuple[Path, dict[str, Any]]] = {}
        for system in systems:
            if (prepared := attempt(failed, system, say, bench.prepare, system)) is not None:
                ready[system.name] = prepared
        # the enqueue rounds take turns, system after system, so that a slow
        # moment of the machine does not fall on one system's figures alone
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in ready}
        for _ in range(sizes.rounds):
            for system in systems:
                if system.name in ready and system.name not in failed:
                    interpreter, about = ready[system.name]
                    step = bench.enqueue_figures
                    figures = attempt(failed, system, say, step, system, interpreter, about["bulk"])
                    if figures is not None:
                        rounds[system.name].append(figures)
        for system in systems:
            result = None
            if system.name not in failed:
                interpreter, about = ready[system.name]
                about |= enqueue_medians(rounds[system.name])
                result = attempt(failed, system, say, bench.run, system, interpreter, about)
            if result is None:
                result = {"name": system.name, "label": system.label, "error": failed[system.name]}
            results.append(result)
        bench.redis.close()
    report["seconds"] = time.monotonic() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["results"] = results
    (args.out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "table.md").write_text(markdown_table(results))
    pngs = charts(results, args.out)
    Console().print(console_table(results))
    say.log(f"{report['seconds']:.0f} s; results, table.md and {len(pngs)} charts in {args.out}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
