"""chronoq serve against ouqiang/delay-queue's Go server on ouqiang's own
protocol, in one sitting, with the same clients.

Rows: ouqiang's ``/push`` (its server on a private redis-server of its own);
``chronoq serve`` on Redis and on SQLite, each with ``/push`` (the ouqiang
protocol), the native put ``POST /v1/topics/{t}/jobs`` and the Youzan
``POST /v1/command`` add; and the bare ASGI hello-world's ``GET /hello``.
Every push is the same job, due in 3,600 s (bench/http/versus_wire.py).

Columns: Python's ``http.client`` with keep-alive (bench/http/versus_client.py),
``--count`` pushes (5,000) over one connection, then ``--count`` pushes over
16 connections (``--processes`` client processes, 4, sharing them: a thread
and its own connection each); and wrk -t1 -c16 for ``--seconds`` with a Lua
script posting the same push, a new id each. Each row is measured on a fresh
server and store after 300 unmeasured pushes. The server runs alone on CPU 1
(ouqiang too: GOMAXPROCS follows the affinity, so 1); the clients, wrk and
both redis-servers on CPU 0 (bench/http/procs.py's Placement). http.client
costs about as much CPU per request as a put costs the server, so on two
cores its 16 connections can be paced by the client rather than the server:
the last table gives both sides' CPU; wrk's column is the server-bound one.

    OUQIANG_BIN=/path/to/delay-queue .venv/bin/python bench/http/run.py --versus
        [--rounds 3] [--count 5000] [--seconds 5] [--stores redis,sqlite] [--processes 4]
        [--quick] [--out FILE]

ouqiang is not part of this repository: build delay-queue v0.4 (Go) from its
public source outside it and set OUQIANG_BIN to the binary; without it the
bench prints how it is found and skips that row. It runs with an ini file of
its own format written here: bind 127.0.0.1 on a free port, its private
redis-server (db 0), redis.max_idle 32 (its default of 10 would close and
reopen Redis connections under 16 clients), the rest its defaults (3
buckets; every push logged to stderr, which goes to a file).

Three rounds by default, the order of the servers (and of the routes on each
chronoq) reversed every other round; a figure is the median over rounds, a
ratio the median of each round's ratio. Redis servers are private, on free
loopback ports (never 6379), without persistence, stopped at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ after the installed packages: bench/redis.py must not hide redis-py
sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import redis
from common import RUN, command, command_and_machine, console, machine
from procs import Placement, Server, chronoq_server, hello_server
from scripts import wrk as run_wrk
from scripts import wrk_version
from servers import free_port, private_server
from versus_client import warm
from versus_tables import cpu_table, rate_table, summarize, target_table
from versus_wire import KINDS, Kind, split_counts, wrk_script

CLIENT = Path(__file__).resolve().parent / "versus_client.py"
STORES = ("redis", "sqlite")
SKIP = (
    "OUQIANG_BIN is not set: the ouqiang row is skipped. It needs ouqiang/delay-queue v0.4, "
    "a Go program, built outside this repository from its public source (Go 1.19+, GOPATH "
    "mode with its vendor/ folder); then run again with OUQIANG_BIN=/path/to/delay-queue."
)


@dataclass(frozen=True)
class Settings:
    rounds: int = 3
    count: int = 5000  # pushes per client column
    seconds: int = 5  # per wrk run
    stores: tuple[str, ...] = STORES
    connections: int = 16
    processes: int = 4  # client processes sharing the connections
    wrk_connections: int = 16
    warmup: int = 300  # unmeasured pushes on each fresh server
    ouqiang: str | None = None  # the delay-queue binary


def ouqiang_config(path: Path, port: int, redis_port: int) -> Path:
    """ouqiang's ini file (config/config.go reads these keys, the rest default)."""
    path.write_text(
        f"bind_address = 127.0.0.1:{port}\n"
        f"redis.host = 127.0.0.1:{redis_port}\n"
        "redis.db = 0\n"
        "redis.password =\n"
        "redis.max_idle = 32\n"
    )
    return path


def children_cpu() -> float:
    """utime + stime of the child processes this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ouqiang_version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or out.stderr.strip()


class Versus:
    def __init__(self, settings: Settings, tmp: Path, stack: ExitStack) -> None:
        self.s = settings
        self.tmp = tmp
        self.place = Placement.choose()
        self.log = tmp / "servers.log"
        self.redis: dict[str, tuple[str, redis.Redis]] = {}  # "chronoq" / "ouqiang"
        for owner in ("chronoq" if "redis" in settings.stores else None, "ouqiang"):
            if owner is None or (owner == "ouqiang" and settings.ouqiang is None):
                continue
            (tmp / owner).mkdir(exist_ok=True)
            url = stack.enter_context(private_server(tmp / owner, self.place.client))
            client = redis.Redis.from_url(url)
            stack.callback(client.close)
            self.redis[owner] = (url, client)

    def servers(self) -> list[str]:
        return ["hello", *(["ouqiang"] if self.s.ouqiang else []), *self.s.stores]

    def start(self, server: str, name: str) -> Server:
        """A fresh server on an empty store."""
        if server == "hello":
            return hello_server(self.place, free_port(), self.log)
        if server == "ouqiang":
            assert self.s.ouqiang is not None
            url, client = self.redis["ouqiang"]
            client.flushall()
            port = free_port()
            redis_port = urlsplit(url).port
            assert redis_port is not None
            conf = ouqiang_config(self.tmp / "ouqiang.conf", port, redis_port)
            command = [*self.place.pin(self.place.server), self.s.ouqiang, "-c", str(conf)]
            # no GET route to ask: /get answers a bodyless request 200 (code 1)
            return Server(command, port, "/get", self.log)
        if server == "sqlite":
            store = f"sqlite:///{self.tmp / name}.db"
        else:
            store, client = self.redis["chronoq"]
            client.flushall()
        return chronoq_server(self.place, store, free_port(), self.log)

    def drop(self, server: str, name: str) -> None:
        if server == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                (self.tmp / f"{name}.db{suffix}").unlink(missing_ok=True)
        for _, client in self.redis.values():
            client.flushall()
        os.sync()

    def clients(
        self, server: Server, kind: Kind, topic: str, prefix: str, conns: int, procs: int
    ) -> dict[str, Any]:
        """``count`` pushes over ``conns`` connections from ``procs`` processes."""
        counts = split_counts(self.s.count, conns)
        groups = [
            [[f"{prefix}p{p}t{i}-", counts[i]] for i in range(p, conns, procs)]
            for p in range(min(procs, conns))
        ]
        spec = {"port": server.port, "kind": kind.name, "topic": topic}
        pin = self.place.pin(self.place.client)
        started: list[subprocess.Popen[str]] = []
        try:
            for threads in groups:
                command = [
                    *pin,
                    sys.executable,
                    str(CLIENT),
                    json.dumps({**spec, "threads": threads}),
                ]
                started.append(
                    subprocess.Popen(
                        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
                    )
                )
            for process in started:
                assert process.stdout is not None
                if process.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"a client of {server.base} did not start")
            cpu, clock = server.cpu_seconds(), time.monotonic()
            for process in started:
                assert process.stdin is not None
                process.stdin.write("go\n")
                process.stdin.flush()
            answers = [json.loads(process.communicate(timeout=600)[0]) for process in started]
        finally:
            for process in started:  # a client left waiting for its go, after a failure
                if process.poll() is None:
                    process.kill()
                    process.wait()
        cpu, clock = server.cpu_seconds() - cpu, time.monotonic() - clock
        requests = sum(a["requests"] for a in answers)
        refused = sum(a["refused"] for a in answers)
        errors = [e for a in answers for e in a["errors"]]
        if refused or errors or requests != self.s.count:
            first = next((a["first_refusal"] for a in answers if a["first_refusal"]), "")
            raise RuntimeError(f"{kind.label} on {server.base}: {refused} refused {first} {errors}")
        seconds = max(e for a in answers for e in a["ends"]) - min(
            s for a in answers for s in a["starts"]
        )
        return {
            "rate": requests / seconds,
            "requests": requests,
            "seconds": seconds,
            "server_cpu_percent": 100 * cpu / clock,
            "client_cpu_percent": 100 * sum(a["cpu_s"] for a in answers) / seconds,
        }

    def wrk(self, server: Server, kind: Kind, topic: str, prefix: str) -> dict[str, Any]:
        script = self.tmp / f"{kind.name}.lua"
        script.write_text(wrk_script(kind, topic, prefix))
        pin = self.place.pin(self.place.client)
        cpu, clock, used = server.cpu_seconds(), time.monotonic(), children_cpu()
        run = run_wrk(server.base + "/", self.s.seconds, self.s.wrk_connections, script, pin)
        cpu, clock, used = (
            server.cpu_seconds() - cpu,
            time.monotonic() - clock,
            children_cpu() - used,
        )
        return {
            "rate": run.rate,
            "server_cpu_percent": 100 * cpu / clock,
            "client_cpu_percent": 100 * used / clock,  # wrk's
            **run.as_json(),
        }

    def cell(self, server_name: str, kind: Kind, round_: int) -> dict[str, dict[str, Any]]:
        """The three columns of one row, on a fresh server and store."""
        name = f"vs-r{round_}-{server_name}-{kind.name}"
        topic = f"vs.{RUN}.r{round_}.{kind.name}"
        prefix = f"{RUN}-r{round_}-"
        with self.start(server_name, name) as server:
            warmed = warm(server.port, kind, topic, prefix + "warm-", self.s.warmup)
            if warmed.refused:
                raise RuntimeError(f"{kind.label} on {server_name}: {warmed.first_refusal}")
            out = {
                "c1": self.clients(server, kind, topic, prefix + "c1-", 1, 1),
                "c16": self.clients(
                    server, kind, topic, prefix + "c16-", self.s.connections, self.s.processes
                ),
                "wrk": self.wrk(server, kind, topic, prefix + "wrk-"),
            }
        self.drop(server_name, name)
        return out

    def round(self, round_: int) -> dict[str, dict[str, dict[str, Any]]]:
        flip = 1 if round_ % 2 == 0 else -1
        figures = {}
        for server in self.servers()[::flip]:
            if server == "hello":
                kinds = ["hello"]
            elif server == "ouqiang":
                kinds = ["push"]
            else:
                kinds = ["push", "native", "youzan"][::flip]
            for kind in kinds:
                figures[f"{server}:{kind}"] = self.cell(server, KINDS[kind], round_)
                print(f"round {round_ + 1}: {server}:{kind} measured", file=sys.stderr)
        return figures


def parse_args(argv: list[str] | None) -> tuple[Settings, Path | None]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=5000, help="pushes per client column")
    parser.add_argument("--seconds", type=int, default=5, help="per wrk run")
    parser.add_argument("--stores", default=",".join(STORES), help="redis,sqlite")
    parser.add_argument(
        "--processes", type=int, default=4, help="client processes for the 16 connections"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 round, 300 pushes")
    parser.add_argument("--out", type=Path, help="also write the raw figures as JSON here")
    args = parser.parse_args(argv)
    stores = tuple(s.strip() for s in args.stores.split(",") if s.strip())
    if not stores or set(stores) - set(STORES):
        parser.error(f"--stores: a comma-separated list of {', '.join(STORES)}")
    binary = os.environ.get("OUQIANG_BIN") or None
    if binary is not None and shutil.which(binary) is None:
        parser.error(f"OUQIANG_BIN={binary} is not an executable file")
    if args.quick:
        quick = Settings(1, 300, 1, stores, processes=args.processes, warmup=50, ouqiang=binary)
        return quick, args.out
    settings = Settings(
        args.rounds, args.count, args.seconds, stores, processes=args.processes, ouqiang=binary
    )
    return settings, args.out


def main(argv: list[str] | None = None) -> int:
    settings, out = parse_args(argv)
    if shutil.which("wrk") is None:
        print(
            "wrk is missing: `make bench-http` installs it (apt-get install wrk)", file=sys.stderr
        )
        return 2
    if settings.ouqiang is None:
        print(SKIP, file=sys.stderr)
    versions = {"wrk": wrk_version()}
    if settings.ouqiang is not None:
        versions["ouqiang"] = ouqiang_version(settings.ouqiang)
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(**versions),
        "settings": asdict(settings),
        "ouqiang_skipped": SKIP if settings.ouqiang is None else None,
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-versus-") as tmp, ExitStack() as stack:
        bench = Versus(settings, Path(tmp), stack)
        if bench.place.client is not None:
            os.sched_setaffinity(0, {bench.place.client})
        report["placement"] = bench.place.text
        if "chronoq" in bench.redis:
            report["machine"]["redis_server"] = bench.redis["chronoq"][1].info("server")[
                "redis_version"
            ]
        raw = [bench.round(n) for n in range(settings.rounds)]
    report["raw"] = raw
    summarize(report, raw)
    report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    render(report)
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def render(report: dict[str, Any]) -> None:
    out = console()
    info = report["machine"]
    command_and_machine(out, report)
    ouqiang = f"ouqiang {info['ouqiang']}" if info.get("ouqiang") else "ouqiang skipped"
    out.print(
        f"[bold]versions[/]  Python {info['python']}, wrk {info['wrk']}, redis-server "
        f"{info.get('redis_server', '-')}, {ouqiang}, chronoq at {info['source']}"
    )
    out.print(f"[bold]placement[/] {report['placement']}; took {report['seconds']:.0f} s")
    if report["ouqiang_skipped"]:
        out.print(report["ouqiang_skipped"])
    out.print(rate_table(report))
    out.print(target_table(report))
    out.print(cpu_table(report))


if __name__ == "__main__":
    sys.exit(main())
