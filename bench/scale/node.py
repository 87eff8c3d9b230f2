"""The persistent redis-server of the scale benchmark: a private one (bench/servers.py,
a free loopback port) with ``appendonly yes`` and ``appendfsync everysec``, which can
rewrite its AOF and be restarted on its own directory.

Redis 7 keeps a multi-part AOF in ``appendonlydir/``: a base file (an RDB preamble,
``aof-use-rdb-preamble yes`` by default), incremental files and a manifest; after a
rewrite the old parts are deleted."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any, cast

import redis
from servers import free_port, spawn_server, stop_server

__all__ = ["AOF", "Node", "info"]

AOF = ("--appendonly", "yes", "--appendfsync", "everysec", "--appenddirname", "appendonlydir")


def info(client: redis.Redis, section: str) -> dict[str, Any]:
    return cast(dict[str, Any], client.info(section))


class Node:
    """One redis-server with AOF on, on ``cpu`` if given."""

    def __init__(self, workdir: Path, cpu: int | None) -> None:
        self.dir = workdir
        self.cpu = cpu
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = spawn_server(workdir, self.port, cpu, AOF)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port)

    def rewrite_aof(self, timeout: float = 1800.0) -> float:
        """BGREWRITEAOF, waited for (a rewrite Redis had started on its own is waited
        for first); the seconds it took."""
        with self.client() as client:
            self._settle(client, timeout)
            before = int(info(client, "persistence")["aof_rewrites"])
            started = time.monotonic()
            client.bgrewriteaof()
            deadline = started + timeout
            while True:
                state = info(client, "persistence")
                idle = not state["aof_rewrite_in_progress"] and not state["aof_rewrite_scheduled"]
                if idle and int(state["aof_rewrites"]) > before:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"BGREWRITEAOF did not end within {timeout:.0f} s")
                time.sleep(0.05)
            if state["aof_last_bgrewrite_status"] != "ok":
                raise RuntimeError(f"BGREWRITEAOF failed: see {self.dir / 'redis.log'}")
            return time.monotonic() - started

    def _settle(self, client: redis.Redis, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = info(client, "persistence")
            if not state["aof_rewrite_in_progress"] and not state["aof_rewrite_scheduled"]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("an AOF rewrite Redis started did not end")
            time.sleep(0.05)

    def aof_files(self) -> dict[str, int]:
        """Bytes of each file of the AOF directory, once only the rewrite's base and
        its (near empty) increment are left (the old parts are deleted after it)."""
        folder = self.dir / "appendonlydir"
        deadline = time.monotonic() + 30
        while True:
            files = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
            bases = [name for name in files if ".base." in name]
            if len(bases) == 1 or time.monotonic() > deadline:
                return files
            time.sleep(0.1)

    def restart(self, timeout: float = 1800.0) -> dict[str, float]:
        """Stop the server (SIGTERM: it flushes its AOF) and start it again on the same
        directory and port: the seconds until it answers PING and INFO persistence says
        loading:0, and how long the stop took."""
        assert self.process is not None
        stopping = time.monotonic()
        stop_server(self.process, timeout=timeout)
        stopped = time.monotonic()
        self.process = None
        self.process = spawn_server(self.dir, self.port, self.cpu, AOF)
        with self.client() as client:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    client.ping()
                    if not int(info(client, "persistence")["loading"]):
                        break
                except redis.BusyLoadingError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server still loading after {timeout:.0f} s")
                time.sleep(0.01)
        return {"stop_s": stopped - stopping, "start_s": time.monotonic() - stopped}

    def stop(self) -> None:
        if self.process is not None:
            stop_server(self.process)
            self.process = None
