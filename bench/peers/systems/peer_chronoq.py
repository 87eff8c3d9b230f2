"""chronoq as a system under test: its normal delayed put (``run_at``), its
bulk ``put_many``, and its standard worker CLI at concurrency 4.

Runs from the project's own ``.venv``. The same adapter serves chronoq on
Redis and on SQLite: the store URL decides.
"""

from __future__ import annotations

from importlib.metadata import version as package_version
from pathlib import Path

import jobbody

import chronoq

QUEUE = "bench"
BATCH = 1000  # jobs per put_many call, as in bench/redis.py


def version() -> str:
    return f"chronoq {package_version('chronoq')}"


class Client:
    bulk = True

    def __init__(self, store: str) -> None:
        self.queue = chronoq.connect(store)

    def enqueue(self, job_id: str, due: float) -> None:
        self.queue.put(QUEUE, {"i": job_id, "due": due}, run_at=due)

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        for first in range(0, len(jobs), BATCH):
            batch = jobs[first : first + BATCH]
            self.queue.put_many(
                QUEUE, [chronoq.Job({"i": i, "due": due}, run_at=due) for i, due in batch]
            )

    def close(self) -> None:
        self.queue.close()


def run(job: chronoq.Reservation) -> None:
    jobbody.record(job.payload["i"], job.payload["due"])


handlers = {QUEUE: run}


def worker_argv(python: str, store: str) -> list[str]:
    chronoq_cli = str(Path(python).parent / "chronoq")
    return [chronoq_cli, "worker", "peer_chronoq:handlers", "--store", store, "--concurrency", "4"]
