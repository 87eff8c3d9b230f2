"""Child processes for multi-process tests, and reading a whole event log."""

from __future__ import annotations

import json
import queue as stdqueue
import subprocess
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

import chronoq

__all__ = ["Child", "all_events"]


def all_events(q: chronoq.Queue, topic: str) -> list[chronoq.Event]:
    """The whole event log of ``topic``, oldest first."""
    events: list[chronoq.Event] = []
    cursor = None
    while True:
        page = q.events(topic, cursor=cursor, limit=10_000)
        if not page.events:
            return events
        events.extend(page.events)
        cursor = page.cursor


class Child:
    """A Python process running ``code`` with one JSON argument; talks by lines."""

    def __init__(self, code: str, args: dict[str, Any], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.lines: list[str] = []  # every line read so far
        self._queue: stdqueue.Queue[str | None] = stdqueue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            self._queue.put(line.strip())
        self._queue.put(None)

    def expect(self, timeout: float = 30.0) -> str:
        try:
            line = self._queue.get(timeout=timeout)
        except stdqueue.Empty:
            raise AssertionError(f"no output from child in {timeout} s") from None
        if line is None:
            self.proc.wait()
            raise AssertionError(f"child exited early: {self.stderr()}")
        return line

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 40.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with suppress(BrokenPipeError):
                    stream.close()
        self._stderr.close()
