"""RQ as a system under test: its normal delayed enqueue (``Queue.enqueue_at``)
and its standard worker pool at concurrency 4.

Runs from ``bench/.venvs/rq`` (rq 3.0.0). There is no bulk API for delayed
jobs: ``Queue.enqueue_many`` / ``prepare_data`` take no scheduled time and
push straight to the ready list, so ``enqueue_many`` loops ``enqueue``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

import jobbody
from redis import Redis
from rq import Queue

QUEUE = "bench"


def version() -> str:
    return f"rq {package_version('rq')}"


def run(job_id: str, due: float) -> None:
    # Module-level so the worker's horse imports it as ``peer_rq.run``.
    jobbody.record(job_id, due)


class Client:
    bulk = False

    def __init__(self, store: str) -> None:
        self.redis = Redis.from_url(store)
        self.queue = Queue(QUEUE, connection=self.redis)

    def enqueue(self, job_id: str, due: float) -> None:
        # Aware UTC: rq 3 reads a naive datetime as local time. It then keeps
        # only whole seconds (ScheduledJobRegistry.schedule), which the notes cover.
        self.queue.enqueue_at(datetime.fromtimestamp(due, UTC), run, job_id, due)

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        for job_id, due in jobs:
            self.enqueue(job_id, due)

    def close(self) -> None:
        self.redis.close()


def worker_argv(python: str, store: str) -> list[str]:
    # ``worker-pool`` runs every worker with its scheduler enabled (one of them
    # wins the queue's scheduler lock); it has no --with-scheduler flag.
    rq_cli = str(Path(python).parent / "rq")
    return [rq_cli, "worker-pool", "--url", store, "--num-workers", "4", QUEUE]
