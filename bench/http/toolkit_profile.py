"""Where a request's server CPU goes, per web toolkit: py-spy samples the
server (bench/http/toolkit_server.py) while wrk drives the put or the
reserve + ack pairs of bench/http/toolkit.py, and each sample goes to the
layer of its innermost frame that has one (walking out from the leaf):
the toolkit (Starlette, the prototype's glue, or the own dispatch), HTTP
(uvicorn and its protocol), the handlers, the store, metrics, the event
loop. A layer's µs per request = its share of the samples × the server's
CPU per request over the same window.

    .venv/bin/python bench/http/toolkit_profile.py --py-spy /tmp/pyspy/bin/py-spy
        [--toolkits own,starlette,starlette-router] [--backends sqlite,redis]
        [--figures put,pairs] [--seconds 6]

py-spy: ``python3 -m pip install --target /tmp/pyspy py-spy``; it samples
without pausing the server (--nonblocking), at 250 Hz. See
docs/benchmarks.md, "Web toolkit (issue 26)".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))

import argparse
import math
import os
import subprocess
import tempfile
import urllib.request
from collections import Counter

from common import RUN, command, console
from procs import Placement
from rich.table import Table
from run import prefill, run_async
from scripts import BATCH, pair_script
from servers import private_server
from toolkit import Bench, toolkit_server

# (layer, path fragments of its frames), tried in this order on each frame
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("starlette", ("starlette/",)),
    ("prototype glue", ("http/starlette_app.py",)),
    ("own dispatch", ("server/asgi.py", "server/routing.py", "server/problems.py")),
    ("metrics", ("prometheus_client/", "server/metrics.py")),
    ("handlers", ("server/v1.py", "server/grouped_puts.py", "server/batching.py",
                  "server/longpoll.py", "server/wire.py")),
    ("store", ("chronoq/backends/", "chronoq/aio/", "chronoq/job", "chronoq/names.py",
               "chronoq/calls.py", "redis/", "sqlite3")),
    ("HTTP (uvicorn)", ("uvicorn/", "server/connections.py", "httptools")),
    ("event loop", ("asyncio/", "uvloop", "concurrent/", "threading.py")),
)  # fmt: skip
ORDER = [name for name, _ in LAYERS] + ["other"]


def layer_of(frames: list[str]) -> str:
    for frame in reversed(frames):  # innermost first
        for name, parts in LAYERS:
            if any(part in frame for part in parts):
                return name
    return "other"


def sample(py_spy: str, pid: int, seconds: int, out: Path) -> Counter[str]:
    """Samples per layer over ``seconds`` of the process ``pid``."""
    subprocess.run(
        [py_spy, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", "250",
         "--nonblocking", "--format", "raw", "--output", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    layers: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            layers[layer_of(stack.split(";"))] += int(count)
    return layers


def profile_side(
    bench: Bench, py_spy: str, toolkit: str, backend: str, figure: str
) -> tuple[float, Counter[str]]:
    """(server CPU µs per request, samples per layer) of one server under wrk."""
    name = f"{backend}-{toolkit}-{figure}"
    topic = f"tkp.{RUN}.{name}"
    store = bench.store(backend, name)
    with toolkit_server(bench.place, toolkit, store, bench.tmp / "s.log") as server:
        if figure == "put":
            url, script = f"{server.base}/v1/topics/{topic}/jobs", bench.put_lua
        else:
            run_async(prefill(server.port, topic, max(BATCH, 10_000 * (bench.seconds + 4))))
            url, script = server.base + "/", bench.script("pairs", pair_script(topic))
        bench.wrk(url, script, 2)  # warm up
        pin = bench.place.pin(bench.place.client)
        load = subprocess.Popen(
            [*pin, "wrk", "-t1", "-c32", f"-d{bench.seconds + 2}s", "-s", str(script), url],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        before, requests_before = server.cpu_seconds(), _answered(server.base)
        layers = sample(py_spy, server.pid, bench.seconds, bench.tmp / "raw.txt")
        used, requests = server.cpu_seconds() - before, _answered(server.base) - requests_before
        load.communicate()
    bench.drop(backend, name)
    return used / max(requests, 1) * 1e6, layers


def _answered(base: str) -> int:
    """Requests the server has answered, from its own /metrics (all routes)."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("chronoq_http_request_duration_seconds_count{"):
            total += float(line.rpartition(" ")[2])
    return math.floor(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--py-spy", required=True, help="the py-spy binary")
    parser.add_argument("--toolkits", default="own,starlette,starlette-router")
    parser.add_argument("--backends", default="sqlite,redis")
    parser.add_argument("--figures", default="put,pairs")
    parser.add_argument("--seconds", type=int, default=6, help="sampled per side")
    args = parser.parse_args()
    out = console()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    out.print(f"command   {command()}\nuptime    {uptime}")
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-profile-") as folder:
        tmp = Path(folder)
        place = Placement.choose()
        if place.client is not None:
            os.sched_setaffinity(0, {place.client})
        with private_server(tmp, place.client) as redis_url:
            bench = Bench(tmp, redis_url, args.seconds)
            for backend in args.backends.split(","):
                for figure in args.figures.split(","):
                    table = Table(title=f"{backend}, {figure}: µs of server CPU per request")
                    for column in ("toolkit", "total", *ORDER):
                        table.add_column(column, justify="right")
                    for toolkit in args.toolkits.split(","):
                        cpu, layers = profile_side(bench, args.py_spy, toolkit, backend, figure)
                        total = sum(layers.values()) or 1
                        cells = [f"{cpu * layers[name] / total:.1f}" for name in ORDER]
                        table.add_row(toolkit, f"{cpu:.1f}", *cells)
                    out.print(table)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    out.print(f"uptime    {uptime}")


if __name__ == "__main__":
    main()
