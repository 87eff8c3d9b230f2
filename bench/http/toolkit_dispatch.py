"""The web layer's own cost per request, in process: each toolkit's app
(the own dispatch, and the Starlette prototypes of
bench/http/starlette_app.py) driven straight through ASGI, with
the store out of the way: every route's handler answers a canned reply of
its real shape at once. What is left is the dispatch: the Host/Origin
check, routing, the request object, the checks, the body read and decoded,
the answer built and sent, the metric. No HTTP, no uvicorn.

    .venv/bin/python bench/http/toolkit_dispatch.py [--requests 20000] [--rounds 7]
                                                    [--profile own|starlette|starlette-router]

Each round runs every toolkit on each route (the order rotating from round
to round); a figure is µs per request, median and minimum over rounds.
``--profile``: cProfile of one toolkit's puts instead, the functions by
their own time. See docs/benchmarks.md, "Web toolkit (issue 26)".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))  # starlette_app

import argparse
import cProfile
import dataclasses
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import uvloop
from common import command, console
from rich.table import Table
from starlette_app import starlette_app

from chronoq.server import create_app
from chronoq.server.web.routing import Call, Reply, Router

TOOLKITS = ("own", "starlette", "starlette-router")
JOB = {
    "topic": "t", "id": "01M8GZQDAXCDR2W2YP2J5WYX69", "payload": {"order": 42, "kind": "close"},
    "attempts": 1, "lease": "1768901f2fc43b930000", "deadline": 1795866503835,
    "due_at": 1795866473823, "priority": 0, "max_attempts": 5, "ttr": 300.0,
    "created_at": 1795866473823,
}  # fmt: skip
# path, body, the canned answer of its handler
REQUESTS: dict[str, tuple[str, bytes, Reply]] = {
    "put": (
        "/v1/topics/bench.t/jobs",
        b'{"payload": {"order": 42, "kind": "close"}, "delay": 60}',
        Reply(201, {"id": JOB["id"], "created": True, "due_at": JOB["due_at"]}),
    ),
    "reserve": (
        "/v1/topics/bench.t/reserve",
        b'{"count": 1, "ttr": 300}',
        Reply(200, {"jobs": [JOB]}),
    ),
    "ack": (
        f"/v1/topics/bench.t/jobs/{JOB['id']}/ack",
        b'{"lease":"1768901f2fc43b930000"}',
        Reply(200, {}),
    ),
}


def canned(path: str) -> Callable[[Call], Any]:
    reply = next((r for p, _, r in REQUESTS.values() if _fits(path, p)), Reply(200, {}))

    async def handler(call: Call) -> Reply:
        return reply

    return handler


def _fits(template: str, path: str) -> bool:
    want, got = template.split("/"), path.split("/")
    return len(want) == len(got) and all(
        w == g or w.startswith("{") for w, g in zip(want, got, strict=True)
    )


def apps(store: str) -> dict[str, Any]:
    """Each toolkit's app over its own app whose handlers answer at once."""
    out: dict[str, Any] = {}
    for toolkit in TOOLKITS:
        own = create_app(store)
        router = Router()
        for route in own.router.routes:
            router.add(dataclasses.replace(route, handler=canned(route.path)))
        own.router = router
        out[toolkit] = own if toolkit == "own" else starlette_app(own, lean="router" in toolkit)
    return out


def scope_of(path: str, body: bytes) -> dict[str, Any]:
    """A request's scope as uvicorn's httptools protocol makes it."""
    headers = [
        (b"host", b"127.0.0.1:7070"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
        "server": ("127.0.0.1", 7070), "client": ("127.0.0.1", 50000), "scheme": "http",
        "method": "POST", "root_path": "", "path": path, "raw_path": path.encode(),
        "query_string": b"", "headers": headers, "state": {},
    }  # fmt: skip


async def drive(app: Any, path: str, body: bytes, n: int) -> float:
    """CPU µs per request of ``n`` requests, each with a fresh scope (as
    uvicorn's): the thread's CPU time, not the wall clock, so that time
    spent waiting for a CPU the machine's other work holds is not counted."""
    template = scope_of(path, body)
    message = {"type": "http.request", "body": body, "more_body": False}
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return message

    async def send(sent: dict[str, Any]) -> None:
        if sent["type"] == "http.response.start":
            statuses.append(sent["status"])

    started = time.thread_time()
    for _ in range(n):
        await app(dict(template), receive, send)
    took = time.thread_time() - started
    if set(statuses) - {200, 201}:
        raise RuntimeError(f"{path}: answered {sorted(set(statuses))}, not 200/201")
    return took / n * 1e6


async def measure(store: str, requests: int, rounds: int) -> dict[tuple[str, str], list[float]]:
    built = apps(store)
    figures: dict[tuple[str, str], list[float]] = {}
    for round_ in range(rounds):
        order = TOOLKITS[round_ % 3 :] + TOOLKITS[: round_ % 3]
        for name, (path, body, _) in REQUESTS.items():
            for toolkit in order:
                got = await drive(built[toolkit], path, body, requests)
                figures.setdefault((name, toolkit), []).append(got)
    return figures


def table(figures: dict[tuple[str, str], list[float]]) -> Table:
    out = Table(title="dispatch alone, CPU µs per request (median / min over rounds)")
    for column in ("route", "toolkit", "median", "min", "median − own", "÷ own"):
        out.add_column(column, justify="right")
    for name in REQUESTS:
        own = statistics.median(figures[name, "own"])
        for toolkit in TOOLKITS:
            runs = figures[name, toolkit]
            mid = statistics.median(runs)
            out.add_row(
                name, toolkit, f"{mid:.1f}", f"{min(runs):.1f}", f"{mid - own:+.1f}",
                f"{mid / own:.2f}",
            )  # fmt: skip
    return out


def profile(store: str, toolkit: str, requests: int) -> None:
    app = apps(store)[toolkit]
    path, body, _ = REQUESTS["put"]
    run = uvloop.run
    run(drive(app, path, body, 2000))  # warm
    profiler = cProfile.Profile()
    profiler.enable()
    run(drive(app, path, body, requests))
    profiler.disable()
    stats = pstats.Stats(profiler).sort_stats("tottime")
    print(f"cProfile of {requests} puts through {toolkit} (µs per put = tottime / {requests})")
    stats.print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="per toolkit, route, round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", choices=TOOLKITS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{folder}/dispatch.db"
        if args.profile:
            profile(store, args.profile, args.requests)
            return
        out = console()
        out.print(f"command   {command()}")
        out.print(table(uvloop.run(measure(store, args.requests, args.rounds))))


if __name__ == "__main__":
    main()
