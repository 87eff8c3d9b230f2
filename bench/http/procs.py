"""The processes of the HTTP benchmark: the server under test (``chronoq
serve``, or the bare ASGI hello-world of bench/stacks/apps.py) as one uvicorn
process pinned to its own CPU, and the CPU time a process has spent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

STACKS = Path(__file__).resolve().parents[1] / "stacks"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Placement:
    """Which CPU runs what: the server alone on one, everything else
    (wrk, this process and its asyncio clients, redis-server) on the other."""

    server: int | None
    client: int | None
    text: str

    @classmethod
    def choose(cls) -> Placement:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) < 2:
            return cls(None, None, "not pinned (fewer than 2 CPUs)")
        return cls(
            cpus[1],
            cpus[0],
            f"server alone on CPU {cpus[1]}; wrk, the asyncio clients and redis-server "
            f"on CPU {cpus[0]}",
        )

    def pin(self, cpu: int | None) -> list[str]:
        return [] if cpu is None else ["taskset", "-c", str(cpu)]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Server:
    """One server process on ``port``, started by ``command`` pinned to
    ``cpu``, ready once GET ``ready`` answers 200; stopped on exit."""

    def __init__(
        self,
        command: list[str],
        port: int,
        ready: str,
        log: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = log
        with log.open("ab") as out:
            # taskset execs the server: this pid is the server's
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.base + ready, timeout=2).read()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    tail = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{command} did not start:\n{tail}") from None
                time.sleep(0.1)

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def hello_server(place: Placement, port: int, log: Path) -> Server:
    """The baseline: bench/stacks/baseline.py's bare ASGI app on the same uvicorn
    settings as ``chronoq serve`` (uvloop, httptools, no access log, no
    server header)."""
    command = [
        *place.pin(place.server),
        sys.executable,
        "-m",
        "uvicorn",
        "baseline:raw",
        "--app-dir",
        str(STACKS),
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
        "--no-server-header",
    ]
    return Server(command, port, "/hello", log)


def chronoq_server(
    place: Placement, store: str, port: int, log: Path, source: Path | None = None
) -> Server:
    """``chronoq serve --store URL --port P``: one uvicorn process (uvloop,
    httptools, access log off); ``source``: the ``src`` folder of another
    checkout to run instead of the installed chronoq."""
    command = [*place.pin(place.server), sys.executable, "-m", "chronoq.cli.main", "serve"]
    command += ["--store", store, "--port", str(port)]
    env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
    return Server(command, port, "/healthz", log, env)
