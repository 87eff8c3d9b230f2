"""SAQ adapter: delayed jobs through ``Queue.enqueue("run", ..., scheduled=due)``.

Runs inside ``bench/.venvs/saq`` (saq 0.26.4, Redis queue). SAQ is asyncio
only, so the synchronous Client drives one event loop (an ``asyncio.Runner``)
and one ``RedisQueue`` for its whole life, as the arq adapter does. The worker
is SAQ's own CLI, ``saq peer_saq.settings``, which imports this module: the
settings dict holds the queue (on ``$BENCH_STORE``), the one function and a
concurrency of 4; everything else keeps SAQ's defaults (see notes/saq.md).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import jobbody
import saq
from saq import Queue

__all__ = ["QUEUE", "Client", "run", "settings", "version", "worker_argv"]

QUEUE = "bench"


def version() -> str:
    return f"saq {saq.__version__}"


async def run(ctx: dict[str, Any], *, job_id: str, due: float) -> None:
    # SAQ calls a job function with its context and the job's kwargs.
    jobbody.record(job_id, due)


# Read by SAQ's CLI (`saq peer_saq.settings`): the keyword arguments of saq.Worker.
settings = {
    "queue": Queue.from_url(os.environ["BENCH_STORE"], name=QUEUE),
    "functions": [run],
    "concurrency": 4,
}


class Client:
    # No batch enqueue in 0.26.4: Queue.map gathers one enqueue per job (and then
    # waits for their results), Queue.batch() only aborts the jobs if the block raises.
    bulk = False

    def __init__(self, store: str) -> None:
        self._runner = asyncio.Runner()
        self._queue = Queue.from_url(store, name=QUEUE)
        self._runner.run(self._queue.connect())

    def enqueue(self, job_id: str, due: float) -> None:
        # `scheduled` is annotated int (epoch seconds), but a float is kept as it is:
        # the job's JSON and the ZSET score hold it, and the worker compares it with
        # time.time() (RedisQueue.schedule), so whole seconds would only make jobs early.
        self._runner.run(self._queue.enqueue("run", job_id=job_id, due=due, scheduled=due))

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        for job_id, due in jobs:
            self.enqueue(job_id, due)

    def close(self) -> None:
        self._runner.run(self._queue.disconnect())
        self._runner.close()


def worker_argv(python: str, store: str) -> list[str]:
    # The venv's `saq` script; the store comes from $BENCH_STORE, read when the CLI
    # imports this module. No -v: SAQ's CLI then logs at WARNING, nothing per job.
    return [str(Path(python).parent / "saq"), "peer_saq.settings"]
