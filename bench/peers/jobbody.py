"""The one job body every system under test runs: note when it started.

Standard library only: it is imported inside each peer's own venv and worker.
Each call appends one line ``<job id> <due> <start>`` (epoch seconds) to the
file named by ``$BENCH_RECORD``. Every process and thread appends to the same
file with one ``O_APPEND`` write per line, which Linux keeps whole, so a
forking worker (RQ) or a process pool (Celery) needs no coordination.
"""

from __future__ import annotations

import os
import time

__all__ = ["record"]

_fd: int | None = None
_pid: int | None = None


def record(job_id: str, due: float) -> None:
    started = time.time()
    os.write(_file(), f"{job_id} {due!r} {started!r}\n".encode())


def _file() -> int:
    # Opened once per process; a forked child opens its own.
    global _fd, _pid
    if _fd is None or _pid != os.getpid():
        _fd = os.open(os.environ["BENCH_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _pid = os.getpid()
    return _fd
