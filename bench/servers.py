"""A private redis-server for the benchmarks: loopback, a free port (never
6379), no persistence unless asked, optionally pinned to one CPU."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

__all__ = ["free_port", "placement", "private_server", "spawn_server", "stop_server"]


def free_port() -> int:
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != 6379:
            return port


def placement(mode: str) -> tuple[int | None, int | None, str]:
    """(CPU for redis-server, CPU for this process, a description) for ``--pin``.

    Where the two run matters on a VM: a loopback round trip between two vCPUs
    costs a cross-CPU wake-up (a PING takes ~75 µs on the reference machine),
    on one vCPU it does not (~30 µs). Unpinned, the scheduler picks either from
    run to run, and every single-call figure jumps with it."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if mode == "none" or not cpus or (mode == "split" and len(cpus) < 2):
        return None, None, "not pinned (the scheduler places redis-server and this process)"
    server = cpus[0] if mode == "same" else cpus[1]
    where = "the same CPU" if mode == "same" else f"CPU {server}"
    return server, cpus[0], f"pinned: this process on CPU {cpus[0]}, redis-server on {where}"


def spawn_server(
    workdir: Path, port: int, cpu: int | None, config: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """Start redis-server on ``port`` in ``workdir`` and wait until it answers PING.
    ``config`` follows the defaults (no RDB snapshots, no AOF), so it may override them,
    as in ``("--appendonly", "yes")``."""
    if port == 6379:
        raise ValueError("6379 is the machine's own Redis: benchmarks use a free port")
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir)]
    args += ["--save", "", "--appendonly", "no", "--logfile", str(workdir / "redis.log")]
    process = subprocess.Popen(
        [*args, *config],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                return process
            except redis.BusyLoadingError:
                return process  # up, still reading its data: the caller decides whether to wait
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    stop_server(process)
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.02)
    finally:
        client.close()


def stop_server(process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """SIGTERM (redis-server shuts down cleanly: with AOF on, it flushes it), then
    SIGKILL if it has not exited within ``timeout`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def private_server(workdir: Path, cpu: int | None) -> Iterator[str]:
    """A redis-server of our own: loopback, free port, no persistence, on ``cpu``
    if given; stopped on exit."""
    port = free_port()
    process = spawn_server(workdir, port, cpu)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_server(process, timeout=10)
