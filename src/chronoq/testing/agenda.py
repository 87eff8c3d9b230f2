"""The pending jobs of the run's topics, in the two orders ``run_due`` picks
by: by due time on the run's clock until they fall due, then as their
topic's reserve hands them out (highest priority first); and those due
after the end, by due time, for the run to keep from falling due in the
store meanwhile (``near``). Heaps, so that a step costs log n, not n: a job
changed or gone leaves its old entry behind, skipped when met (its version
is no longer the job's)."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from chronoq.job import JobInfo

__all__ = ["Agenda", "Key", "Pending"]

Key = tuple[str, str]  # (topic, id)


@dataclass(slots=True)
class Pending:
    info: JobInfo  # as the store showed it last
    due: int  # its due time on the run's clock, ms


#: (due, -priority, created_at, id, topic, version)
_Waiting = tuple[int, int, int, str, str, int]
#: (-priority, due, created_at, id, version)
_Due = tuple[int, int, int, str, int]
#: (due, topic, id, version)
_Beyond = tuple[int, str, str, int]


class Agenda:
    def __init__(self, topics: frozenset[str], end: int) -> None:
        self.topics = topics
        self.end = end  # jobs due later do not run
        self.paused: set[str] = set()
        self._jobs: dict[Key, tuple[Pending, int]] = {}  # with its version
        self._versions = itertools.count()
        self._waiting: list[_Waiting] = []
        self._due: dict[str, list[_Due]] = {}
        self._due_upto = -1  # the jobs due by then are in _due
        self._beyond: list[_Beyond] = []  # due after the end

    def put(self, job: Pending) -> None:
        """Add the job, or take in its new due time or priority."""
        info = job.info
        if info.topic not in self.topics or info.topic in self.paused:
            return
        version = next(self._versions)
        self._jobs[info.topic, info.id] = (job, version)
        if job.due > self.end:
            heapq.heappush(self._beyond, (job.due, info.topic, info.id, version))
        elif job.due <= self._due_upto:
            entry = (-info.priority, job.due, info.created_at, info.id, version)
            heapq.heappush(self._due.setdefault(info.topic, []), entry)
        else:
            waiting = (job.due, -info.priority, info.created_at, info.id, info.topic, version)
            heapq.heappush(self._waiting, waiting)

    def discard(self, key: Key) -> None:
        self._jobs.pop(key, None)

    def pause(self, topic: str) -> None:
        """Its jobs do not run from now on."""
        self.paused.add(topic)
        self._due.pop(topic, None)

    def near(self, limit: int) -> list[Pending]:
        """The jobs due after the end but by ``limit``, each once (again
        after a ``put``)."""
        beyond, near = self._beyond, []
        while beyond and beyond[0][0] <= limit:
            _, topic, job_id, version = heapq.heappop(beyond)
            if self._live(topic, job_id, version):
                near.append(self._jobs[topic, job_id][0])
        return near

    def next(self, now: int) -> Pending | None:
        """The job to run: of the jobs due by ``now`` (and by ``end``), or
        else at the next due time, those of the topic whose first is due
        soonest, in the order of its reserve."""
        self._fall_due(min(now, self.end))
        best = self._best()
        if best is None:
            soonest = self._soonest_waiting()
            if soonest is None or soonest > self.end:
                return None
            self._fall_due(soonest)
            best = self._best()
        return best

    def _live(self, topic: str, job_id: str, version: int) -> bool:
        held = self._jobs.get((topic, job_id))
        return held is not None and held[1] == version and topic not in self.paused

    def _fall_due(self, upto: int) -> None:
        if upto <= self._due_upto:
            return
        self._due_upto = upto
        waiting = self._waiting
        while waiting and waiting[0][0] <= upto:
            due, priority, created_at, job_id, topic, version = heapq.heappop(waiting)
            if self._live(topic, job_id, version):
                entry = (priority, due, created_at, job_id, version)
                heapq.heappush(self._due.setdefault(topic, []), entry)

    def _soonest_waiting(self) -> int | None:
        waiting = self._waiting
        while waiting and not self._live(waiting[0][4], waiting[0][3], waiting[0][5]):
            heapq.heappop(waiting)
        return waiting[0][0] if waiting else None

    def _best(self) -> Pending | None:
        best: tuple[int, int, int, str, str] | None = None
        for topic, heap in self._due.items():
            while heap and not self._live(topic, heap[0][3], heap[0][4]):
                heapq.heappop(heap)
            if heap:
                priority, due, created_at, job_id, _ = heap[0]
                candidate = (due, priority, created_at, job_id, topic)
                if best is None or candidate < best:
                    best = candidate
        return None if best is None else self._jobs[best[4], best[3]][0]
