"""Adapter for Celery 5.7 on the Redis broker: a delayed job is a task sent with an ``eta``.

Runs inside ``bench/.venvs/celery``. The worker (``celery -A peer_celery worker``) and the
enqueuing driver both import this module, so the app, its one task and its settings live here.
Only non-defaults are set: the queue name, and no result backend (see notes/celery.md).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from importlib.metadata import version as _dist_version
from pathlib import Path

import jobbody
from celery import Celery

__all__ = ["QUEUE", "Client", "app", "record", "version", "worker_argv"]

QUEUE = "bench"

app = Celery("peer_celery", broker=os.environ.get("BENCH_STORE"))
app.conf.update(
    task_default_queue=QUEUE,
    # No result backend: the benchmark measures delivery, and storing results would
    # add Redis writes per job. This is a choice in Celery's favour.
    task_ignore_result=True,
    # Silences the 5.x start-up deprecation warning; retrying is the default anyway.
    broker_connection_retry_on_startup=True,
)


# An explicit name, so the driver and the worker agree even if one imports this as __main__.
@app.task(name="bench.record")
def record(job_id: str, due: float) -> None:
    jobbody.record(job_id, due)


def version() -> str:
    return f"celery {_dist_version('celery')}"


def _eta(due: float) -> datetime:
    # Celery sends eta as an ISO-8601 string (microsecond precision); aware UTC is unambiguous.
    return datetime.fromtimestamp(due, tz=UTC)


class Client:
    # kombu 5.7's Producer.batch() pipelines the LPUSHes of ordinary apply_async calls
    # (up to 1000 commands per round trip); Celery itself (group, chunks) has no bulk send.
    bulk = True

    def __init__(self, store: str) -> None:
        # Set before the first publish creates the producer pool, so the URL given wins.
        app.conf.broker_url = store

    def enqueue(self, job_id: str, due: float) -> None:
        record.apply_async(args=(job_id, due), eta=_eta(due))

    def enqueue_many(self, jobs: list[tuple[str, float]]) -> None:
        with app.producer_or_acquire() as producer, producer.batch():
            for job_id, due in jobs:
                record.apply_async(args=(job_id, due), eta=_eta(due), producer=producer)

    def close(self) -> None:
        app.close()


def worker_argv(python: str, store: str) -> list[str]:
    # The store reaches the worker through $BENCH_STORE; prefork pool and prefetch stay default.
    celery = str(Path(python).parent / "celery")
    return [celery, "-A", "peer_celery", "worker", "-c", "4", "--loglevel", "WARNING"]
