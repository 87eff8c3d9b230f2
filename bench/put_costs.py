"""Where the time of one single put goes, on a private redis-server: the
table of docs/benchmarks.md, "Where a single put's time goes".

    .venv/bin/python bench/put_costs.py [--rounds 5] [--n 4000] [--baseline REV]
                                        [--instructions] [--out FILE]

Per source tree (this checkout's ``src``; with ``--baseline`` also a git
worktree of REV in a temporary directory), in child processes that take
turns round by round, each on the same private redis-server (loopback, a free
port, no persistence):

- ``q.put(topic, payload, delay=3600)`` one call at a time: wall µs per call
  and the client's CPU µs per call (``time.thread_time``: its Python and its
  two system calls);
- the same put's command packed beforehand and sent on a plain socket, one at
  a time (``raw``: the round trip and the server's work, no client Python),
  and ``PING`` the same way (the round trip alone);
- the server's µs per call of the function, and of each command it runs
  (``INFO commandstats`` over the put loop).

With ``--instructions``, the user-space instructions of one put counted by
valgrind's callgrind (``N`` puts less none): the client's (Python and the
libraries it calls) and the server's (a redis-server under callgrind). These
do not move with the machine's load, unlike every time above.

huey's enqueue (``TaskWrapper.schedule``, as bench/peers runs it) is timed in
the same rounds when ``bench/.venvs/huey`` exists (``make bench-peers`` makes it).
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
import re
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from common import command, console, machine
from rich.table import Table
from servers import free_port, private_server

ROOT = Path(__file__).resolve().parents[1]
HUEY = ROOT / "bench" / ".venvs" / "huey" / "bin" / "python"
PAYLOAD = {"order": 42, "kind": "close"}

# Run in a child with the tree's src first on sys.path: argv = src, url, n.
CHILD = r"""
import json, socket, sys, time
sys.path.insert(0, sys.argv[1])
import redis, chronoq
from chronoq.calls.checks import put_args
from chronoq.job import Job
from chronoq.backends.redis.codec import pack_new_job

url, n = sys.argv[2], int(sys.argv[3])
q = chronoq.connect(url)
p = {"order": 42, "kind": "close"}
for _ in range(200):
    q.put("costs", p, delay=3600)
admin = redis.Redis.from_url(url)
admin.config_resetstat()
t0, c0 = time.perf_counter(), time.thread_time()
for _ in range(n):
    q.put("costs", p, delay=3600)
wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
stats = admin.info("commandstats")

# the same command, packed beforehand: one put's bytes as the client sends them
core = q.backend._core
keys = core.keys("costs", 0)
function = core.scripts.functions["put"]
conn = redis.Connection()
def packed():
    [job] = put_args("costs", [Job(p, 3600)], 1 << 20, False)
    args = ("FCALL", function, len(keys), *keys, core.events_max, "0", pack_new_job(job))
    return b"".join(conn.pack_command(*args))
host, port = url.split("//")[1].split("/")[0].split(":")
sock = socket.create_connection((host, int(port)))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def timed(commands):
    t0 = time.perf_counter()
    for command in commands:
        sock.sendall(command)
        sock.recv(4096)  # one small reply: one read
    return (time.perf_counter() - t0) / len(commands) * 1e6
raw = timed([packed() for _ in range(n)])
ping = timed([b"*1\r\n$4\r\nPING\r\n"] * n)
inner = {k[8:]: v["usec_per_call"] for k, v in stats.items() if v["calls"] >= n}
print(json.dumps({"wall": wall / n * 1e6, "cpu": cpu / n * 1e6, "raw": raw, "ping": ping,
                  "server": inner.pop("fcall"), "inner": inner}))
"""

HUEY_CHILD = r"""
import json, sys, time
from datetime import UTC, datetime
from huey import RedisHuey
huey = RedisHuey("costs", url=sys.argv[1])
@huey.task()
def run(job_id, due): pass
n = int(sys.argv[2])
for i in range(200):
    run.schedule(args=(str(i), 0.0), eta=datetime.fromtimestamp(time.time() + 3600, UTC))
t0, c0 = time.perf_counter(), time.thread_time()
for i in range(n):
    due = time.time() + 3600
    run.schedule(args=(str(i), due), eta=datetime.fromtimestamp(due, UTC))
wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
print(json.dumps({"wall": wall / n * 1e6, "cpu": cpu / n * 1e6}))
"""

INSTRUCTIONS_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import chronoq
q = chronoq.connect(sys.argv[2])
p = {"order": 42, "kind": "close"}
for _ in range(50):
    q.put("costs", p, delay=3600)
for _ in range(int(sys.argv[3])):
    q.put("costs", p, delay=3600)
"""


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A checkout of ``rev`` in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="chronoq-base-") as tmp:
        path = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev],
            check=True,
        )
        try:
            yield path
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False
            )


def child(code: str, *args: str, python: str = sys.executable) -> dict[str, Any]:
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def collected(stderr: str) -> int:
    return int(re.search(r"Collected : (\d+)", stderr).group(1))  # type: ignore[union-attr]


def client_instructions(src: Path, url: str, n: int) -> float:
    def run(count: int) -> int:
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
        done = subprocess.run([*argv, "-c", INSTRUCTIONS_CHILD, str(src), url, str(count)],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return collected(done.stderr)

    return (run(n) - run(0)) / n


def server_instructions(src: Path, n: int) -> float:
    def run(count: int) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            server = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "redis-server",
                 "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", tmp],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        server.kill()
                        raise RuntimeError("redis-server under valgrind did not start") from None
                    time.sleep(0.1)
            url = f"redis://127.0.0.1:{port}/0"
            subprocess.run(
                [sys.executable, "-c", INSTRUCTIONS_CHILD, str(src), url, str(count)], check=True
            )
            subprocess.run(
                ["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True
            )
            return collected(server.communicate(timeout=120)[1])

    return (run(n) - run(0)) / n


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "inner"
    }
    if "inner" in runs[0]:
        out["inner"] = {
            k: statistics.median(r["inner"].get(k, 0.0) for r in runs) for k in runs[0]["inner"]
        }
    out["runs"] = runs
    return out


def table(results: dict[str, dict[str, Any]], huey: dict[str, Any] | None) -> Table:
    t = Table(title="One single put, µs per call (medians over rounds)")
    t.add_column("")
    for name in results:
        t.add_column(name, justify="right")
    rows = [
        ("put, wall", lambda r: r["wall"]),
        ("  puts/s", lambda r: 1e6 / r["wall"]),
        ("client CPU (Python and its two system calls)", lambda r: r["cpu"]),
        ("raw round trip of the same command (no client Python)", lambda r: r["raw"]),
        ("  of which the server's function", lambda r: r["server"]),
        ("  of which the transport (PING round trip)", lambda r: r["ping"]),
        ("client's share: put - raw", lambda r: r["wall"] - r["raw"]),
    ]
    if "client_instructions" in next(iter(results.values())):
        rows += [
            ("client instructions per put", lambda r: r["client_instructions"]),
            ("server instructions per put", lambda r: r["server_instructions"]),
        ]
    if huey is not None:
        rows.append(("ratio to huey's enqueue (wall)", lambda r: huey["wall"] / r["wall"]))
    for label, get in rows:
        cells = []
        for r in results.values():
            value = get(r)
            cells.append(f"{value:,.2f}" if value < 10 else f"{value:,.0f}")
        t.add_row(label, *cells)
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=4000, help="puts per round")
    parser.add_argument("--baseline", help="a git revision to measure beside this checkout")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (valgrind)"
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)
    say = console()
    with ExitStack() as stack:
        trees = {"this checkout": ROOT / "src"}
        if args.baseline:
            trees = {args.baseline: stack.enter_context(worktree(args.baseline)) / "src", **trees}
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = stack.enter_context(private_server(workdir, None))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        huey_runs: list[dict[str, Any]] = []
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
            for name in order:
                runs[name].append(child(CHILD, str(trees[name]), url, str(args.n)))
            if HUEY.exists():
                huey_runs.append(child(HUEY_CHILD, url, str(args.n), python=str(HUEY)))
            say.print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
                f"{name} {runs[name][-1]['wall']:.0f} µs" for name in trees
            ) + (f", huey {huey_runs[-1]['wall']:.0f} µs" if huey_runs else ""))  # fmt: skip
        results = {name: median_of(r) for name, r in runs.items()}
        if args.instructions:
            for name, src in trees.items():
                say.print(f"counting instructions: {name}")
                results[name]["client_instructions"] = client_instructions(src, url, 1000)
                results[name]["server_instructions"] = server_instructions(src, 2000)
    huey = median_of(huey_runs) if huey_runs else None
    say.print(table(results, huey))
    if huey is not None:
        say.print(f"huey enqueue: {huey['wall']:.0f} µs wall, {huey['cpu']:.0f} µs client CPU")
    for name, r in results.items():
        inner = ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(r["inner"].items(), key=lambda kv: -kv[1])
        )
        say.print(f"{name}: the function's commands, µs per call: {inner}")
    if args.out:
        report = {"command": command(), "machine": machine(), "results": results, "huey": huey}
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
