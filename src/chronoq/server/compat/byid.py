"""Jobs named by id alone, as the Youzan design and ouqiang/delay-queue name
them, over chronoq's jobs keyed by (topic, id).

The id -> topic mapping lives in the store, through the public queue API
only, so that every server process on one store and every restart sees it:
one *index job* per pushed id in the internal topic ``chronoq.byid``, with
the id of the job it names, never due, its payload ``{"topic": T}``
(``"stale"`` lists other topics that may hold a job of the id, see ``push``).
Both protocols share the index, so a job added with Youzan's ``add`` can be
finished with ouqiang's ``/finish``.

The rule every operation keeps, across server processes: an entry may name a
topic that holds no job of the id (harmless), never the reverse. The store
has no compare-and-set, so an entry is created with a create-only put, a
push reads it back after its put, and a finish looks for the job again after
deleting it; docs/compat.md says what this guarantees, and the window left
when an id moves between topics while it is pushed or finished elsewhere."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chronoq.aio import AsyncQueue
from chronoq.calls.checks import put_args
from chronoq.errors import ChronoqError, InvalidInput
from chronoq.job import (
    MAX_DURATION_S,
    YEAR_10000,
    Job,
    JobInfo,
    Reservation,
    validate_id,
    validate_topic,
)
from chronoq.server.auth import INTERNAL_PREFIX, Action, Token, is_internal
from chronoq.server.grouped_puts import GroupedPuts
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics
from chronoq.server.web.problems import ApiError

__all__ = [
    "BYID_TOPIC",
    "MAX_ATTEMPTS",
    "MAX_DELAY_S",
    "Entry",
    "IdJobs",
    "Refused",
    "check_not_internal",
]

log = logging.getLogger("chronoq")

BYID_TOPIC = "chronoq.byid"
# Both originals redeliver a job every ttr until it is finished, without a
# count; chronoq's highest max_attempts is as close as it gets to "never dead".
MAX_ATTEMPTS = 1_000_000
MAX_DELAY_S = 1 << 31  # ouqiang's longest delay, 68 years
_NEVER = float(YEAR_10000 - 1)  # 9999-12-31T23:59:59Z: the latest run_at chronoq takes
# each write of _ensure is read back; more rounds than this means another
# process rewrites the entry as fast as it is read: given up, and logged
_ENSURE_ROUNDS = 5


class Refused(Exception):
    """A request that cannot be done as asked; each protocol answers it in
    its own envelope (code 1, success false) with this message."""


def check_not_internal(topic: str) -> str:
    """Refuses one of the server's own topics (``chronoq.*``) to every
    command of the compatibility protocols, as the /v1 API does."""
    if is_internal(topic):
        raise Refused(
            f"topic {topic!r} is chronoq's own ({INTERNAL_PREFIX}*: {BYID_TOPIC} is its index "
            "of job ids): use another topic"
        )
    return topic


@dataclass(frozen=True)
class Entry:
    """What the index says of an id: the topic of its latest push, and other
    topics that may still hold a job of the id."""

    topic: str
    stale: tuple[str, ...] = ()

    @classmethod
    def of(cls, topics: Sequence[str]) -> Entry:
        return cls(topics[0], tuple(topics[1:]))

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.topic, *self.stale)

    def payload(self) -> dict[str, Any]:
        return {"topic": self.topic, **({"stale": list(self.stale)} if self.stale else {})}


def _entry(payload: Any) -> Entry | None:
    if not isinstance(payload, dict):
        return None
    topic, stale = payload.get("topic"), payload.get("stale", [])
    if not isinstance(stale, list):
        return None
    try:  # written by push; a store from before the /v1 API refused the topic may hold anything
        topics = [validate_topic(t) for t in (topic, *stale)]
    except InvalidInput:
        return None
    if any(map(is_internal, topics)):  # pushed before they were refused: not the API's
        return None
    return Entry.of(topics)


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


class IdJobs:
    """Push, pop, finish and get of jobs named by id, for both protocols."""

    def __init__(
        self,
        queue: AsyncQueue,
        polls: LongPolls,
        metrics: Metrics,
        puts: GroupedPuts | None = None,
    ) -> None:
        self.q = queue
        self.puts = puts or GroupedPuts(queue)  # the entries' and jobs' puts
        self.polls = polls
        self.metrics = metrics
        self._abandoned: set[asyncio.Task[Reservation | None]] = set()

    # -- the index -------------------------------------------------------------

    async def lookup(self, job_id: str) -> Entry | None:
        """The index entry of ``job_id``; None for an id never pushed, finished,
        or one that chronoq could not have taken (so it cannot exist)."""
        try:
            validate_id(job_id)
        except InvalidInput:
            return None
        return (await self._read(job_id))[1]

    async def _read(self, job_id: str) -> tuple[bool, Entry | None]:
        """Whether the index holds a job of ``job_id``, and its entry (None
        too when that job is not an entry)."""
        info = await self.q.get(BYID_TOPIC, job_id)
        if info is None:
            return False, None
        entry = _entry(info.payload)
        if entry is None:
            log.warning("index job %r of %s is not {topic, stale}: ignored", job_id, BYID_TOPIC)
        return True, entry

    async def _write(self, job_id: str, entry: Entry, *, replace: bool = True) -> bool:
        """Put the entry (never due: no consumer of the index topic gets one);
        with ``replace`` False only if there is none. True if it was written."""
        index_job = Job(entry.payload(), run_at=_NEVER, id=job_id)
        return (await self.puts.put(BYID_TOPIC, index_job, replace=replace)).created

    async def _ensure(self, job_id: str, topics: Sequence[str]) -> None:
        """Make the entry name each of ``topics`` (those it lacks first, as the
        newest), keeping what it names; each write is read back, since another
        process may have rewritten the entry between this read and write."""
        for _ in range(_ENSURE_ROUNDS):
            found, entry = await self._read(job_id)
            named = entry.topics if entry is not None else ()
            missing = tuple(topic for topic in topics if topic not in named)
            if not missing:
                return
            # create-only when there is none: of two processes creating it at
            # once, the second sees the first's entry and adds to it
            if await self._write(job_id, Entry.of((*missing, *named)), replace=found) and not found:
                return
        log.warning("the index entry of %r still misses one of %s: given up", job_id, topics)

    async def _reindex(self, job_id: str, topics: Sequence[str]) -> None:
        """Name in the entry each of ``topics`` that holds a job of the id now."""
        held = [topic for topic in topics if await self.q.get(topic, job_id) is not None]
        if held:
            await self._ensure(job_id, held)

    def check(self, token: Token | None, action: Action, job_id: str, entry: Entry) -> None:
        """Raises a 403 ApiError unless ``token`` may ``action`` on every topic
        of ``entry``. The message does not name the topic: a token should not
        learn the names of topics it has no access to."""
        if token is not None and not all(token.allows(action, t) for t in entry.topics):
            raise ApiError(
                403, "forbidden", f"token {token.name!r} may not {action.value} job "
                f"{job_id!r}: its topic is outside the token's topics",
            )  # fmt: skip

    def _may_replace(self, token: Token | None, job_id: str, entry: Entry) -> None:
        # a push deletes the id's job on the topics the entry names: it needs
        # the right to delete there, whatever its own topic
        if token is not None and not all(token.allows(Action.PUT, t) for t in entry.topics):
            raise ApiError(
                403, "forbidden", f"token {token.name!r} may not push job {job_id!r}: the id "
                "is taken on a topic outside the token's topics, and a push would replace the "
                "job there (ids are unique across topics): use another id",
            )  # fmt: skip

    # -- the operations ---------------------------------------------------------------

    def _job(self, topic: str, job_id: str, payload: Any, delay: float, ttr: float) -> Job:
        # the topic is not one of the server's own: each protocol's push checked
        # that first (check_not_internal), before the token
        if not 0 <= delay <= MAX_DELAY_S:  # NaN too
            raise Refused(f"delay must be from 0 to {MAX_DELAY_S} seconds, got {delay!r}")
        # ouqiang's longest delay is past chronoq's ten-year cap on a delay; a
        # due time that far ahead does not mind the server's clock
        far = delay > MAX_DURATION_S
        job = Job(
            payload,
            None if far else delay,
            time.time() + delay if far else None,
            job_id,
            ttr=ttr,
            max_attempts=MAX_ATTEMPTS,
        )
        # the whole job is checked before the index is written, so that the
        # index never names a topic that holds no job because the job was bad
        put_args(topic, [job], self.q.max_payload, batch=False)
        return job

    async def push(
        self,
        topic: str,
        job_id: str,
        payload: Any,
        *,
        delay: float,
        ttr: float,
        token: Token | None = None,
    ) -> None:
        """Put the job ``job_id`` on ``topic``, replacing any job of that id
        (on this topic or, as the originals do, on another one, which
        ``token`` must then be allowed to put on too: checked before anything
        is written)."""
        job = self._job(topic, job_id, payload, delay, ttr)
        # A new id, the usual push: its entry is created (create-only, so of
        # two pushes at once one creates it and the other takes the long way
        # below), then the job put, then the entry read back. No entry was
        # there, so nothing is replaced elsewhere and the token needs no more.
        if await self._write(job_id, Entry(topic), replace=False):
            await self._put_job(topic, job_id, job)
            await self._ensure(job_id, (topic,))  # a finish of the id may have taken the entry
            return
        found, entry = await self._read(job_id)
        old = entry.topics if entry is not None else ()
        if entry is not None:
            self._may_replace(token, job_id, entry)
        # The entry names the topic before the job is put: a job the index
        # does not name could not be finished by id and would come back every
        # ttr, for ever; an entry whose job is missing (the put failed) is harmless.
        if entry is None:
            if not await self._write(job_id, Entry(topic), replace=found):
                await self._ensure(job_id, (topic,))  # another push created it meanwhile
        elif topic not in old:
            # a move: the old topics stay named until their jobs are gone
            await self._write(job_id, Entry(topic, old))
        await self._put_job(topic, job_id, job)
        stale = tuple(t for t in old if t != topic)
        if not stale:
            # a finish of the id since the read above may have deleted the entry
            await self._ensure(job_id, (topic,))
            return
        # only the topics checked above: a failure here leaves them named, to
        # the next push or finish of the id
        await self._delete(job_id, stale)
        await self._forget(job_id, topic, stale)

    async def _put_job(self, topic: str, job_id: str, job: Job) -> None:
        if not (await self.puts.put(topic, job, replace=True)).created:
            raise Refused(
                f"job {job_id!r} is reserved by a consumer, so it is not replaced "
                "(chronoq never changes a job under a lease): push it again once it is "
                "finished or its ttr ran out"
            )
        self.metrics.transition(topic, "put")

    async def _forget(self, job_id: str, topic: str, cleared: Sequence[str]) -> None:
        """After a move to ``topic`` and the deletes on ``cleared``: the entry
        without them, then any of them named again if a push put a job there
        since (and ``topic`` if a finish took the entry meanwhile)."""
        entry = await self.lookup(job_id)
        if entry is not None:
            rest = tuple(t for t in entry.topics if t != topic and t not in cleared)
            if entry != Entry(topic, rest):
                await self._write(job_id, Entry(topic, rest))
        await self._reindex(job_id, (topic, *cleared))

    async def _delete(self, job_id: str, topics: Sequence[str]) -> bool:
        deleted = False
        for topic in topics:
            if await self.q.delete(topic, job_id):
                self.metrics.transition(topic, "delete")
                deleted = True
        return deleted

    async def remove(self, job_id: str, entry: Entry) -> bool:
        """Delete the job ``job_id`` (in any state: not fenced by a lease) on
        the topics of ``entry``, and its index entry; True if a job was there."""
        # the jobs before their entry: if the second delete fails, what is left
        # is an entry without a job, not a job that no id call can reach
        deleted = await self._delete(job_id, entry.topics)
        now = await self.lookup(job_id)
        if now is not None and not set(now.topics) <= set(entry.topics):
            return deleted  # a push to another topic meanwhile: its entry stays
        if now is not None:
            await self.q.delete(BYID_TOPIC, job_id)
        # a push of the id may have put its job after the deletes above, and
        # read its entry back before the delete of the entry: named again
        await self._reindex(job_id, entry.topics)
        return deleted

    async def get(self, job_id: str, entry: Entry) -> JobInfo | None:
        for topic in entry.topics:  # a stale topic holds it if a re-push failed half way
            info = await self.q.get(topic, job_id)
            if info is not None:
                return info
        return None

    # -- pop -------------------------------------------------------------------------

    async def pop(
        self, topics: Sequence[str], wait: float, hung_up: asyncio.Event | None
    ) -> Reservation | None:
        """Lease one due job of the first of ``topics`` that has one, with the
        job's own ttr, waiting up to ``wait`` seconds on all of them at once;
        None when the wait ends or the client hung up. The work runs in a task
        of its own: if this call is cancelled, it is stopped, and the job it
        may still lease goes back at once."""
        stop = asyncio.Event()  # the client is gone or this call was cancelled
        relay = asyncio.ensure_future(_relay(hung_up, stop)) if hung_up is not None else None
        work = asyncio.ensure_future(self._pop(topics, wait, hung_up, stop))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            self._abandoned.add(work)  # a task nobody refers to may be collected
            work.add_done_callback(self._give_back_abandoned)
            raise
        finally:
            if relay is not None:
                relay.cancel()

    def giver(self, job: Reservation) -> Callable[[], None]:
        """For ``Reply.undelivered``: give ``job`` back now."""
        return lambda: self.polls.give_back_later([job])

    def _give_back_abandoned(self, work: asyncio.Task[Reservation | None]) -> None:
        self._abandoned.discard(work)
        if work.cancelled():
            return
        if work.exception() is not None:
            log.warning("a cancelled pop failed: %s", work.exception())
        elif (job := work.result()) is not None:
            self.polls.give_back_later([job])

    async def _pop(
        self,
        topics: Sequence[str],
        wait: float,
        hung_up: asyncio.Event | None,
        stop: asyncio.Event,
    ) -> Reservation | None:
        # in the order given, as ouqiang's BLPOP looks; stopped through
        # ``stop``, not cancelled: a stopped LongPolls.reserve gives back what
        # it leases meanwhile, where a cancel landing after the lease would lose it
        jobs = await self.polls.reserve(tuple(topics), 1, None, wait, stop)
        return await self._hand_over(jobs, hung_up)

    async def _hand_over(
        self, jobs: list[Reservation], hung_up: asyncio.Event | None
    ) -> Reservation | None:
        """The job, if anyone is there to take it; else it goes back at once."""
        keep = jobs[:1] if hung_up is None or not hung_up.is_set() else []
        if len(jobs) > len(keep):
            await self.polls.give_back(jobs[len(keep) :])
        self.metrics.reserved(keep)
        if not keep:
            return None
        if keep[0].max_attempts == MAX_ATTEMPTS:  # pushed here: its finish is by id
            try:
                # a job the index lost to a race (docs/compat.md) is named again
                await self._ensure(keep[0].id, (keep[0].topic,))
            except ChronoqError as exc:
                log.warning("could not check the index entry of %r: %s", keep[0].id, exc)
        return keep[0]
