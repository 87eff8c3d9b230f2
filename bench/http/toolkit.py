"""Starlette's routing and ``Request`` against the server's own dispatch, on
the put and reserve paths of bench/http/run.py (issue 26): the same server
started with each web toolkit in turn (bench/http/toolkit_server.py), A/B
interleaved in one run, so that a ratio compares two servers measured
seconds apart on the same machine.

    .venv/bin/python bench/http/toolkit.py [--toolkits own,starlette] [--rounds 3]
                                           [--seconds 5] [--backends sqlite,redis] [--out FILE]
    .venv/bin/python bench/http/toolkit.py --combine run1.json run2.json run3.json

Each round measures, per store, every toolkit one after the other (the
order rotating from round to round), each on a fresh server and store:
single puts (run.py's put, wrk -t1 -c32), then reserve + ack pairs on a
prefilled topic (run.py's pairs); each after 2 s of wrk to warm up. The
server runs alone on CPU 1, wrk and redis-server on CPU 0. A figure per
side: requests/s (pairs: acks/s), wrk's p50/p99, and the server's CPU
(utime + stime) per request answered. A round's ratio is toolkit ÷ own of
two servers measured within a minute of each other, on the same store; a
run's ratio is the median over its rounds. ``--combine`` prints the ratios
of several runs' ``--out`` files and their median. See docs/benchmarks.md,
"Web toolkit (issue 26)".
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ after the installed packages: bench/redis.py must not hide redis-py
sys.path.append(str(Path(__file__).resolve().parents[1]))

import argparse
import json
import math
import os
import statistics
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

import redis
from common import RUN, command, console, machine
from procs import Placement, Server
from rich.table import Table
from run import prefill, run_async
from scripts import BATCH, WrkRun, pair_script, put_script, wrk
from servers import free_port, private_server

HERE = Path(__file__).resolve().parent
TOOLKITS = ("own", "starlette", "starlette-router")
WARM_S = 2
CONNECTIONS = 32
MIN_JOBS_PER_S = 8000  # prefilled for reserve + ack, per second of wrk


@dataclass(frozen=True)
class Figure:
    """One side's figure of one round."""

    rate: float  # requests/s (put) or pairs/s (reserve + ack)
    p50_ms: float
    p99_ms: float
    cpu_us: float  # server CPU per HTTP request answered
    empty: int = 0  # reserves that found no job (the topic ran dry)


def toolkit_server(place: Placement, toolkit: str, store: str, log: Path) -> Server:
    command_ = [*place.pin(place.server), sys.executable, str(HERE / "toolkit_server.py")]
    port = free_port()
    command_ += ["--toolkit", toolkit, "--store", store, "--port", str(port)]
    return Server(command_, port, "/healthz", log)


class Bench:
    def __init__(self, tmp: Path, redis_url: str, seconds: int) -> None:
        self.tmp = tmp
        self.place = Placement.choose()
        self.redis = redis.Redis.from_url(redis_url)
        self.redis_url = redis_url
        self.seconds = seconds
        self.put_lua = self.script("put", put_script())

    def script(self, name: str, text: str) -> Path:
        path = self.tmp / f"{name}.lua"
        path.write_text(text)
        return path

    def wrk(self, url: str, script: Path, seconds: int) -> WrkRun:
        return wrk(url, seconds, CONNECTIONS, script, self.place.pin(self.place.client))

    def timed(self, server: Server, url: str, script: Path) -> tuple[WrkRun, float]:
        """(wrk's run, server CPU µs per request) after a warm-up on the same URL."""
        self.wrk(url, script, WARM_S)
        before = server.cpu_seconds()
        run = self.wrk(url, script, self.seconds)
        return run, (server.cpu_seconds() - before) / run.requests * 1e6

    def store(self, backend: str, name: str) -> str:
        if backend == "sqlite":
            return f"sqlite:///{self.tmp / name}.db"
        self.redis.flushall()
        return self.redis_url

    def drop(self, backend: str, name: str) -> None:
        """The store's data gone and the disk flushed before the next server
        (run.py: a SQLite round's write-back slowed the next measurement)."""
        if backend == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                (self.tmp / f"{name}.db{suffix}").unlink(missing_ok=True)
        else:
            self.redis.flushall()
        os.sync()

    def side(self, toolkit: str, backend: str, round_: int) -> dict[str, Figure]:
        """Put, then reserve + ack, on one fresh server and store."""
        name = f"{backend}-{toolkit}-r{round_}"
        topic = f"tk.{RUN}.r{round_}"
        store = self.store(backend, name)
        with toolkit_server(self.place, toolkit, store, self.tmp / "srv.log") as server:
            put_url = f"{server.base}/v1/topics/{topic}.put/jobs"
            put, put_cpu = self.timed(server, put_url, self.put_lua)
            # a pair is two requests, each about a put's work: this many jobs outlast
            # the warm-up and the run twice over; and at least 8,000 per second, as
            # a busy machine can slow the put more than the pairs after it (without
            # this floor, one of the 90 in docs/benchmarks.md ran dry)
            seconds = WARM_S + self.seconds
            jobs = max(BATCH, math.ceil(put.rate * seconds * 1.2), MIN_JOBS_PER_S * seconds)
            run_async(prefill(server.port, f"{topic}.pairs", jobs))
            pairs_lua = self.script("pairs", pair_script(f"{topic}.pairs"))
            pairs, pairs_cpu = self.timed(server, server.base + "/", pairs_lua)
        self.drop(backend, name)
        return {
            "put": Figure(put.rate, put.p50_ms, put.p99_ms, put_cpu),
            "reserve_ack": Figure(
                pairs.per_second("acks"), pairs.p50_ms, pairs.p99_ms, pairs_cpu,
                pairs.counters["empty"],
            ),
        }  # fmt: skip


def run_rounds(
    bench: Bench, toolkits: tuple[str, ...], backends: tuple[str, ...], rounds: int
) -> dict[str, dict[str, list[dict[str, Figure]]]]:
    """figures[backend][toolkit] = one {figure name: Figure} per round."""
    out = console()
    figures: dict[str, dict[str, list[dict[str, Figure]]]] = {
        b: {t: [] for t in toolkits} for b in backends
    }
    for round_ in range(rounds):
        shift = round_ % len(toolkits)
        order = toolkits[shift:] + toolkits[:shift]
        for backend in backends[:: 1 if round_ % 2 == 0 else -1]:
            for toolkit in order:
                got = bench.side(toolkit, backend, round_)
                figures[backend][toolkit].append(got)
                put, pairs = got["put"], got["reserve_ack"]
                out.print(
                    f"round {round_ + 1} {backend:6} {toolkit:16} put {put.rate:8,.0f} req/s "
                    f"{put.cpu_us:5.1f} µs/req  reserve+ack {pairs.rate:7,.0f} pairs/s "
                    f"{pairs.cpu_us:5.1f} µs/req  empty {pairs.empty}"
                )
    return figures


def summary(
    figures: dict[str, dict[str, list[dict[str, Figure]]]], toolkits: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Per store, figure and toolkit: medians over rounds, and the ratios to
    own of each round (rate and CPU per request) with their median."""
    rows = []
    for backend, sides in figures.items():
        for name in ("put", "reserve_ack"):
            own = [r[name] for r in sides["own"]]
            for toolkit in toolkits:
                mine = [r[name] for r in sides[toolkit]]
                rate_ratios = [m.rate / o.rate for m, o in zip(mine, own, strict=True)]
                cpu_ratios = [m.cpu_us / o.cpu_us for m, o in zip(mine, own, strict=True)]
                rows.append({
                    "store": backend, "figure": name, "toolkit": toolkit,
                    "rate": statistics.median(f.rate for f in mine),
                    "rates": [f.rate for f in mine],
                    "p50_ms": statistics.median(f.p50_ms for f in mine),
                    "p99_ms": statistics.median(f.p99_ms for f in mine),
                    "cpu_us": statistics.median(f.cpu_us for f in mine),
                    "cpus_us": [f.cpu_us for f in mine],
                    "empty": sum(f.empty for f in mine),
                    "rate_ratios": rate_ratios, "rate_ratio": statistics.median(rate_ratios),
                    "cpu_ratios": cpu_ratios, "cpu_ratio": statistics.median(cpu_ratios),
                })  # fmt: skip
    return rows


def table(rows: list[dict[str, Any]]) -> Table:
    title = "median of rounds; ratio = toolkit ÷ own of each round, median of rounds"
    out = Table(title=title)
    columns = ("store", "figure", "toolkit", "rate", "p50 ms", "p99 ms", "CPU µs/req")
    for column in (*columns, "rate ratio", "CPU ratio", "rate ratios of rounds"):
        out.add_column(column, justify="right")
    for row in rows:
        out.add_row(
            row["store"], row["figure"], row["toolkit"], f"{row['rate']:,.0f}",
            f"{row['p50_ms']:.2f}", f"{row['p99_ms']:.2f}", f"{row['cpu_us']:.1f}",
            f"{row['rate_ratio']:.3f}", f"{row['cpu_ratio']:.3f}",
            " / ".join(f"{r:.3f}" for r in row["rate_ratios"]),
        )  # fmt: skip
    return out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toolkits", default="own,starlette", help=",".join(TOOLKITS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5, help="per measured wrk run")
    parser.add_argument("--backends", default="sqlite,redis")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    parser.add_argument(
        "--combine", type=Path, nargs="+", help="no run: the ratios of these runs' --out files"
    )
    args = parser.parse_args()
    args.toolkits = tuple(t.strip() for t in args.toolkits.split(",") if t.strip())
    args.backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    if "own" not in args.toolkits or set(args.toolkits) - set(TOOLKITS):
        parser.error(f"--toolkits: own and any of {', '.join(TOOLKITS)}, comma-separated")
    if not args.backends or set(args.backends) - {"sqlite", "redis"}:
        parser.error("--backends: sqlite, redis or both, comma-separated")
    return args


def combine(paths: list[Path]) -> Table:
    """Each run's ratios (median over its rounds) and their median over runs."""
    runs = [json.loads(path.read_text()) for path in paths]
    out = Table(title="ratio toolkit ÷ own per run (median of its rounds); median of the runs")
    for column in ("store", "figure", "toolkit", "measure", *(p.stem for p in paths), "median"):
        out.add_column(column, justify="right")
    for row in runs[0]["rows"]:
        if row["toolkit"] == "own":
            continue
        key = (row["store"], row["figure"], row["toolkit"])
        for measure in ("rate_ratio", "cpu_ratio"):
            values = [
                next(
                    r[measure]
                    for r in run["rows"]
                    if (r["store"], r["figure"], r["toolkit"]) == key
                )
                for run in runs
            ]
            cells = [f"{v:.3f}" for v in values]
            out.add_row(*key, measure, *cells, f"{statistics.median(values):.3f}")
    return out


def main() -> int:
    args = parse_args()
    out = console()
    if args.combine:
        out.print(table_of_loads(args.combine))
        out.print(combine(args.combine))
        return 0
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    report: dict[str, Any] = {"command": command(), "uptime_before": uptime}
    report["machine"] = machine(starlette=_version("starlette"), uvicorn=_version("uvicorn"))
    out.print(f"command   {report['command']}\nuptime    {uptime}")
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-toolkit-") as folder:
        tmp = Path(folder)
        place = Placement.choose()
        if place.client is not None:
            os.sched_setaffinity(0, {place.client})
        out.print(f"placement {place.text}")
        with private_server(tmp, place.client) as redis_url:
            bench = Bench(tmp, redis_url, args.seconds)
            figures = run_rounds(bench, args.toolkits, args.backends, args.rounds)
            bench.redis.close()
    rows = summary(figures, args.toolkits)
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["rows"] = rows
    report["rounds"] = {
        b: {t: [{k: asdict(f) for k, f in r.items()} for r in rs] for t, rs in sides.items()}
        for b, sides in figures.items()
    }
    out.print(table(rows))
    out.print(f"load avg before {report['machine']['loadavg_start']}, after "
              f"{report['machine']['loadavg_end']}")  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def table_of_loads(paths: list[Path]) -> Table:
    out = Table(title="runs")
    for column in ("run", "uptime before", "load avg after (1, 5, 15 min)"):
        out.add_column(column)
    for path in paths:
        run = json.loads(path.read_text())
        after = ", ".join(f"{v:.2f}" for v in run["machine"]["loadavg_end"])
        out.add_row(path.stem, run["uptime_before"], after)
    return out


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    sys.exit(main())
