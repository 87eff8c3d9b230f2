"""Dramatiq adapter: delayed messages through ``actor.send_with_options(delay=ms)``.

Runs inside ``bench/.venvs/dramatiq``. Importing this module sets a
``RedisBroker`` on ``$BENCH_STORE`` as the global broker (default middleware)
and declares the actor; the worker is Dramatiq's own CLI,
``dramatiq peer_dramatiq --processes 1 --threads 4``, which imports it too.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import dramatiq
import jobbody
from dramatiq.brokers.redis import RedisBroker

__all__ = ["QUEUE", "Client", "broker", "run", "version", "worker_argv"]

QUEUE = "bench"

broker = RedisBroker(url=os.environ["BENCH_STORE"])
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE)
def run(job_id: str, due: float) -> None:
    jobbody.record(job_id, due)


def version() -> str:
    return f"dramatiq {dramatiq.__version__}"


class Client:
    # RedisBroker.enqueue takes one message; group/pipeline are loops of it.
    bulk = False

    def __init__(self, store: str) -> None:
        # The actor is bound to the module's broker, which $BENCH_STORE chose.
        if store != os.environ["BENCH_STORE"]:
            raise ValueError(f"store {store!r} is not $BENCH_STORE")

    def enqueue(self, job_id: str, due: float) -> None:
        # Dramatiq has only a relative delay (eta = its own clock + delay, whole ms);
        # rounding up keeps our part of the conversion from making the job early.
        delay = max(0, math.ceil((due - time.time()) * 1000))
        run.send_with_options(args=(job_id, due), delay=delay)

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        for job_id, due in jobs:
            self.enqueue(job_id, due)

    def close(self) -> None:
        broker.client.close()


def worker_argv(python: str, store: str) -> list[str]:
    # The venv's `dramatiq` script; the store comes from $BENCH_STORE at import.
    return [
        str(Path(python).parent / "dramatiq"),
        "peer_dramatiq",
        "--processes",
        "1",
        "--threads",
        "4",
    ]
