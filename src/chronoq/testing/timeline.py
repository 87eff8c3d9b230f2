"""The run's clock, and the store's pending (delayed or ready) jobs on it.

``run_due`` keeps a clock of its own. It starts at the wall clock's time of
the call; between handler runs it is never behind the wall clock (up to the
end); when nothing is due it jumps to the next due time (up to the end); it
stands still while a handler runs. Every pending job of the store is kept on
that clock (``Pending.due``), and in the store at that due time too, so that
the store's order among due jobs is the run's and a reserve hands out the
job the run picked (a job not yet due in the store is moved to now first).
Jobs put before the run are due when the store says. A job put, retried or
moved during a step is due, on the run's clock, the delay its event in the
store's log gives (its due time less the event's time) after the step's
moment. A job of the run's topics due after the end that comes near falling
due in the store (the wall clock moves on while the run runs) is parked a
day ahead, so that a reserve never hands it out.

When the run ends (``close``), every job still delayed is moved earlier by
the run's clock's lead on the wall clock, and parked jobs back: the store
then shows, on the wall clock, what it would at the run's end.

What changed during a step is read from the event log (``Queue.events``)
from where it was left. The run's own moves of jobs (their events would read
as a handler's) are read past as soon as they are made, the run being the
store's only writer then; a job leased is settled, so the move to now before
its lease needs no such care. Which job runs next is the agenda's (agenda.py).
"""

from __future__ import annotations

import time

from chronoq.errors import ChronoqError
from chronoq.job import Event, JobInfo, Reservation
from chronoq.queue import Queue
from chronoq.states import EventKind, State
from chronoq.testing.agenda import Agenda, Key, Pending
from chronoq.testing.reads import all_jobs

__all__ = ["RunError", "Timeline", "wall_ms"]

_PENDING = (State.DELAYED, State.READY)
#: the events that set a job's due time, from their own time
_TIMING = frozenset(
    {EventKind.PUT, EventKind.RESCHEDULE, EventKind.NACK, EventKind.REQUEUE, EventKind.EXPIRE}
)
LOG_PAGE = 10_000
PARK_NEAR_MS = 10_000  # due after the end and this close to the wall clock: parked
PARK_FOR_MS = 86_400_000  # that far ahead of the wall clock


class RunError(ChronoqError):
    """``run_due`` could not go on (see the message for why and what to do)."""


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _epoch_s(ms: int) -> float:
    """Epoch seconds that the store reads back as ``ms`` exactly (it floors
    ``run_at * 1000``, and ``ms / 1000 * 1000`` may fall just short)."""
    return (ms + 0.5) / 1000


def _time_order(job: Pending) -> tuple[int, int, int, str]:
    return job.due, -job.info.priority, job.info.created_at, job.info.id


class Timeline:
    def __init__(self, queue: Queue, topics: frozenset[str], start: int, end: int) -> None:
        """``topics``: those whose jobs run, when due by ``end``; the run's
        clock starts at ``start`` (ms)."""
        self.queue = queue
        self.clock = start  # the run's clock, ms
        self.jobs: dict[Key, Pending] = {}  # every pending job of the store
        self.agenda = Agenda(topics, end)
        for topic in sorted(topics):
            if queue.stats(topic)["paused"]:
                self.agenda.pause(topic)
        self._cursor: str | None = None  # the event log's, read up to
        self._moved = False  # the run moved jobs since the log was last read
        self._read_past_own()
        for topic in queue.topics():
            for info in all_jobs(queue, topic):
                self._keep((info.topic, info.id), Pending(info, info.due_at))

    def next_job(self) -> Pending | None:
        """The job to run next, or None when none is due by the end."""
        wall = wall_ms()
        self.clock = max(self.clock, min(wall, self.agenda.end))
        for job in self.agenda.near(wall + PARK_NEAR_MS):
            parked = self._move(job.info, wall + PARK_FOR_MS)
            if parked is None:
                self._keep((job.info.topic, job.info.id), None)
            else:
                job.info = parked  # its due time on the run's clock stays
        self._read_past_own()
        return self.agenda.next(self.clock)

    # -- leasing -------------------------------------------------------------------------

    def lease(self, job: Pending) -> tuple[Reservation, int] | None:
        """Reserve ``job``, after moving it to now in the store if it is not
        due there yet, and move the run's clock to its due time if later;
        returns the reservation and the job's due time on the run's clock. On
        a sharded Redis, or when a job of higher priority fell due on the wall
        clock meanwhile, another job due as well may come instead: it runs.
        None: nothing was leased (the job is gone, or its topic paused)."""
        info = job.info
        early = info.due_at > wall_ms()
        leased = self._reserve(job, early)
        if leased == [] and not early:
            # due on this machine's clock, not yet on the store's (a Redis elsewhere)
            early = True
            leased = self._reserve(job, early)
        if leased and leased[0].id != info.id and early:
            self._put_back(job)
        self._read_past_own()
        if not leased:
            if leased is not None:
                self._not_leased(job, early)
            return None
        got = leased[0]
        held = self.jobs.get((info.topic, got.id))
        # a job the run did not know of (a lease that ran out meanwhile) is due now
        due = self.clock if held is None else held.due
        self.clock = max(self.clock, due)
        return got, due

    def _reserve(self, job: Pending, early: bool) -> list[Reservation] | None:
        """The jobs of one reserve of the job's topic, the job moved to now
        first if ``early``; None if it could not be moved: it is gone."""
        info = job.info
        if early and not self.queue.reschedule(info.topic, info.id, delay=0):
            self._keep((info.topic, info.id), None)  # reserved elsewhere, dead or deleted
            return None
        return self.queue.reserve_once(info.topic, 1).jobs

    def _not_leased(self, job: Pending, early: bool) -> None:
        topic = job.info.topic
        if early:
            self._put_back(job)
            self._read_past_own()
        if self.queue.stats(topic)["paused"]:
            self.agenda.pause(topic)
            return
        raise RunError(
            f"job {job.info.id!r} of topic {topic!r} is due but a reserve did not hand it "
            "out: is a worker or another consumer using this store? Stop it while "
            "run_due runs, or give run_due a store of its own"
        )

    def _put_back(self, job: Pending) -> None:
        """Give a job moved to now for a lease it did not get its due time back."""
        moved = self._move(job.info, job.due, force=True)
        key = (job.info.topic, job.info.id)
        self._keep(key, None if moved is None else Pending(moved, job.due))

    # -- following the store ---------------------------------------------------------------

    def follow(self, ran: Key | None) -> None:
        """Take in what changed in the store during the step (``ran``: the
        job whose handler just ran)."""
        delays: dict[Key, int | None] = {} if ran is None else {ran: None}
        while True:
            page = self.queue.events(cursor=self._cursor, limit=LOG_PAGE)
            self._cursor = page.cursor
            for event in page.events:
                key = (event.topic, event.id)
                delays[key] = _delay(event) if event.event in _TIMING else delays.get(key)
            if len(page.events) < LOG_PAGE:
                break
        for key, delay in delays.items():
            self._take(key, self.queue.get(*key), delay)
        self._read_past_own()

    def _read_past_own(self) -> None:
        """Move the event cursor past the newest event, when the run moved
        jobs since it last read the log (the events since are of those moves)."""
        if not self._moved and self._cursor is not None:
            return
        self._moved = False
        while True:
            page = self.queue.events(cursor=self._cursor, limit=LOG_PAGE)
            self._cursor = page.cursor
            if len(page.events) < LOG_PAGE:
                return

    def _take(self, key: Key, info: JobInfo | None, delay: int | None) -> None:
        """``delay``: how long after the step's moment its last change made
        it due (None: nothing changed its due time)."""
        old = self.jobs.get(key)
        if info is None or info.state not in _PENDING:
            self._keep(key, None)
        elif old is not None and delay is None:
            old.info = info
        else:
            due = self.clock + (delay or 0)  # no timing event seen: due now
            moved = self._move(info, due)
            self._keep(key, None if moved is None else Pending(moved, due))

    def _keep(self, key: Key, job: Pending | None) -> None:
        if job is None:
            self.jobs.pop(key, None)
            self.agenda.discard(key)
        else:
            self.jobs[key] = job
            self.agenda.put(job)

    def _move(self, info: JobInfo, due_at: int, *, force: bool = False) -> JobInfo | None:
        """The job with its due time in the store set to ``due_at`` (or now,
        if that has passed); None if it is no longer pending."""
        if due_at == info.due_at and not force:
            return info
        self._moved = True
        if not self.queue.reschedule(info.topic, info.id, run_at=_epoch_s(due_at)):
            return None
        moved = self.queue.get(info.topic, info.id)
        return moved if moved is not None and moved.state in _PENDING else None

    # -- the end -----------------------------------------------------------------------------

    def close(self, end: int | None) -> int:
        """Move the jobs left delayed earlier by the run's clock's lead on the
        wall clock (the clock moved on to ``end`` first), and parked jobs
        back. Returns that lead (ms, 0 when the clock is not ahead)."""
        self.follow(None)
        if end is not None:
            self.clock = max(self.clock, end)
        skip = max(self.clock - wall_ms(), 0)
        # soonest first: a move to a time that has passed lands on now, and
        # now only grows, so the jobs keep their order
        for job in sorted(self.jobs.values(), key=_time_order):
            due_at = max(job.due - skip, 0)
            if job.info.due_at > wall_ms() and job.info.due_at != due_at:
                self.queue.reschedule(job.info.topic, job.info.id, run_at=_epoch_s(due_at))
        return skip


def _delay(event: Event) -> int:
    """How long after its event a job was due (a lease that ran out: at once)."""
    return 0 if event.event is EventKind.EXPIRE else max(event.due_at - event.ts_ms, 0)
