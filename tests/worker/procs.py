"""Real worker processes for tests/worker/test_processes.py: a handlers module
written into the test's directory (its handlers record what they did in a
JSON-lines file), worker processes started through the CLI or ``python -c``,
and polling helpers. Nothing here asserts speed: every wait has a generous
timeout and fails with what was seen."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import chronoq

from ..children import all_events

__all__ = [
    "HANDLERS_MODULE",
    "Records",
    "WorkerProcess",
    "cli_argv",
    "event_counts",
    "handlers_source",
    "pid_gone",
    "pid_gone_or_zombie",
    "wait_until",
]

HANDLERS_MODULE = "cq_handlers"

# What a job's payload asks of its handler: {"sleep": s} on every attempt,
# {"first_sleep": s} on the first only (block then, finish when redelivered),
# {"retry_once": delay} raise Retry(delay) on the first attempt, {"bury": reason},
# {"fail": true} raise ValueError every time. "start" and "end" (success) are
# recorded, with the attempt and the pid of the process.
_SOURCE = '''\
"""Handlers of the worker process tests (written by tests/worker/procs.py)."""

import asyncio
import json
import os
import time

import chronoq

RECORD = @RECORD@
TOPIC = @TOPIC@


def note(event, job):
    doc = {"event": event, "id": job.id, "attempt": job.attempts, "pid": os.getpid(),
           "t": time.time(), "topic": job.topic}
    with open(RECORD, "a", encoding="utf-8") as file:
        file.write(json.dumps(doc) + "\\n")


def wish(job):
    return job.payload if isinstance(job.payload, dict) else {}


def seconds(job, p):
    return p.get("sleep", 0) + (p.get("first_sleep", 0) if job.attempts == 1 else 0)


def settle(job, p):
    if p.get("retry_once") is not None and job.attempts == 1:
        raise chronoq.Retry(delay=p["retry_once"])
    if p.get("bury"):
        raise chronoq.Bury(p["bury"])
    if p.get("fail"):
        raise ValueError(f"failed attempt {job.attempts}")
    note("end", job)


def run(job):
    p = wish(job)
    note("start", job)
    time.sleep(seconds(job, p))
    settle(job, p)


async def run_async(job):
    p = wish(job)
    note("start", job)
    await asyncio.sleep(seconds(job, p))
    settle(job, p)


handlers = {TOPIC: run, TOPIC + ".async": run_async}
'''


def handlers_source(record: Path, topic: str) -> str:
    return _SOURCE.replace("@RECORD@", repr(str(record))).replace("@TOPIC@", repr(topic))


def wait_until(condition: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll ``condition`` until it returns something true, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.05)


class Records:
    """The JSON lines the handlers wrote."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def of(self, event: str, job_id: str | None = None) -> list[dict[str, Any]]:
        return [
            r for r in self.all() if r["event"] == event and (job_id is None or r["id"] == job_id)
        ]

    def ended(self, ids: Iterable[str]) -> bool:
        done = {r["id"] for r in self.of("end")}
        return set(ids) <= done


def event_counts(q: chronoq.Queue, topic: str, job_id: str | None = None) -> Counter[str]:
    """How many events of each kind the log holds (for one job, or all)."""
    return Counter(e.event.value for e in all_events(q, topic) if job_id is None or e.id == job_id)


class WorkerProcess:
    """One process (a CLI worker, a supervisor, or ``python -c``) whose stderr
    and stdout go to a file."""

    def __init__(self, argv: list[str], cwd: Path, log_path: Path) -> None:
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if k != "CHRONOQ_STORE"}
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log().splitlines() if line.startswith("{")]

    def wait_log(self, text: str, timeout: float = 30.0, count: int = 1) -> None:
        def seen() -> bool:
            if self.log().count(text) >= count:
                return True
            if not self.alive():
                raise AssertionError(f"exited with {self.proc.returncode}:\n{self.log()}")
            return False

        wait_until(seen, timeout, f"{text!r} x{count} in the log of pid {self.pid}")

    def send(self, signum: int = signal.SIGTERM) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            message = f"pid {self.pid} still runs after {timeout} s:\n{self.log()}"
            raise AssertionError(message) from None

    def children(self) -> list[int]:
        """The worker pids a supervisor logged as started."""
        pids = []
        for line in self.log().splitlines():
            if "worker process" in line and "started: pid" in line:
                pids.append(int(line.rsplit("pid", 1)[1].split()[0].strip('",}')))
        return pids

    def cleanup(self) -> None:
        for pid in self.children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.alive():
            self.proc.kill()
        self.proc.wait()


def cli_argv(target: str, url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "chronoq.cli.main", "worker", target, "--store", url, *args]


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def pid_gone_or_zombie(pid: int) -> bool:
    """Ended (an orphan's zombie waits for init, which may be slow in a container)."""
    if pid_gone(pid):
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
