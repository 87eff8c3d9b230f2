"""Benchmark of ``chronoq serve`` on SQLite and on Redis, in the same run,
next to a bare ASGI hello-world on the same uvicorn settings.

Throughput (wrk, 1 thread, from CPU 0; the server alone on CPU 1): single
puts, reserve + ack pairs (chained in wrk's Lua), and jobs:batch requests of
1,000 jobs. Each round measures hello-world, then each store on a fresh
server and store (the stores' order alternating from round to round); a
figure is the median over rounds, and a rate is also given as a share of the
same round's hello-world rate. Then, per store: the hand-over lag of jobs due
at 40 and 400 per second to clients waiting in long polls, and the server's
CPU while 1,000 long polls wait on one topic.

    .venv/bin/python bench/http/run.py [--rounds 3] [--seconds 5] [--backends sqlite,redis]
                                       [--lag-seconds 20] [--idle-seconds 10] [--quick]
                                       [--out FILE]

``--versus`` runs bench/http/versus.py instead, with the other options:
chronoq's pushes on each protocol against ouqiang/delay-queue's Go server
(OUQIANG_BIN) and the hello-world, with http.client and wrk.

Redis is a private redis-server on a free loopback port (never 6379), no
persistence, stopped at the end. See docs/benchmarks.md, "HTTP service".
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ after the installed packages: bench/redis.py must not hide redis-py
sys.path.append(str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Coroutine
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from importlib.metadata import version
from typing import Any, TypeVar

import redis
import uvloop
from client import Connection
from common import RUN, command, console, machine
from idle import idle_polls
from lag import handover
from procs import Placement, Server, chronoq_server, cpu_seconds, hello_server
from scripts import BATCH, DONE, WrkRun, batch_script, pair_script, put_script, wrk_version
from scripts import wrk as run_wrk
from servers import free_port, private_server
from tables import BATCH_JOBS, PAIR_SHARE, PUT_SHARE, judge_idle, judge_lag, rate_figure, render

T = TypeVar("T")
BACKENDS = ("sqlite", "redis")


@dataclass(frozen=True)
class Settings:
    rounds: int
    seconds: int  # per wrk run
    backends: tuple[str, ...]
    lag_seconds: float  # per rate
    idle_seconds: float  # per CPU window
    connections: int = 32  # wrk connections: put, reserve+ack, hello
    batch_connections: int = 4  # wrk connections: jobs:batch
    lag_rates: tuple[float, ...] = (40.0, 400.0)
    polls: int = 1000


def run_async(work: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(work)


async def prefill(port: int, topic: str, jobs: int) -> None:
    """Put ``jobs`` due jobs in jobs:batch requests of 1,000."""
    body = json.dumps({"jobs": [{"payload": {"n": i}} for i in range(BATCH)]}).encode()
    conn = await Connection.open(port)
    try:
        for _ in range(math.ceil(jobs / BATCH)):
            await conn.post(f"/v1/topics/{topic}/jobs:batch", body)
    finally:
        await conn.close()


class Bench:
    def __init__(self, settings: Settings, tmp: Path, stack: ExitStack) -> None:
        self.settings = settings
        self.tmp = tmp
        self.place = Placement.choose()
        self.redis_url: str | None = None
        self.redis: redis.Redis | None = None
        if "redis" in settings.backends:
            self.redis_url = stack.enter_context(private_server(tmp, self.place.client))
            self.redis = redis.Redis.from_url(self.redis_url)
            stack.callback(self.redis.close)
        self.log = tmp / "servers.log"

    def script(self, name: str, text: str) -> Path:
        path = self.tmp / f"{name}.lua"
        path.write_text(text)
        return path

    def wrk(self, url: str, script: Path, connections: int | None = None) -> WrkRun:
        conns = connections or self.settings.connections
        return run_wrk(url, self.settings.seconds, conns, script, self.place.pin(self.place.client))

    def store(self, backend: str, name: str) -> str:
        """A fresh, empty store."""
        if backend == "sqlite":
            return f"sqlite:///{self.tmp / name}.db"
        assert self.redis is not None and self.redis_url is not None
        self.redis.flushall()
        return self.redis_url

    def server(self, backend: str, name: str) -> Server:
        return chronoq_server(self.place, self.store(backend, name), free_port(), self.log)

    def drop(self, backend: str, name: str) -> None:
        """Remove a store's data and flush the disk now: the kernel writing a
        SQLite round's 100s of MB back during the next measurement cost the
        hello-world after it a third of its rate."""
        if backend == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                (self.tmp / f"{name}.db{suffix}").unlink(missing_ok=True)
        else:
            assert self.redis is not None
            self.redis.flushall()
        os.sync()

    # -- throughput ---------------------------------------------------------------------

    def hello(self) -> WrkRun:
        with hello_server(self.place, free_port(), self.log) as server:
            return self.wrk(f"{server.base}/hello", self.script("hello", f"-- GET\n{DONE}"))

    def store_round(self, backend: str, round_: int, hello: float) -> dict[str, Any]:
        topic = f"bench.{RUN}.r{round_}"
        with self.server(backend, f"{backend}-r{round_}") as server:
            put = self.wrk(
                f"{server.base}/v1/topics/{topic}.put/jobs", self.script("put", put_script())
            )
            # a pair is 2 requests, each at least a hello-world's work: never more than
            # hello/2 pairs/s, so this many ready jobs outlast the run
            jobs = max(BATCH, math.ceil(hello / 2 * self.settings.seconds * 1.2))
            run_async(prefill(server.port, f"{topic}.pairs", jobs))
            pairs = self.wrk(server.base + "/", self.script("pairs", pair_script(f"{topic}.pairs")))
            batch = self.wrk(
                f"{server.base}/v1/topics/{topic}.batch/jobs:batch",
                self.script("batch", batch_script()),
                self.settings.batch_connections,
            )
        self.drop(backend, f"{backend}-r{round_}")
        return {"put": put, "pairs": pairs, "prefilled": jobs, "batch": batch}

    def throughput(self) -> tuple[list[float], dict[str, list[dict[str, Any]]]]:
        hello: list[float] = []
        rounds: dict[str, list[dict[str, Any]]] = {b: [] for b in self.settings.backends}
        for round_ in range(self.settings.rounds):
            hello.append(self.hello().rate)
            order = self.settings.backends[:: 1 if round_ % 2 == 0 else -1]
            for backend in order:
                rounds[backend].append(self.store_round(backend, round_, hello[-1]))
        return hello, rounds

    # -- lag and idle long polls ---------------------------------------------------------------

    def lags(self, backend: str) -> dict[str, Any]:
        out = {}
        with self.server(backend, f"{backend}-lag") as server:
            for rate in self.settings.lag_rates:
                topic = f"bench.{RUN}.lag{rate:g}"
                lag = run_async(handover(server.port, topic, rate, self.settings.lag_seconds))
                out[f"{rate:g}"] = judge_lag(lag)
        return out

    def idle(self, backend: str) -> dict[str, Any]:
        with self.server(backend, f"{backend}-idle") as server:
            clocks = {"server": server.cpu_seconds}
            blocked = None
            if backend == "redis":
                assert self.redis is not None
                pid = int(self.redis.info("server")["process_id"])
                clocks["redis-server"] = lambda: cpu_seconds(pid)
                info = self.redis.info

                def blocked() -> dict[str, int]:
                    clients = info("clients")
                    return {k: int(clients[k]) for k in ("blocked_clients", "connected_clients")}

            idle = run_async(
                idle_polls(
                    server.port,
                    f"bench.{RUN}.idle",
                    self.settings.polls,
                    self.settings.idle_seconds,
                    clocks,
                    blocked,
                )
            )
        return judge_idle(idle)


def figures(
    hello: list[float], rounds: list[dict[str, Any]], lag: dict[str, Any], idle: dict[str, Any]
) -> dict[str, Any]:
    """One store's figures from its rounds: pairs/s counts the acks answered
    (one reserve + one ack = one pair) over wrk's duration."""
    pairs = rate_figure(
        "pairs/s", [r["pairs"].per_second("acks") for r in rounds], hello, PAIR_SHARE
    )
    pairs |= {
        "requests_per_s_runs": [r["pairs"].rate for r in rounds],
        "empty_reserves": [r["pairs"].counters["empty"] for r in rounds],
        "prefilled_jobs": [r["prefilled"] for r in rounds],
        "wrk": [r["pairs"].as_json() for r in rounds],
    }
    put = rate_figure("req/s", [r["put"].rate for r in rounds], hello, PUT_SHARE)
    put["wrk"] = [r["put"].as_json() for r in rounds]
    batch = rate_figure("jobs/s", [r["batch"].rate * BATCH for r in rounds], None, None)
    batch |= {"target_min": BATCH_JOBS, "met": batch["median"] >= BATCH_JOBS}
    batch["wrk"] = [r["batch"].as_json() for r in rounds]
    return {"put": put, "reserve_ack": pairs, "put_batch": batch, "lag": lag, "idle_polls": idle}


def parse_args(argv: list[str] | None) -> tuple[Settings, Path | None]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5, help="per wrk run")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,redis")
    parser.add_argument("--lag-seconds", type=float, default=20.0, help="per rate")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="CPU window")
    parser.add_argument("--quick", action="store_true", help="a smoke run, about 30 s")
    parser.add_argument("--out", type=Path, help="also write the raw figures as JSON here")
    parser.add_argument(
        "--versus",
        action="store_true",
        help="run bench/http/versus.py (against ouqiang) with the other options instead",
    )
    args = parser.parse_args(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    if not backends or set(backends) - set(BACKENDS):
        parser.error(f"--backends: a comma-separated list of {', '.join(BACKENDS)}")
    if args.quick:
        return Settings(1, 1, backends, 2.0, 1.0), args.out
    return Settings(
        args.rounds, args.seconds, backends, args.lag_seconds, args.idle_seconds
    ), args.out


def versions() -> dict[str, str]:
    names = ("uvicorn", "uvloop", "httptools", "msgspec")
    return {"wrk": wrk_version(), **{name: version(name) for name in names}}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--versus" in args:
        import versus

        return versus.main([arg for arg in args if arg != "--versus"])
    settings, out = parse_args(argv)
    if shutil.which("wrk") is None:
        print(
            "wrk is missing: `make bench-http` installs it (apt-get install wrk)", file=sys.stderr
        )
        return 2
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(**versions()),
        "settings": asdict(settings),
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-http-") as tmp, ExitStack() as stack:
        bench = Bench(settings, Path(tmp), stack)
        if bench.place.client is not None:
            os.sched_setaffinity(0, {bench.place.client})
        if bench.redis is not None:
            report["machine"]["redis_server"] = bench.redis.info("server")["redis_version"]
        report["placement"] = bench.place.text
        hello, rounds = bench.throughput()
        report["hello"] = rate_figure("req/s", hello, None, None)
        report["backends"] = {
            backend: figures(hello, rounds[backend], bench.lags(backend), bench.idle(backend))
            for backend in settings.backends
        }
    report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    render(console(), report)
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
