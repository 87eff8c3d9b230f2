"""A producer process of a fault run: puts ``--jobs`` jobs with ids ``p<proc>-<n>`` at about
``--rate`` puts a second (so that faults land mid-run), some with delays of 0–500 ms, recording
each put before (``invoke``) and after (``ok`` / ``fail`` / ``info``). An indeterminate put is
retried with the same id after a 50–200 ms pause (safe: puts dedupe on id), up to ``--retries``
times, then the producer goes on.

``python -m tests.faults.producer URL TOPIC HISTORY_FILE --proc 0 --jobs 1500``"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import chronoq
from chronoq.errors import ChronoqError, InvalidInput

from .history import Recorder

DELAYED_SHARE = 0.3
MAX_DELAY_S = 0.5


def put_one(
    q: chronoq.Queue, rec: Recorder, topic: str, job_id: str, delay: float, args: argparse.Namespace
) -> None:
    for attempt in range(args.retries + 1):
        rec.record("invoke", job_id, delay=delay, attempt=attempt)
        try:
            group = None if not args.groups else f"g{int(job_id.rsplit('-', 1)[1]) % args.groups}"
            result = q.put(
                topic,
                {"n": job_id},
                id=job_id,
                delay=delay,
                ttr=args.ttr,
                max_attempts=10,
                group=group,
            )
        except InvalidInput as exc:
            rec.record("fail", job_id, error=f"{type(exc).__name__}: {exc}")
            return
        except (ChronoqError, OSError) as exc:  # BackendUnavailable, DurabilityError, a timeout
            rec.record("info", job_id, error=f"{type(exc).__name__}: {exc}")
            time.sleep(random.uniform(0.05, 0.2))
            continue
        rec.record("ok", job_id, due_at=result.due_at, created=result.created)
        return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("topic")
    parser.add_argument("history", type=Path)
    parser.add_argument("--proc", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--ttr", type=float, default=2.0)
    parser.add_argument("--retries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--groups", type=int, default=0, help="jobs spread over this many groups")
    args = parser.parse_args()
    random.seed(args.seed)
    rec = Recorder(args.history)
    started = time.monotonic()
    with chronoq.connect(args.url) as q:
        for n in range(args.jobs):
            delayed = random.random() < DELAYED_SHARE
            delay = round(random.uniform(0, MAX_DELAY_S), 3) if delayed else 0.0
            put_one(q, rec, args.topic, f"p{args.proc}-{n}", delay, args)
            pause = started + (n + 1) / args.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    rec.record("done", f"p{args.proc}")


if __name__ == "__main__":
    main()
