"""Running the app on uvicorn (uvloop, httptools): one process or
``--workers N`` sharing one listening socket, each with its own queue on the
one store. SIGTERM first answers waiting long polls (with []), then uvicorn
finishes the requests in flight and stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import resource
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field, replace
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from chronoq.server.app import ChronoqApp, create_app
from chronoq.server.connections import ServerConfig
from chronoq.server.settings import ConfigError, ServerSettings, load_settings
from chronoq.server.web.asgi import loopback_host

__all__ = ["ServeOptions", "Server", "app_from_env", "check_exposure", "run"]

log = logging.getLogger("chronoq")

_ENV = "CHRONOQ_SERVE_OPTIONS"  # how the options reach each worker process
_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_SPARE_FILES = 256  # descriptors beyond the connections: the store's, logs, a SQLite file


@dataclass
class ServeOptions:
    store: str | None = None
    host: str = "127.0.0.1"
    port: int = 7070
    config: str | None = None
    workers: int = 1
    root_path: str = ""
    insecure: bool = False
    pop_wait: float | None = None
    access_log: bool = False
    log_level: str = "info"
    ssl: dict[str, Any] = field(default_factory=dict)  # uvicorn's ssl_* options

    def settings(self) -> ServerSettings:
        settings = load_settings(self.config) if self.config else ServerSettings()
        if self.pop_wait is not None:
            settings = settings.with_limits(pop_wait=self.pop_wait)
        if self.insecure:
            settings = replace(settings, local_only=False)
        return settings


def _is_loopback(host: str) -> bool:
    """Whether ``--host`` is a loopback address (``::1`` comes bare)."""
    return loopback_host((f"[{host}]" if ":" in host else host).encode())


def check_exposure(options: ServeOptions, settings: ServerSettings) -> None:
    """Without tokens the server answers anyone who reaches it: refuse a
    non-loopback address unless ``--insecure`` says that is intended."""
    if settings.auth.enabled or options.insecure or _is_loopback(options.host):
        return
    raise ConfigError(
        f"refusing to listen on {options.host} without tokens: anyone who reaches it could "
        "put, take and delete jobs. Give --config with [[tokens]] (see `chronoq token`), "
        "or --insecure if a firewall or proxy guards it"
    )


def _drain_on_signals(app: ChronoqApp) -> Callable[[], Any]:
    """Lifespan hook: SIGTERM and SIGINT drain the app, then reach the
    server's own handler (uvicorn's, which starts its graceful stop)."""

    async def install() -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)

            def handler(number: int, frame: FrameType | None, previous: Any = previous) -> None:
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(app.service.drain()))
                if callable(previous):
                    previous(number, frame)

            signal.signal(sig, handler)

    return install


class Server(uvicorn.Server):
    """uvicorn's server, which ends a clean stop on SIGTERM with status 0."""

    drained = False  # every request was answered before the stop

    async def _wait_tasks_to_complete(self) -> None:
        # cancelled when timeout_graceful_shutdown runs out: not drained then
        await super()._wait_tasks_to_complete()
        self.drained = not self.force_exit

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        with super().capture_signals():
            yield
            # uvicorn raises the signal it stopped on again once it has stopped,
            # so a clean stop on SIGTERM would end with status 143: supervisors
            # and scripts would report a failure
            captured = getattr(self, "_captured_signals", None)  # uvicorn's own list
            if self.drained and captured is not None:
                self._captured_signals = [sig for sig in captured if sig != signal.SIGTERM]


def _room_for(connections: int) -> None:
    """Raise this process's limit on open files to hold ``connections``, a
    store connection for each (a long poll's on Redis), and the rest, up to
    the hard limit; say so when it cannot, rather than fail to accept at the
    1,025th connection."""
    wanted = 2 * connections + _SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    if soft != resource.RLIM_INFINITY and soft < wanted:
        log.warning(
            "this process may open %d files, fewer than limits.max_connections (%d), a store "
            "connection each and %d more need: raise `ulimit -n`, or lower max_connections",
            soft, connections, _SPARE_FILES,
        )  # fmt: skip


def app_from_env() -> ChronoqApp:
    """The app of one worker process, from the options ``run`` left in the
    environment (uvicorn's factory)."""
    options = ServeOptions(**json.loads(os.environ[_ENV]))
    app = create_app(options.store, settings=options.settings())
    app.service.on_start.append(_drain_on_signals(app))
    return app


def run(options: ServeOptions, settings: ServerSettings | None = None) -> None:
    """Serve until SIGTERM/SIGINT. Raises ``ConfigError`` on bad options.
    ``settings``: those of ``options``, already loaded and checked."""
    if settings is None:
        settings = options.settings()  # fail here, once, not in every worker
        check_exposure(options, settings)
    os.environ[_ENV] = json.dumps(asdict(options))
    metrics_dir = None
    if options.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = tempfile.mkdtemp(prefix="chronoq-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    config = ServerConfig(
        "chronoq.server.serving:app_from_env",
        limits=settings.limits,
        factory=True,
        host=options.host,
        port=options.port,
        workers=options.workers,
        root_path=options.root_path,
        loop="uvloop",
        access_log=options.access_log,
        log_level=options.log_level,
        timeout_graceful_shutdown=30,
        server_header=False,
        **options.ssl,
    )
    _room_for(settings.limits.max_connections)
    try:
        if options.workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            Server(config).run()
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
