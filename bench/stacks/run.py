"""Which HTTP stack ``chronoq serve`` is built on, chosen by measurement.

Each candidate app (apps.py) runs in one uvicorn process (uvloop, httptools,
no access log) pinned to CPU 1; ``wrk`` (Debian's) drives it from CPU 0 with
one thread and 32 connections. Every round measures every candidate on both
routes, in turn, so that the machine's drift falls on all of them alike; the
figure is the median over rounds, and each is also given as a share of the
bare ASGI app's rate in the same round.

    .venv/bin/python bench/stacks/run.py [--rounds 3] [--seconds 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
CANDIDATES = ("raw", "starlette_msgspec", "starlette_pydantic", "fastapi_pydantic")
LABELS = {
    "raw": "bare ASGI (json)",
    "starlette_msgspec": "Starlette + msgspec",
    "starlette_pydantic": "Starlette + pydantic",
    "fastapi_pydantic": "FastAPI + pydantic",
}
BODY = json.dumps({"payload": {"order": 42, "kind": "close"}, "delay": 60, "id": "order-42"})
POST_SCRIPT = f"""wrk.method = "POST"
wrk.body = {json.dumps(BODY)}
wrk.headers["Content-Type"] = "application/json"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if shutil.which("taskset") and os.cpu_count() else []


def serve(app: str, port: int) -> subprocess.Popen[bytes]:
    command = [
        *pinned(1),
        sys.executable,
        "-m",
        "uvicorn",
        f"apps:{app}",
        "--app-dir",
        str(HERE),
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    proc = subprocess.Popen(command)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/hello", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{app} did not start")


def wrk(url: str, seconds: int, script: Path | None) -> float:
    command = [*pinned(0), "wrk", "-t1", "-c32", f"-d{seconds}s", "--latency"]
    if script is not None:
        command += ["-s", str(script)]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"errors from {url}:\n{out}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert match, out
    return float(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is missing: apt-get install wrk", file=sys.stderr)
        return 2
    rates: dict[tuple[str, str], list[float]] = {}
    shares: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "post.lua"
        script.write_text(POST_SCRIPT)
        for _ in range(args.rounds):
            base: dict[str, float] = {}
            for app in CANDIDATES:
                port = free_port()
                proc = serve(app, port)
                try:
                    for route, path, body in (
                        ("hello", "/hello", None),
                        ("put", "/v1/topics/orders/jobs", script),
                    ):
                        rate = wrk(f"http://127.0.0.1:{port}{path}", args.seconds, body)
                        rates.setdefault((app, route), []).append(rate)
                        if app == "raw":
                            base[route] = rate
                        shares.setdefault((app, route), []).append(rate / base["hello"])
                finally:
                    proc.terminate()
                    proc.wait(10)
    table = Table(title="HTTP stacks: requests/s (median of rounds), and share of bare ASGI hello")
    for column in ("stack", "GET /hello", "share", "POST put", "share"):
        table.add_column(column, justify="left" if column == "stack" else "right")
    report = {}
    for app in CANDIDATES:
        cells = [LABELS[app]]
        for route in ("hello", "put"):
            rate = statistics.median(rates[app, route])
            share = statistics.median(shares[app, route])
            cells += [f"{rate:,.0f}", f"{share:.2f}"]
            report[f"{app}.{route}"] = {"runs": rates[app, route], "share_of_raw_hello": share}
        table.add_row(*cells)
    Console().print(table)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
