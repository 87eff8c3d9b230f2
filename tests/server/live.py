"""A real chronoq server on a free loopback port, run by uvicorn (uvloop,
httptools) in a thread of the test process, so a test can look at the app's
parts (its long polls) while it talks to it over real HTTP."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from chronoq.server import ServerSettings, create_app
from chronoq.server.app import ChronoqApp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    app: ChronoqApp
    server: uvicorn.Server
    thread: threading.Thread
    url: str

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "the server did not stop"


def start_server(
    store: str, settings: ServerSettings | None = None, *, port: int | None = None
) -> LiveServer:
    """A server on ``store``, on ``port`` (default: a free one)."""
    app = create_app(store, settings=settings)
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, loop="uvloop", http="httptools",
        log_level="warning", lifespan="on", timeout_graceful_shutdown=10,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"chronoq-serve-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    return LiveServer(app, server, thread, f"http://127.0.0.1:{port}")
