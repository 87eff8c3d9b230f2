"""The far tier at scale (issue 27): Redis memory per job for each tier, the put rate
at 10 million jobs, the promotion rate and lag of a bucket of a million jobs due in
one second, the AOF size and restart time with a model of 100 million jobs, and
SQLite's bytes per job on disk.

    .venv/bin/python bench/scale.py [--quick] [--rounds N] [--phases a,b] [--out FILE]

Phases (``--phases``, all by default):

- harness: 5,000 jobs put one by one, due in an hour, as bench/peers/run.py measures
  memory: used_memory per job, near tier (``?horizon_ms=off``) and far tier;
- volume: 200,000 jobs (near tier) and 10,000,000 (far tier) due uniformly over 30
  days, put with put_many(1,000) by 2 producer processes into a redis-server with
  ``appendonly yes`` and ``appendfsync everysec``: used_memory per job, put rate; then
  BGREWRITEAOF, the AOF's size, and a restart of the server timed;
- promotion: rounds of a bucket of 1,000,000 jobs due within one second, with a
  short horizon, consumer processes waiting in reserve(wait=…); the promotion's rate,
  the lag of the first and last job delivered, early deliveries, the longest server
  call (SLOWLOG); with shards=1 and shards=4, taking turns;
- sqlite: 1,000,000 jobs due over 30 days in a new SQLite file: bytes on disk.

Every redis-server is private: loopback, a free port (never 6379), in a temporary
directory removed at the end. The figures, the command and the machine go to
``--out`` (JSON) and to a table on stdout. See docs/benchmarks.md, "Scale: the far
tier".
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench/scale/ first; bench/ (common.py, servers.py) last: its redis.py would shadow redis-py
sys.path[:] = [str(HERE / "scale"), *(p for p in sys.path if p != str(HERE)), str(HERE)]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, replace  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402
from common import command, console, machine, render_header  # noqa: E402
from harness import harness_memory  # noqa: E402
from promotion import Plan, promotion_rounds  # noqa: E402
from report import model, promotion_summary, tables  # noqa: E402
from rich.console import Console  # noqa: E402
from servers import placement, private_server  # noqa: E402
from sqlite_disk import sqlite_disk  # noqa: E402
from volume import Volume, measure_volume  # noqa: E402

PHASES = ("harness", "volume", "promotion", "sqlite")
SHARDS = (1, 4)
PUT_RATE_GUESS = 20_000.0  # jobs/s, for planning a promotion round when no fill ran


@dataclass(frozen=True)
class Sizes:
    harness: int
    harness_rounds: int
    jobs: int
    near_jobs: int
    bucket: int
    rounds: int
    horizon_ms: int
    bucket_ms: int
    sqlite_jobs: int
    producers: int
    consumers: int

    @classmethod
    def for_run(cls, quick: bool) -> Sizes:
        if quick:  # a 10 s bucket and 5 s horizon: a round waits seconds, not a minute
            return cls(500, 1, 100_000, 20_000, 20_000, 1, 5_000, 10_000, 20_000, 2, 2)
        return cls(5000, 3, 10_000_000, 200_000, 1_000_000, 5, 20_000, 60_000, 1_000_000, 2, 2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, one round: a smoke run")
    parser.add_argument("--phases", default=",".join(PHASES), help="which phases, comma-separated")
    parser.add_argument("--out", type=Path, help="the JSON (default bench/scale/out/scale.json)")
    parser.add_argument("--workdir", type=Path, help="where the servers' and SQLite's files go")
    parser.add_argument(
        "--pin",
        choices=("split", "none"),
        default="none",
        help="redis-server on one CPU, this process and its producers and consumers on the "
        "other (split); or leave them to the scheduler (none, the default: two producers "
        "then share the second CPU with the consumers)",
    )
    for name in Sizes.__dataclass_fields__:
        if name not in ("harness_rounds",):
            parser.add_argument(f"--{name.replace('_', '-')}", type=int, help="override")
    return parser.parse_args(argv)


def sizes_of(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.for_run(args.quick)
    given = {k: v for k, v in vars(args).items() if k in Sizes.__dataclass_fields__ and v}
    return replace(sizes, **given)


def run(phases: list[str], sizes: Sizes, workdir: Path, cpu: int | None, say: Console) -> Any:
    report: dict[str, Any] = {"loadavg_at_phase": {}}
    put_rate = PUT_RATE_GUESS
    for phase in phases:
        report["loadavg_at_phase"][phase] = list(os.getloadavg())
        if phase == "harness":
            with private_server(_mkdir(workdir / "harness"), cpu) as url:
                report["harness"] = harness_memory(url, sizes.harness, sizes.harness_rounds, say)
        elif phase == "volume":
            volume = Volume(sizes.jobs, sizes.near_jobs, sizes.producers)
            report["volume"] = measure_volume(_mkdir(workdir / "aof"), volume, cpu, say)
            report["model"] = model(report["volume"])
            put_rate = report["volume"]["far"]["put"]["jobs_per_s"]
        elif phase == "promotion":
            plan = Plan(
                sizes.bucket,
                sizes.horizon_ms,
                sizes.bucket_ms,
                sizes.rounds,
                SHARDS,
                sizes.consumers,
                count=100,
                wait_s=2.0,
                producers=sizes.producers,
            )
            with private_server(_mkdir(workdir / "promotion"), cpu) as url:
                found = promotion_rounds(url, plan, put_rate, workdir, say)
            found["plan"] = asdict(plan)
            found["summary"] = [promotion_summary(found["rounds"], s) for s in SHARDS]
            report["promotion"] = found
        elif phase == "sqlite":
            report["sqlite"] = sqlite_disk(_mkdir(workdir / "sqlite"), sizes.sqlite_jobs, say)
    return report


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise SystemExit(f"unknown phase(s) {', '.join(sorted(unknown))}: take {PHASES}")
    sizes = sizes_of(args)
    out_path = args.out or HERE / "scale" / "out" / (
        "scale-quick.json" if args.quick else "scale.json"
    )
    say = Console(stderr=True)
    server_cpu, my_cpu, pinned = placement(args.pin)
    if my_cpu is not None:
        os.sched_setaffinity(0, {my_cpu})
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(redis_py=redis.__version__),
        "sizes": asdict(sizes),
        "phases": phases,
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-scale-", dir=args.workdir) as tmp:
        report |= run(phases, sizes, Path(tmp), server_cpu, say)
    report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["machine"]["redis_server"] = _redis_version()
    report["store"] = f"private redis-servers on free loopback ports; {pinned}"
    out = console()
    info = report["machine"]
    render_header(out, report, f"redis-server {info['redis_server']}, redis-py {info['redis_py']}")
    if "promotion" in report:
        out.print(f"[bold]horizon[/]   {report['promotion']['why_short_horizon']}")
    for table in tables(report):
        out.print(table)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2) + "\n")
    out.print(f"[bold]json[/]      {out_path}")
    early = sum(s["early"] for s in report.get("promotion", {}).get("summary", []))
    if early:
        out.print(f"[red bold]FAILED: {early} deliveries before their due time (guarantee 1)[/]")
        return 2
    return 0


def _redis_version() -> str:
    done = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
    return done.stdout.split(" v=")[-1].split()[0] if " v=" in done.stdout else done.stdout


if __name__ == "__main__":
    sys.exit(main())
