"""``chronoq worker MODULE:ATTR``: runs a ``Worker`` on the handlers mapping
``ATTR`` of ``MODULE`` (imported like ``python -m`` would: the current
directory is on the path), in this process or, with ``--processes P``, in P
child processes under a supervisor (chronoq.cli.supervisor).

Decisions: a bad MODULE:ATTR exits 2 before any job is touched; a store that
cannot be opened at all (a SQLite file that cannot be created, or is not a
database) exits 3; a Redis server that is down or unreachable is waited for
like an outage (warnings, capped pauses, then work), because a worker started
before its Redis must not die. One log line per job at INFO on stderr, as text
or as one JSON object per line; the start banner is for people (text only).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

import click
from rich.console import Console
from rich.text import Text

import chronoq
from chronoq.backends import StoreURL
from chronoq.cli.app import STORE_HELP, App, pass_app
from chronoq.cli.joblog import configure_logging
from chronoq.cli.output import message
from chronoq.cli.supervisor import Supervisor
from chronoq.errors import InvalidInput

__all__ = ["WorkerOptions", "load_handlers", "worker"]

log = logging.getLogger("chronoq")

PARENT_CHECK_S = 1.0  # a child notices this soon that its supervisor is gone
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

EPILOG = """\b
MODULE:ATTR names a mapping of topic to handler, e.g. myapp.jobs:handlers
where handlers = {"emails": send_email}; the current directory is on the path.
A handler takes a chronoq.Reservation: returning acks the job, raising
chronoq.Retry(delay) or any exception retries it with backoff, raising
chronoq.Bury(reason) moves it to dead.

\b
SIGTERM or SIGINT: stop reserving, let running handlers finish within
--grace, then give the rest back; a second signal skips the grace. With
--processes the supervisor forwards each signal to its workers (a third one
kills them) and restarts a worker that dies. A Redis store that is down is
waited for (warnings are logged), never a reason to exit.

\b
Exit codes: 0 stopped by a signal; 2 bad input (MODULE:ATTR, options,
store URL); 3 the store cannot be opened.
"""


@dataclass(frozen=True)
class WorkerOptions:
    """What the command line says about one worker process."""

    target: str
    concurrency: int = 10
    grace: float = 30.0
    batch: int = 100
    prefetch: int | None = None
    ttr: float | None = None
    recurring: bool = True
    inline: bool = True
    log_format: str = "text"
    verbose: bool = False

    def child_argv(self, supervisor_pid: int) -> list[str]:
        """The command line of one worker process under a supervisor (the store
        URL goes through the environment: it may hold a password)."""
        argv = [sys.executable, "-m", "chronoq.cli.main"]
        argv += ["-v"] if self.verbose else []
        argv += ["worker", self.target, "--concurrency", str(self.concurrency)]
        argv += ["--grace", repr(self.grace), "--batch", str(self.batch)]
        argv += [] if self.prefetch is None else ["--prefetch", str(self.prefetch)]
        argv += [] if self.ttr is None else ["--ttr", repr(self.ttr)]
        argv += [] if self.recurring else ["--no-recurring"]
        argv += [] if self.inline else ["--no-inline"]
        argv += ["--log-format", self.log_format, "--supervisor-pid", str(supervisor_pid)]
        return argv


@click.command("worker", epilog=EPILOG)
@click.argument("target", metavar="MODULE:ATTR")
@click.option("--store", metavar="URL", help=STORE_HELP)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Handlers running at once, per process.",
)
@click.option(
    "--processes",
    "-p",
    type=click.IntRange(1, 512),
    default=1,
    show_default=True,
    help="Worker processes; more than 1 runs them under a supervisor.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds that running handlers get to finish after a stop signal.",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Most jobs one reserve call takes.",
)
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    help="Jobs held beyond the running ones, started as slots free "
    "[default: automatic, what the slots run in about 50 ms, at most --batch].",
)
@click.option(
    "--ttr",
    type=click.FloatRange(min=0, min_open=True),
    help="Lease length in seconds for every job (default: each job's own).",
)
@click.option("--no-recurring", is_flag=True, help="Do not put recurring occurrences.")
@click.option(
    "--no-inline",
    is_flag=True,
    help="Run every plain-function handler in the worker's threads, never on its "
    "event loop (by default a handler whose runs take under 0.2 ms runs there).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines on stderr: text, or one JSON object per line.",
)
@click.option(
    "--supervisor-pid",
    type=int,
    hidden=True,
    help="Set by the supervisor: stop when this process is gone.",
)
@pass_app
def worker(
    app: App,
    /,
    target: str,
    store: str | None,
    processes: int,
    no_recurring: bool,
    no_inline: bool,
    supervisor_pid: int | None,
    **opts: Any,
) -> None:
    """Run the handlers named by MODULE:ATTR on the jobs of their topics."""
    ctx = click.get_current_context()
    if store is not None:
        app.store = store
    root = ctx.find_root()
    verbose = bool(root.params.get("verbose"))
    options = WorkerOptions(
        target, recurring=not no_recurring, inline=not no_inline, verbose=verbose, **opts
    )
    ctx.call_on_close(configure_logging(options.log_format, verbose))
    stop = EarlyStop()
    ctx.call_on_close(stop.restore)
    handlers = load_handlers(target)
    if processes > 1:
        # bad handlers or store: exit 2 or 3 here, before any child starts
        with chronoq.connect(app.store) as queue:
            make_worker(queue, handlers, options)
            url = queue.url
        if options.log_format == "text":
            banner(app, options, sorted(handlers), url, processes)
        stop.restore()
        if stop.count:
            return
        env = {**os.environ, "CHRONOQ_STORE": store_url(app)}
        ctx.exit(Supervisor(options.child_argv(os.getpid()), processes, env).run())
    queue = app.queue()
    w = make_worker(queue, handlers, options)
    if supervisor_pid is None and options.log_format == "text":
        banner(app, options, sorted(handlers), queue.url, 1)
    run_worker(w, stop, supervisor_pid)


def store_url(app: App) -> str:
    """The store URL the command runs on (not redacted: it goes to the children)."""
    return StoreURL.parse(app.store).raw


def make_worker(
    queue: chronoq.Queue, handlers: Mapping[str, Any], options: WorkerOptions
) -> chronoq.Worker:
    """The worker (no I/O yet); ``InvalidInput`` for a bad topic or handler."""
    return chronoq.Worker(
        queue,
        handlers,
        concurrency=options.concurrency,
        grace=options.grace,
        batch=options.batch,
        prefetch=options.prefetch,
        ttr=options.ttr,
        recurring=options.recurring,
        inline=options.inline,
    )


def run_worker(w: chronoq.Worker, stop: EarlyStop, supervisor_pid: int | None) -> None:
    """Work until a signal (or, under a supervisor, until it is gone)."""
    if stop.attach(w):
        log.info("stopped before the worker started")
        return
    ended = threading.Event()
    if supervisor_pid is not None:
        threading.Thread(target=watch_parent, args=(w, supervisor_pid, ended), daemon=True).start()
    try:
        w.run()
    finally:
        ended.set()


def watch_parent(w: chronoq.Worker, parent_pid: int, ended: threading.Event) -> None:
    """Stop a supervised worker whose supervisor died (it would run unwatched)."""
    while not ended.wait(PARENT_CHECK_S):
        if os.getppid() != parent_pid:
            log.warning("the supervisor (pid %d) is gone: stopping", parent_pid)
            w.stop()
            return


class EarlyStop:
    """SIGTERM / SIGINT before ``Worker.run`` installs its own handlers (while
    the handlers module is imported, say): remembered and passed on, so a
    signal sent early stops the process cleanly instead of killing it."""

    def __init__(self) -> None:
        self.count = 0
        self._worker: chronoq.Worker | None = None
        self._previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():  # else signals are not ours
            self._previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self._worker is not None:
            self._worker.stop(now=self.count > 1)

    def attach(self, w: chronoq.Worker) -> bool:
        """Pass later signals to ``w``; True when one came already."""
        self._worker = w
        return self.count > 0

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}


# -- loading the handlers ----------------------------------------------------------------


def load_handlers(target: str) -> Mapping[str, Any]:
    """The mapping named by ``MODULE:ATTR``; ``InvalidInput`` (exit 2) if there is none."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise InvalidInput(
            f"expected MODULE:ATTR naming a mapping of topic to handler, got {target!r} "
            "(e.g. myapp.jobs:handlers)"
        )
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None and (module_name + ".").startswith(missing + "."):
            raise InvalidInput(
                f"cannot import module {module_name!r}: {exc} (run from the directory that "
                "holds it, or add its directory to PYTHONPATH)"
            ) from None
        raise InvalidInput(f"importing module {module_name!r} failed: {_where(exc)}") from None
    found: Any = module
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise InvalidInput(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(found, Mapping):
        raise InvalidInput(
            f"{target} is a {type(found).__name__}, not a mapping of topic to handler "
            "(e.g. handlers = {'emails': send_email})"
        )
    return found


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{at}"


# -- output ------------------------------------------------------------------------------


def banner(app: App, options: WorkerOptions, topics: list[str], url: str, processes: int) -> None:
    """Two lines for people on stderr: what runs, and how to stop it."""
    size = f"concurrency {options.concurrency}"
    if processes > 1:
        size = f"{processes} processes x {size}"
    line = message(
        ("chronoq worker ", "bold"),
        (options.target, "cyan"),
        f" on {url}: topics {', '.join(topics)}; {size}",
    )
    console: Console = app.out.stderr
    console.print(line, soft_wrap=True)
    console.print(
        Text(
            f"Stop: Ctrl-C or SIGTERM (running jobs get {options.grace:g} s), twice to stop now.",
            style="dim",
        ),
        soft_wrap=True,
    )
