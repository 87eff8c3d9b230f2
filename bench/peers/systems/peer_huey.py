"""huey as a system under test: its normal delayed enqueue
(``TaskWrapper.schedule`` with an ``eta``) and its standard consumer with 4
worker threads.

Runs from ``bench/.venvs/huey`` (huey 3.5.4). The ``RedisHuey`` instance is
built at import from ``$BENCH_STORE``, because the consumer loads it by import
path (``peer_huey.huey``). huey has no bulk enqueue (``TaskWrapper.map`` and
``group`` enqueue one task at a time), so ``enqueue_many`` loops ``enqueue``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path

import jobbody
from huey import RedisHuey

QUEUE = "bench"

huey = RedisHuey(QUEUE, url=os.environ["BENCH_STORE"])


@huey.task()
def run(job_id: str, due: float) -> None:
    jobbody.record(job_id, due)


def version() -> str:
    return f"huey {package_version('huey')}"


class Client:
    bulk = False

    def __init__(self, store: str) -> None:
        # The task is bound to the module's instance, which already uses $BENCH_STORE.
        if store != os.environ["BENCH_STORE"]:
            raise ValueError("peer_huey serves only the store named by $BENCH_STORE")

    def enqueue(self, job_id: str, due: float) -> None:
        # Aware eta: with utc=True huey keeps its microseconds; a naive eta is
        # read as local time and cut to whole seconds (utils.local_to_utc).
        run.schedule(args=(job_id, due), eta=datetime.fromtimestamp(due, UTC))

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        for job_id, due in jobs:
            self.enqueue(job_id, due)

    def close(self) -> None:
        huey.storage.pool.disconnect()  # RedisStorage.close() is a no-op


def worker_argv(python: str, store: str) -> list[str]:
    # The store comes from $BENCH_STORE, read when the consumer imports peer_huey.
    consumer = str(Path(python).parent / "huey_consumer")
    return [consumer, "peer_huey.huey", "-w", "4"]
