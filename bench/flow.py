"""What flow control costs (docs/flow.md): the harness's drain loop
(``reserve(count=10)`` + ``ack_many``, one client) over a topic's jobs with no
group, with the jobs spread over 1, 10, 10,000 and 1,000,000 groups, and with
limits that never hold a job back (a topic rate; a concurrency per group). Each
case is measured beside the plain topic in the same run, in rounds that take
the cases in turn; on Redis also the server's µs per job (``INFO
commandstats``: FCALL).

    .venv/bin/python bench/flow.py [--store redis|sqlite] [--jobs 200000] [--rounds 3]
                                   [--groups 1,10,10000,1000000] [--plain] [--out FILE]

``--plain`` measures the plain topic alone: with ``PYTHONPATH=<checkout>/src``, a
version before flow control, for what the flow code costs a topic that never uses it.

Redis: a private redis-server on a free loopback port (never 6379), without
persistence. A case with more groups than ``--jobs`` puts one job per group
and drains the first ``--jobs`` of them (the turns then hold every group).
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.append(sys.path.pop(0))  # bench/redis.py must not shadow redis-py

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from servers import private_server

import chronoq
from chronoq import Job

BATCH = 1000
RESERVE_COUNT = 10  # as the harness's drain (bench/common.py)


def _jobs(n: int, groups: int) -> Iterator[list[Job]]:
    for first in range(0, n, BATCH):
        if groups == 0:
            yield [Job({"i": i}) for i in range(first, min(first + BATCH, n))]
        else:
            last = min(first + BATCH, n)
            yield [Job({"i": i}, group=f"g{i % groups}") for i in range(first, last)]


Case = tuple[str, int, Callable[[chronoq.Queue, str], None]]


def _none(q: chronoq.Queue, topic: str) -> None:
    return None


def _topic_rate(q: chronoq.Queue, topic: str) -> None:
    q.set_limits(topic, rate=1_000_000)  # never holds a job back


def _group_concurrency(q: chronoq.Queue, topic: str) -> None:
    q.set_limits(topic, group_concurrency=1_000)


def cases(group_counts: list[int]) -> list[Case]:
    found: list[Case] = [("no group, no limit", 0, _none)]
    found.append(("no group, a topic rate", 0, _topic_rate))
    for g in group_counts:
        found.append((f"{g:,} group{'s' * (g > 1)}", g, _none))
    found.append(("10 groups, a concurrency each", 10, _group_concurrency))
    return found


def _fcall_usec(raw: redis.Redis | None) -> float:
    if raw is None:
        return 0.0
    stats = raw.info("commandstats")
    return float(stats.get("cmdstat_fcall", {}).get("usec", 0))


def run_case(
    q: chronoq.Queue, raw: redis.Redis | None, case: Case, jobs: int, n: int
) -> dict[str, float]:
    name, groups, limit = case
    topic = f"flow.{n}.{time.monotonic_ns()}"
    for chunk in _jobs(max(jobs, groups), groups):
        q.put_many(topic, chunk)
    limit(q, topic)
    usec = _fcall_usec(raw)
    done, start = 0, time.perf_counter()
    while done < jobs and (leased := q.reserve(topic, RESERVE_COUNT)):
        q.ack_many(leased)
        done += len(leased)
    seconds = time.perf_counter() - start
    if done < jobs:
        raise RuntimeError(f"{name}: drained {done} jobs of {jobs}")
    server = (_fcall_usec(raw) - usec) / done
    q.purge(topic)
    return {"jobs_s": done / seconds, "server_us": server}


@contextmanager
def store(kind: str) -> Iterator[tuple[chronoq.Queue, redis.Redis | None, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "sqlite":
            url = f"sqlite:///{tmp}/flow.db"
            with chronoq.connect(url) as q:
                yield q, None, url
            return
        with private_server(Path(tmp), None) as url:
            raw = redis.Redis.from_url(url)
            with chronoq.connect(url) as q:
                yield q, raw, url
            raw.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("redis", "sqlite"), default="redis")
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", default="1,10,10000,1000000")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--plain", action="store_true", help="the plain topic alone (runs on a checkout before 0.2)"
    )
    args = parser.parse_args(argv)
    chosen = cases([int(g) for g in args.groups.split(",")])[: 1 if args.plain else None]
    figures: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in chosen}
    console = Console()
    command = "python bench/flow.py " + " ".join(sys.argv[1:] if argv is None else argv)
    with store(args.store) as (q, raw, _), Progress(console=console) as progress:
        task = progress.add_task("cases", total=args.rounds * len(chosen))
        for n in range(args.rounds):
            for case in chosen:
                progress.update(task, description=f"round {n + 1}: {case[0]}")
                figures[case[0]].append(run_case(q, raw, case, args.jobs, n))
                progress.advance(task)
    base = statistics.median(f["jobs_s"] for f in figures[chosen[0][0]])
    table = Table(title=f"drain of {args.jobs:,} jobs, {args.store}: {command}")
    for column in ("case", "jobs/s (each round)", "median", "to no group", "server µs/job"):
        table.add_column(column, justify="left" if column == "case" else "right")
    report: dict[str, Any] = {"command": command, "store": args.store, "cases": {}}
    for name, runs in figures.items():
        median = statistics.median(f["jobs_s"] for f in runs)
        server = statistics.median(f["server_us"] for f in runs)
        each = " · ".join(f"{f['jobs_s']:,.0f}" for f in runs)
        served = f"{server:.1f}" if raw is not None else "-"
        table.add_row(name, each, f"{median:,.0f}", f"{median / base:.2f}", served)
        report["cases"][name] = {"runs": runs, "median": median, "ratio": median / base}
    console.print(table)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
