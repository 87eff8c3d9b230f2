"""A far tier for a fault run: jobs put ahead of the run with ``put_many``, due
over a window a few seconds on (every other id ``far-<n>``, entered in the far
index; the others ULIDs naming their due time's bucket, as chronoq generates
them, kept short in their bucket's list), so that their buckets are
promoted (lua/lib/7_far.lua) while the run's faults land. Each put is recorded
as a producer records it (``invoke``, then ``ok`` with its due time, or ``info``
when the batch's outcome is unknown, then the batch is sent again: puts
deduplicate on id), so the checker holds these jobs to the same account."""

from __future__ import annotations

import time

import chronoq
from chronoq.backends.redis.far_ids import hinted
from chronoq.errors import ChronoqError
from chronoq.ids import new_id

from .history import Recorder
from .run import Run

BATCH = 500
#: the store URL options of a run with a far tier: one-second buckets promoted
#: two seconds ahead (the default ten minutes would outlast the run)
FAR_OPTIONS = "horizon_ms=2000&far_bucket_ms=1000"
WIDTH_MS = 1000


def preload_far(run: Run, jobs: int, first_s: float, spread_s: float) -> None:
    """``jobs`` jobs due from ``first_s`` to ``first_s + spread_s`` seconds on."""
    rec = Recorder(run.history_dir / "far-preload.jsonl")

    def job_id(k: int, delay: float) -> str:
        if k % 2 == 0:
            return f"far-{k}"
        # the bucket guessed from this clock: a guess off by one is indexed instead
        return hinted(new_id(), int((time.time() + delay) * 1000) // WIDTH_MS)

    with chronoq.connect(run.url) as q:
        for first in range(0, jobs, BATCH):
            n = range(first, min(first + BATCH, jobs))
            delays = {k: round(first_s + spread_s * k / jobs, 3) for k in n}
            batch = [
                chronoq.Job(
                    {"n": f"far-{k}"},
                    id=job_id(k, delays[k]),
                    delay=delays[k],
                    ttr=run.setup.ttr,
                    max_attempts=10,
                )
                for k in n
            ]
            for job in batch:
                rec.record("invoke", str(job.id), delay=job.delay, attempt=0)
            for _ in range(100):
                try:
                    results = q.put_many(run.topic, batch)
                except ChronoqError as exc:
                    for job in batch:
                        rec.record("info", str(job.id), error=f"{type(exc).__name__}: {exc}")
                    time.sleep(0.1)
                    continue
                for result in results:
                    rec.record("ok", result.id, due_at=result.due_at, created=result.created)
                break
    rec.close()
