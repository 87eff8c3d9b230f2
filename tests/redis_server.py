"""A private redis-server for the tests: started on a free loopback port, never
the machine's 6379, stopped at the end of the session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["RedisServer", "StopsOnExit", "free_port", "redis_server_binary"]


class StopsOnExit:
    """``with`` a test's processes or servers: ``stop()`` on the way out."""

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


class RedisServer:
    """One redis-server process with its own directory; ``extra`` adds config lines."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `make test` to install it")
        self.port = free_port()
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            str(self.dir / "redis.log"),
            *extra,
        ]
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy()
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self, kill: bool = False) -> None:
        if self.process is not None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
