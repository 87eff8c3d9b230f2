"""Benchmark of the worker: how fast one ``chronoq.Worker`` process drains
100,000 due no-op jobs, on Redis and on SQLite, with plain-function handlers
(run in the worker's threads) and with ``async def`` handlers (on its event
loop), next to the library's own drain loop (reserve(100) + ack_many, no
worker) measured in the same run.

    .venv/bin/python bench/worker.py [--quick] [--out FILE] [--pin split|same|none]

It starts a private redis-server on a free loopback port (never 6379) and a
SQLite file in a temporary directory. Results go to stdout as a table and,
with ``--out``, to a JSON file. See docs/benchmarks.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path, where ``import redis`` would
# find bench/redis.py instead of redis-py: move bench/ to the end.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.append(sys.path.pop(0))

import argparse
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis
from common import (
    PAYLOAD,
    REPEATS,
    RUN,
    Rate,
    bench_drain,
    command,
    console,
    machine,
    rate_table,
    render_header,
)
from servers import placement, private_server

import chronoq
from chronoq import Job, Reservation

DRAIN_TARGET_REDIS = 20_000.0  # jobs/s, the figure for one process on Redis
CONCURRENCY = (10, 200)  # the default, and two reserves of 100 in flight for tiny handlers


@dataclass(frozen=True)
class Sizes:
    jobs: int
    repeats: int

    @classmethod
    def for_run(cls, quick: bool) -> Sizes:
        return cls(10_000, 1) if quick else cls(100_000, REPEATS)


def fill(q: chronoq.Queue, topic: str, n: int) -> None:
    for first in range(0, n, 1000):
        q.put_many(topic, [Job(payload=PAYLOAD) for _ in range(min(1000, n - first))])


def noop(job: Reservation) -> None:
    pass


async def async_noop(job: Reservation) -> None:
    pass


def drain_once(url: str, topic: str, n: int, handler: Any, concurrency: int) -> float:
    """Put ``n`` due jobs, then time a fresh worker from start until it has
    acked them all and stopped; returns jobs/s."""
    q = chronoq.connect(url)
    try:
        fill(q, topic, n)
        worker = chronoq.Worker(q, {topic: handler}, concurrency=concurrency, recurring=False)

        def stop_when_done() -> None:
            while worker.counts.acked < n:
                time.sleep(0.002)
            worker.stop()  # its shutdown waits for the last acks to reach the store

        threading.Thread(target=stop_when_done, daemon=True).start()
        started = time.perf_counter()
        worker.run()
        elapsed = time.perf_counter() - started
        left = q.stats(topic)["total"]
        if left:
            raise RuntimeError(f"{left} jobs left on {topic} after the worker stopped")
        return n / elapsed
    finally:
        q.close()


def run_store(name: str, url: str, sizes: Sizes) -> list[Rate]:
    q = chronoq.connect(url)
    try:
        _, library = bench_drain(q, sizes.jobs)  # reserve(100) + ack_many, no worker
    finally:
        q.close()
    baseline = Rate(
        f"{name}_library_drain", f"{name}: reserve(100) + ack_many loop", sizes.jobs, library
    )
    rates = [baseline]
    for concurrency in CONCURRENCY:
        for kind, handler in (("sync", noop), ("async", async_noop)):
            runs = [
                drain_once(
                    url,
                    f"{RUN}-w-{name}-{kind}-{concurrency}-{r}",
                    sizes.jobs,
                    handler,
                    concurrency,
                )
                for r in range(sizes.repeats)
            ]
            targeted = name == "redis" and concurrency == CONCURRENCY[-1]
            target = DRAIN_TARGET_REDIS if targeted else None
            label = f"{name}: Worker, {kind} no-op handler, concurrency {concurrency}"
            rates.append(
                Rate(
                    f"{name}_worker_{kind}_c{concurrency}",
                    label,
                    sizes.jobs,
                    runs,
                    target,
                    baseline,
                )
            )
    return rates


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 jobs, one run each")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--pin",
        choices=("split", "same", "none"),
        default="split",
        help="redis-server on another CPU than this process (default), "
        "on the same one, or not pinned",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = Sizes.for_run(args.quick)
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(redis_py=redis.__version__),
        "sizes": {"jobs": sizes.jobs, "repeats": sizes.repeats},
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-") as tmp:
        server_cpu, my_cpu, pinned = placement(args.pin)
        with private_server(Path(tmp), server_cpu) as url:
            if my_cpu is not None:
                os.sched_setaffinity(0, {my_cpu})
            raw = redis.Redis.from_url(url)
            report["machine"]["redis_server"] = raw.info("server")["redis_version"]
            raw.close()
            report["store"] = f"{url}: a private redis-server (no persistence); {pinned}"
            rates = run_store("redis", url, sizes)
        rates += run_store("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}", sizes)
    report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["figures"] = {rate.key: rate.as_json() for rate in rates}
    out = console()
    render_header(out, report, f"redis-server {report['machine']['redis_server']}")
    out.print(rate_table(rates))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
