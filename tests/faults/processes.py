"""Child processes of a fault run (producers and ``chronoq worker`` processes), each with its
output in a log file, all killed at cleanup: a fault run never leaves a child behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ROOT", "Proc"]

ROOT = Path(__file__).resolve().parents[2]  # the repository: `tests` imports from there


class Proc:
    """One child; ``kind`` is "producer" or "worker"."""

    def __init__(self, kind: str, argv: list[str], log: Path, env: dict[str, str]) -> None:
        self.kind = kind
        self.log_path = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.popen.wait(timeout)
        return None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGCONT (it may be frozen) and SIGTERM, then SIGKILL after ``timeout``."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        code = self.wait(timeout)
        if code is None:
            self.popen.kill()
            code = self.popen.wait(10)
        return code

    def kill(self) -> None:
        if self.alive():
            self.popen.kill()
        self.popen.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def python_argv(*args: str) -> list[str]:
    return [sys.executable, *args]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CHRONOQ_STORE"}
    env.update(extra)
    return env


def sleep_until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))
