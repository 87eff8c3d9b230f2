"""Benchmark of chronoq on Redis Cluster against one Redis node, in the same run: throughput of
put, put_many and reserve + ack; the hand-over lag of a waiting consumer; the servers' CPU per
job; how evenly the work spreads over the primaries; and a model of throughput against the
number of primaries.

    .venv/bin/python bench/cluster/run.py [--quick] [--rounds N] [--pin split|none] [--out FILE]

It starts one private redis-server and two local Redis Clusters of 3 primaries, one without
replicas and one with a replica per primary (tests/topologies.py), on free loopback ports
(never 6379), and stops them all at the end. The stores are measured in alternating order,
phase by phase, over ``--rounds`` rounds, so that a busy moment of the machine falls on all of
them. See docs/benchmarks.md for how to read it.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ after redis-py (bench/redis.py would shadow it); the repository root for tests/
sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis
from common import command, console, machine, render_header
from phases import PHASES, Sample, measure, measure_lag
from report import (
    calls_table,
    cpu_table,
    figures,
    lag_table,
    model,
    model_table,
    spread_table,
    throughput_table,
)
from rich.console import Console
from servers import placement
from spread import busiest_share, measure_spread
from stores import Meter, Store, open_stores

import chronoq

say = Console(stderr=True).log
SPREAD_SHARDS = (16, 48, 64)
MODEL_SHARDS = ("16", "64")


@dataclass(frozen=True)
class Sizes:
    put_one: int
    put_many_100: int
    put_many_1000: int
    reserve_1: int
    reserve_100: int
    lag: int
    spread: int
    rounds: int

    @classmethod
    def for_run(cls, quick: bool, rounds: int | None) -> Sizes:
        if quick:
            return cls(300, 2_000, 5_000, 300, 2_000, 100, 5_000, rounds or 2)
        return cls(4_000, 20_000, 50_000, 4_000, 30_000, 1_000, 50_000, rounds or 3)


def rotated(stores: list[Store], rnd: int) -> list[Store]:
    k = rnd % len(stores)
    return stores[k:] + stores[:k]


def run_rounds(stores: list[Store], sizes: Sizes) -> list[Sample]:
    queues = {s.key: chronoq.connect(s.url) for s in stores}
    meters = {s.key: Meter(s) for s in stores}
    samples: list[Sample] = []
    try:
        for rnd in range(sizes.rounds):
            order = rotated(stores, rnd)
            say(f"round {rnd + 1}/{sizes.rounds}: {' → '.join(s.key for s in order)}")
            for phase in PHASES:
                n = getattr(sizes, phase.key)
                for s in order:
                    samples.append(measure(s, queues[s.key], meters[s.key], phase, n, rnd))
            for s in order:
                samples.append(measure_lag(s, meters[s.key], sizes.lag, rnd))
    finally:
        for q in queues.values():
            q.close()
        for m in meters.values():
            m.close()
    return samples


def idle_cpu(stores: list[Store], seconds: float) -> dict[str, dict[str, float]]:
    """Server CPU, in ms per s, while nobody calls (cron, the cluster bus, INFO itself)."""
    out = {}
    for s in stores[1:]:  # node1 and node16 are the same server
        meter = Meter(s)
        meter.start()
        time.sleep(seconds)
        usage = meter.stop()
        meter.close()
        out[s.key] = {"primaries": usage.total_cpu / seconds * 1e3}
        out[s.key]["replicas"] = usage.replica_cpu / seconds * 1e3
    return out


def measure_all(stores: list[Store], sizes: Sizes, report: dict[str, Any]) -> None:
    with redis.Redis(port=stores[0].primaries[0]) as client:
        report["machine"]["redis_server"] = client.info("server")["redis_version"]
    report["idle_cpu_ms_per_s"] = idle_cpu(stores, 1.0 if sizes.rounds < 3 else 3.0)
    samples = run_rounds(stores, sizes)
    report["figures"] = figures(samples, sizes.lag)
    cluster = stores[-1]
    report["slot_map"] = [list(row) for row in cluster.slot_map()]
    report["spread"] = []
    for shards in SPREAD_SHARDS:
        say(f"spread: {sizes.spread:,} jobs over {shards} shards, put then drained")
        report["spread"].append(measure_spread(cluster, shards, sizes.spread))
    evenness = {
        shards: {str(p): busiest_share(int(shards), p) for p in (3, 6, 12)}
        for shards in MODEL_SHARDS
    }
    report["model"] = model(report["figures"], evenness)


def render(report: dict[str, Any]) -> None:
    out = console()
    info = report["machine"]
    render_header(out, report, f"redis-server {info['redis_server']}, redis-py {info['redis_py']}")
    figs = report["figures"]
    out.print(throughput_table(figs))
    out.print(cpu_table(figs))
    out.print(calls_table(figs))
    out.print(lag_table(figs))
    idle = report["idle_cpu_ms_per_s"]
    out.print(
        "[bold]idle[/]      server CPU with no calls, ms/s: "
        + "; ".join(
            f"{k}: primaries {v['primaries']:.1f}, replicas {v['replicas']:.1f}"
            for k, v in idle.items()
        )
    )
    out.print(spread_table(report["spread"]))
    out.print(model_table(report["model"]))
    out.print(
        "[bold]model[/]     "
        + "; ".join(
            f"shards={shards}, {p} primaries: busiest ×{v['mean']:.2f} of the mean "
            f"(worst ×{v['worst']:.2f})"
            for shards, by_p in report["model"]["busiest_share"].items()
            for p, v in by_p.items()
        )
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, 2 rounds: a smoke run")
    parser.add_argument("--rounds", type=int, help="rounds of alternation (default 3; quick 2)")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--pin",
        choices=("split", "none"),
        default="split",
        help="every redis-server on one CPU and this process on another (split, the default), "
        "or leave it to the scheduler",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = Sizes.for_run(args.quick, args.rounds)
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(redis_py=redis.__version__),
        "sizes": asdict(sizes),
    }
    started = time.perf_counter()
    server_cpu, my_cpu, pinned = placement(args.pin)
    with (
        tempfile.TemporaryDirectory(prefix="chronoq-bench-cluster-") as tmp,
        open_stores(Path(tmp), server_cpu) as stores,
    ):
        if my_cpu is not None:
            os.sched_setaffinity(0, {my_cpu})
        report["store"] = (
            "one private redis-server, a cluster of 3 primaries and one of 3 primaries + "
            f"3 replicas (--save '' --appendonly no); {pinned}"
        )
        report["stores"] = {s.key: s.label for s in stores}
        measure_all(stores, sizes, report)
    report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    render(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
