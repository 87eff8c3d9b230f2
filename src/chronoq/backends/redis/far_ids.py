"""Generated ids that name their far bucket (the twin of ``hinted`` in
lua/lib/7_far.lua).

A job kept in the far tier is found by id without an index entry when its id
says where it is: a generated ULID bound for the far tier carries its bucket's
number (due time // bucket width, mod 2**24) in its last 24 bits. Those bits
come from the ULID's random part: the rest of it moves up, so the ids one
process makes in a millisecond still increase (the counter that ``chronoq.ids``
adds 1 to is in the low bits) and keep 56 random bits; the store reads the
bucket's page from bits 28-31 (the counter's bits 4-7: 16 ids made in a row
share a page). The bucket is guessed from this machine's clock; the store decides
with its own, and indexes the id when the two disagree (a clock far off, or a
due time at a bucket's edge), so a wrong guess costs memory, never a job.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from chronoq.ids import encode
from chronoq.job import NewJob

__all__ = ["HINT_BITS", "FarIds", "hinted"]

HINT_BITS = 24
_RANDOM_BITS = 80
_RANDOM_MASK = (1 << _RANDOM_BITS) - 1
_HINT_MASK = (1 << HINT_BITS) - 1
_TO_BASE32 = str.maketrans("ABCDEFGHJKMNPQRSTVWXYZ", "abcdefghijklmnopqrstuv")


def hinted(job_id: str, bucket: int) -> str:
    """``job_id`` (a ULID) naming far bucket number ``bucket``."""
    value = int(job_id.translate(_TO_BASE32), 32)
    stamp, random = value >> _RANDOM_BITS, value & _RANDOM_MASK
    random = ((random << HINT_BITS) & _RANDOM_MASK) | (bucket & _HINT_MASK)
    return encode(stamp << _RANDOM_BITS | random)


class FarIds:
    """Gives the generated ids of jobs bound for the far tier their bucket."""

    __slots__ = ("horizon_ms", "width_ms")

    def __init__(self, horizon_ms: int | None, width_ms: int) -> None:
        self.horizon_ms = horizon_ms
        self.width_ms = width_ms

    def apply(self, jobs: Sequence[NewJob]) -> Sequence[NewJob]:
        """``jobs``, with a new id for each generated one that looks far."""
        horizon = self.horizon_ms
        if horizon is None:
            return jobs
        now = time.time_ns() // 1_000_000
        width = self.width_ms
        out: list[NewJob] | None = None
        for n, job in enumerate(jobs):
            if not job.generated or (job.delay_ms == 0 and job.run_at_ms is None):
                continue
            due = now + job.delay_ms if job.run_at_ms is None else max(job.run_at_ms, now)
            start = due - due % width
            if start - horizon <= now:
                continue
            if out is None:
                out = list(jobs)
            out[n] = job._replace(id=hinted(job.id, start // width))
        return jobs if out is None else out
