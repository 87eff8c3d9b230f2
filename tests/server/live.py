"""A real chronoq server on a free loopback port, run by uvicorn (uvloop,
httptools) in a thread of the test process, so a test can look at the app's
parts (its long polls) while it talks to it over real HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn

import chronoq
from chronoq.server import ServerSettings, create_app
from chronoq.server.app import ChronoqApp
from chronoq.server.compat.byid import BYID_TOPIC
from chronoq.server.connections import ServerConfig

from ..redis_server import free_port

__all__ = ["LiveServer", "ServeProcess", "free_port", "index_entry", "index_size", "start_server"]

T = TypeVar("T")


class _Server(uvicorn.Server):
    """uvicorn's server, which notes its event loop (the app's parts belong to it)."""

    loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, *args: Any, **kwargs: Any) -> None:
        self.loop = asyncio.get_running_loop()
        await super().serve(*args, **kwargs)


@dataclass
class LiveServer:
    app: ChronoqApp
    server: _Server
    thread: threading.Thread
    url: str

    async def on_server_loop(self, call: Callable[[], Awaitable[T]]) -> T:
        """Await ``call()`` run on the server's event loop (asyncio's parts are
        not for other threads), from the test's own loop."""
        assert self.server.loop is not None
        done = asyncio.run_coroutine_threadsafe(_awaited(call), self.server.loop)
        return await asyncio.wrap_future(done)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "the server did not stop"


def start_server(
    store: str, settings: ServerSettings | None = None, *, port: int | None = None
) -> LiveServer:
    """A server on ``store``, on ``port`` (default: a free one)."""
    settings = settings or ServerSettings()
    app = create_app(store, settings=settings)
    port = port or free_port()
    config = ServerConfig(
        app, limits=settings.limits, host="127.0.0.1", port=port, loop="uvloop",
        log_level="warning", lifespan="on", timeout_graceful_shutdown=10,
    )  # fmt: skip
    server = _Server(config)
    thread = threading.Thread(target=server.run, name=f"chronoq-serve-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    return LiveServer(app, server, thread, f"http://127.0.0.1:{port}")


class ServeProcess:
    """``chronoq serve`` as a child process on a free port, on ``store``
    (default: a SQLite store in ``workdir``) given as ``given``: ``after``
    serve (``serve --store URL``), ``before`` it (``chronoq --store URL
    serve``) or in ``env`` (``CHRONOQ_STORE``); more options in ``args``;
    run in ``cwd`` (default: the tests' own).
    ``stop`` sends SIGTERM (the way a server is stopped) and answers its
    exit code."""

    def __init__(
        self,
        workdir: Path,
        *args: str,
        scheme: str = "http",
        store: str | None = None,
        given: str = "after",
        cwd: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.log = workdir / f"serve-{self.port}.log"
        store = store or f"sqlite:///{workdir / 'serve.db'}"
        drop = {"PROMETHEUS_MULTIPROC_DIR", "CHRONOQ_STORE"}
        env = {k: v for k, v in os.environ.items() if k not in drop}
        serve = ["serve", "--port", str(self.port), *args]
        argv = {
            "after": [*serve, "--store", store],
            "before": ["--store", store, *serve],
            "env": serve,
        }[given]
        if given == "env":
            env["CHRONOQ_STORE"] = store
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "chronoq.cli.main", *argv],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1, verify=False).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"chronoq serve did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


async def _awaited(call: Callable[[], Awaitable[T]]) -> T:
    return await call()


def index_entry(store_url: str, job_id: str) -> Any:
    """The payload of ``job_id``'s entry in the compat protocols' id index
    (None: none), read from the store: the server keeps it out of the API."""
    with chronoq.connect(store_url) as queue:
        info = queue.get(BYID_TOPIC, job_id)
    return None if info is None else info.payload


def index_size(store_url: str) -> int:
    """How many entries the id index holds, read from the store."""
    with chronoq.connect(store_url) as queue:
        return int(queue.stats(BYID_TOPIC)["total"])
