"""Instructions per operation of the facades on a SQLite file,
counted by valgrind's callgrind: repeatable whatever else the machine does,
so two versions of the code compare on a busy machine. Each figure is the
count of a run of N operations minus that of a run of none (start-up and
imports cancel out), divided by N.

    python bench/facade_instructions.py [--src DIR ...] [--ops 1000] [--setup CODE]
                                        [--workload NAME ...]

With several ``--src`` (a checkout's ``src``), each is measured in turn and
compared with the first. ``--setup``: Python run first in each process
(``"import opentelemetry.trace"``: the application imported the tracing
API). Hash randomization is off (PYTHONHASHSEED=0): with it, two runs of
one version differed by up to 0.6%, without it by 0.03%. Needs valgrind
(Debian's package)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "put": "for i in range(n): q.put('t', i)",
    "put+reserve+ack": (
        "for i in range(n): q.put('t', i)\n"
        "for i in range(n):\n    (job,) = q.reserve('t'); q.ack(job)"
    ),
    "stats": "for i in range(n): q.stats('t')",
    # flow control (docs/contract.md §10): 10 groups taking turns; a topic
    # rate limit that never holds a job back (what its checks cost)
    "grouped put+reserve+ack": (
        "for i in range(n): q.put('t', i, group=f'g{i % 10}')\n"
        "for i in range(n):\n    (job,) = q.reserve('t'); q.ack(job)"
    ),
    # the harness's drain (bench/common.py): reserve(count=10) + ack_many
    "drain": (
        "q.put_many('t', [chronoq.Job(i) for i in range(n)])\n"
        "while jobs := q.reserve('t', 10): q.ack_many(jobs)"
    ),
    "rate-limited drain": (
        "q.set_limits('t', rate=1_000_000)\n"
        "q.put_many('t', [chronoq.Job(i) for i in range(n)])\n"
        "while jobs := q.reserve('t', 10): q.ack_many(jobs)"
    ),
    "grouped drain": (
        "q.put_many('t', [chronoq.Job(i, group=f'g{i % 10}') for i in range(n)])\n"
        "while jobs := q.reserve('t', 10): q.ack_many(jobs)"
    ),
    "rate-limited put+reserve+ack": (
        "q.set_limits('t', rate=1_000_000)\n"
        "for i in range(n): q.put('t', i)\n"
        "for i in range(n):\n    (job,) = q.reserve('t'); q.ack(job)"
    ),
    # AsyncQueue: the same store through its threaded asyncio backend
    "async put": "for i in range(n): await q.put('t', i)",
    "async put+reserve+ack": (
        "for i in range(n): await q.put('t', i)\n"
        "for i in range(n):\n    (job,) = await q.reserve('t'); await q.ack(job)"
    ),
}


def _program(workload: str, store: str, n: int, setup: str) -> str:
    body = WORKLOADS[workload]
    if not workload.startswith("async "):
        return f"{setup}\nimport chronoq\nq = chronoq.connect({store!r})\nn = {n}\n{body}\n"
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return (
        f"{setup}\nimport asyncio, chronoq.aio\n"
        f"async def main():\n    q = chronoq.aio.connect({store!r})\n    n = {n}\n"
        f"{indented}    await q.close()\n"
        "asyncio.run(main())\n"
    )


def instructions(src: str, workload: str, n: int, setup: str = "") -> int:
    with tempfile.TemporaryDirectory() as tmp:
        code = _program(workload, f"sqlite:///{tmp}/bench.db", n, setup)
        env = {
            **os.environ,
            "PYTHONPATH": src,
            "PYTHONDONTWRITEBYTECODE": "",
            "PYTHONHASHSEED": "0",
        }
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg", sys.executable,
             "-c", code],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        found = re.search(r"Collected : (\d+)", out.stderr)
        assert found, out.stderr[-2000:]
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", action="append", help="a checkout's src (default: this one)")
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--setup", default="", help="Python run first in each process")
    parser.add_argument(
        "--workload", action="append", choices=sorted(WORKLOADS), help="default: every one"
    )
    args = parser.parse_args()
    sources = args.src or [str(ROOT / "src")]
    print(f"command: python bench/facade_instructions.py {' '.join(sys.argv[1:])}")
    print("| workload | " + " | ".join(sources) + " | ratio to the first |")
    print("| --- |" + " ---: |" * (len(sources) + 1))
    for workload in args.workload or WORKLOADS:
        for src in sources:  # compiled once, so that no run pays for it
            instructions(src, workload, 0, args.setup)
        per_op = [
            (
                instructions(src, workload, args.ops, args.setup)
                - instructions(src, workload, 0, args.setup)
            )
            / args.ops
            for src in sources
        ]
        ratios = " / ".join(f"{value / per_op[0]:.3f}" for value in per_op[1:]) or "1"
        print(f"| {workload} | " + " | ".join(f"{v:,.0f}" for v in per_op) + f" | {ratios} |")


if __name__ == "__main__":
    main()
