"""What a run's records say: the jobs' start times read back from the record
file, and the figures drawn from them (hand-over lag percentiles, drain rate,
early, lost and duplicate jobs).

Every job id is ``<phase>-<n>``; the record file holds one line
``<id> <due> <start>`` per start (jobbody.py), so a job started twice shows up
twice and a lost job not at all.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import percentile  # bench/common.py: the nearest-rank one every benchmark uses

EARLY_S = 0.001  # a start more than this before the due time is early


class Records:
    """The record file, read as it grows: job id -> start times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.starts: dict[str, list[float]] = defaultdict(list)
        self._offset = 0
        self._partial = b""

    def refresh(self) -> int:
        """Read what was appended since the last call; returns how many starts."""
        if not self.path.exists():
            return 0
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # a line still being written, if any
        for line in lines:
            job_id, _due, start = line.decode().split()
            self.starts[job_id].append(float(start))
        return len(lines)

    def done(self, ids: list[str]) -> int:
        return sum(1 for job_id in ids if job_id in self.starts)

    def wait_for(self, ids: list[str], last_due: float, stall_s: float, cap_s: float) -> bool:
        """Wait until every job of ``ids`` started, or until nothing started for
        ``stall_s`` after ``last_due``, or ``cap_s`` after it; True when all did."""
        progress = time.monotonic()
        cap = time.monotonic() + max(0.0, last_due - time.time()) + cap_s
        while True:
            if self.refresh():
                progress = time.monotonic()
            if self.done(ids) == len(ids):
                return True
            now = time.monotonic()
            if time.time() > last_due and (now - progress > stall_s or now > cap):
                return False
            time.sleep(0.05)


@dataclass
class Phase:
    """The jobs of one phase and their due times."""

    name: str
    jobs: list[tuple[str, float]]
    enqueue_finished: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [job_id for job_id, _ in self.jobs]

    def outcome(self, records: Records) -> dict[str, Any]:
        """Lags (ms, of each job's first start), early, lost and duplicate counts."""
        lags: list[float] = []
        early = lost = duplicates = 0
        for job_id, due in self.jobs:
            starts = records.starts.get(job_id)
            if not starts:
                lost += 1
                continue
            duplicates += len(starts) - 1
            first = min(starts)
            early += sum(1 for start in starts if start < due - EARLY_S)
            lags.append((first - due) * 1000)
        result: dict[str, Any] = {
            "n": len(self.jobs),
            "early": early,
            "lost": lost,
            "duplicates": duplicates,
            "notes": self.notes,
        }
        if lags:
            result |= {f"p{p}": percentile(lags, p) for p in (50, 95, 99)}
            result["max"] = max(lags)
            result["lags_ms"] = [round(lag, 3) for lag in lags]
        return result

    def drain_rate(self, records: Records) -> float | None:
        """Jobs/s from the moment all were due (or all were in, if later) to
        the last first start; None when some never started."""
        firsts = [min(records.starts[i]) for i in self.ids if records.starts.get(i)]
        if len(firsts) < len(self.jobs):
            return None
        since = max(max(due for _, due in self.jobs), self.enqueue_finished)
        return len(firsts) / max(max(firsts) - since, 1e-6)


def spread(prefix: str, first_due: float, rate: float, n: int) -> Phase:
    """``n`` jobs due one every 1/rate s from ``first_due``, on whole ms (the
    finest unit every system keeps)."""
    jobs = [(f"{prefix}-{k}", round(first_due + k / rate, 3)) for k in range(n)]
    return Phase(prefix, jobs)
