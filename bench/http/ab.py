"""The server's CPU per request of two checkouts of chronoq, side by side:
``chronoq serve`` from each one's ``src`` in turn, on the same stores, the
same load and the same machine, so that a change's cost on the hot routes
shows as a ratio of one run (this machine's speed moves 10-35% from day to
day; throughput alone moved ±15% between rounds of one sitting here, the
CPU time per request less).

    .venv/bin/python bench/http/ab.py --a ../old/src --b src [--rounds 3] [--seconds 5]
                                      [--backends redis,sqlite]

Each round runs a then b (b then a in the next round), each on a fresh
server and store: 2 s of wrk to warm up, then ``--seconds`` measured; the
figure is the server's utime + stime over the requests wrk saw answered
(single puts, the put of bench/http/run.py, wrk -t1 -c32 from CPU 0, the
server alone on CPU 1). See docs/benchmarks.md, "What the hardening of
issue 24 costs".
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ after the installed packages: bench/redis.py must not hide redis-py
sys.path.append(str(Path(__file__).resolve().parents[1]))

import argparse
import statistics
import tempfile

from common import command, console
from procs import Placement, chronoq_server
from rich.table import Table
from scripts import put_script, wrk
from servers import free_port, private_server


def measure(
    place: Placement, tmp: Path, source: Path, store: str, seconds: int, script: Path
) -> tuple[float, float]:
    """(server CPU µs per request, requests/s) of one server on ``store``."""
    with chronoq_server(place, store, free_port(), tmp / "serve.log", source) as server:
        url = f"{server.base}/v1/topics/ab.put/jobs"
        wrk(url, 2, 32, script, place.pin(place.client))
        before = server.cpu_seconds()
        run = wrk(url, seconds, 32, script, place.pin(place.client))
        used = server.cpu_seconds() - before
    return used / run.requests * 1e6, run.rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="the src folder of checkout a")
    parser.add_argument("--b", type=Path, required=True, help="the src folder of checkout b")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--backends", default="redis,sqlite")
    args = parser.parse_args()
    out = console()
    place = Placement.choose()
    out.print(f"command   {command()}\nplacement {place.text}")
    backends = args.backends.split(",")
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        script = tmp / "put.lua"
        script.write_text(put_script())
        with private_server(tmp, place.client) as redis_url:
            for n in range(args.rounds):
                for side in ("a", "b") if n % 2 == 0 else ("b", "a"):
                    source = (args.a if side == "a" else args.b).resolve()
                    for backend in backends:
                        store = f"{redis_url}?prefix=ab{n}{side}"
                        if backend == "sqlite":
                            store = f"sqlite:///{tmp / f'ab{n}{side}.db'}"
                        got = measure(place, tmp, source, store, args.seconds, script)
                        figures.setdefault((backend, side), []).append(got)
                        out.print(f"round {n + 1} {side} {backend}: {got[0]:.1f} µs/request")
    out.print(_table(backends, figures))


def _table(backends: list[str], figures: dict[tuple[str, str], list[tuple[float, float]]]) -> Table:
    table = Table(title="single put: server CPU per request (µs), median of rounds")
    for column in ("store", "a", "b", "b / a", "a rounds", "b rounds", "req/s a", "req/s b"):
        table.add_column(column, justify="right")
    for backend in backends:
        a = [cpu for cpu, _ in figures[backend, "a"]]
        b = [cpu for cpu, _ in figures[backend, "b"]]
        rate_a = statistics.median(rate for _, rate in figures[backend, "a"])
        rate_b = statistics.median(rate for _, rate in figures[backend, "b"])
        table.add_row(
            backend,
            f"{statistics.median(a):.1f}",
            f"{statistics.median(b):.1f}",
            f"{statistics.median(b) / statistics.median(a):.2f}",
            " / ".join(f"{x:.1f}" for x in a),
            " / ".join(f"{x:.1f}" for x in b),
            f"{rate_a:,.0f}",
            f"{rate_b:,.0f}",
        )
    return table


if __name__ == "__main__":
    main()
