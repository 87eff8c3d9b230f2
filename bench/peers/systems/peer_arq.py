"""arq adapter: delayed jobs through ``ArqRedis.enqueue_job(..., _defer_until=...)``.

Runs inside ``bench/.venvs/arq``. arq is asyncio only, so the synchronous
Client drives one event loop (an ``asyncio.Runner``) and one ``ArqRedis`` pool
for its whole life. The worker is arq's own CLI, ``arq peer_arq.WorkerSettings``.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jobbody
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.version import VERSION

__all__ = ["QUEUE", "Client", "WorkerSettings", "run", "version", "worker_argv"]

QUEUE = "bench"


def version() -> str:
    return f"arq {VERSION}"


async def run(ctx: dict[str, Any], job_id: str, due: float) -> None:
    jobbody.record(job_id, due)


class WorkerSettings:
    # Read by arq's CLI; anything not set here keeps arq's default
    # (poll_delay 0.5 s, queue_read_limit max(5 * max_jobs, 100), keep_result 3600 s).
    functions = (run,)
    redis_settings = RedisSettings.from_dsn(os.environ["BENCH_STORE"])
    queue_name = QUEUE
    max_jobs = 4


class Client:
    bulk = False  # arq has no batch enqueue: enqueue_job is one WATCH/EXISTS/MULTI..EXEC per job

    def __init__(self, store: str) -> None:
        self._runner = asyncio.Runner()
        self._pool: ArqRedis = self._runner.run(
            create_pool(RedisSettings.from_dsn(store), default_queue_name=QUEUE)
        )

    def enqueue(self, job_id: str, due: float) -> None:
        # Aware UTC: arq takes .timestamp() of the datetime, so a naive one would be read
        # as local time. The score is round(ms), so it may sit up to 0.5 ms before `due`.
        at = datetime.fromtimestamp(due, UTC)
        self._runner.run(self._pool.enqueue_job("run", job_id, due, _defer_until=at))

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        for job_id, due in jobs:
            self.enqueue(job_id, due)

    def close(self) -> None:
        self._runner.run(self._pool.aclose())
        self._runner.close()


def worker_argv(python: str, store: str) -> list[str]:
    # The venv's `arq` script sits next to its interpreter; the store comes from
    # $BENCH_STORE, read by WorkerSettings when the CLI imports this module.
    return [str(Path(python).parent / "arq"), "peer_arq.WorkerSettings"]
