"""Jobs named by id alone, as the Youzan design and ouqiang/delay-queue name
them, over chronoq's jobs keyed by (topic, id).

The id -> topic mapping lives in the store, through the public queue API
only, so that every server process on one store and every restart sees it:
one *index job* per pushed id in the internal topic ``chronoq.byid``, with
the id of the job it names, never due, its payload ``{"topic": T}``
(``"stale"`` lists older topics of the id still to clean, see ``push``).
Both protocols share the index, so a job added with Youzan's ``add`` can be
finished with ouqiang's ``/finish``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chronoq.aio import AsyncQueue
from chronoq.calls import put_args
from chronoq.errors import InvalidInput
from chronoq.job import MAX_DURATION_S, Job, JobInfo, Reservation, validate_id, validate_topic
from chronoq.server.auth import Action, Token
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics
from chronoq.server.problems import ApiError

__all__ = ["BYID_TOPIC", "MAX_ATTEMPTS", "MAX_DELAY_S", "Entry", "IdJobs", "Refused", "trim"]

log = logging.getLogger("chronoq")

BYID_TOPIC = "chronoq.byid"
# Both originals redeliver a job every ttr until it is finished, without a
# count; chronoq's highest max_attempts is as close as it gets to "never dead".
MAX_ATTEMPTS = 1_000_000
MAX_DELAY_S = 1 << 31  # ouqiang's longest delay, 68 years
_NEVER = 253_402_300_799.0  # 9999-12-31T23:59:59Z: the latest run_at chronoq takes

# Go's strings.TrimSpace set (unicode.IsSpace). str.strip() would also strip
# \x1c-\x1f; ouqiang keeps them, so ids and topics trim the same in both.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def trim(text: str) -> str:
    """``text`` without leading and trailing white space, as Go trims it."""
    return text.strip(_GO_SPACE)


class Refused(Exception):
    """A request that cannot be done as asked; each protocol answers it in
    its own envelope (code 1, success false) with this message."""


@dataclass(frozen=True)
class Entry:
    """What the index says of an id: the topic of its job, and the topics of
    older pushes of the id whose jobs may still have to be deleted."""

    topic: str
    stale: tuple[str, ...] = ()

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.topic, *self.stale)

    def payload(self) -> dict[str, Any]:
        return (
            {"topic": self.topic, "stale": list(self.stale)}
            if self.stale
            else {"topic": self.topic}
        )


def _entry(payload: Any) -> Entry | None:
    if not isinstance(payload, dict):
        return None
    topic, stale = payload.get("topic"), payload.get("stale", [])
    if not isinstance(stale, list):
        return None
    try:  # written by push, or by anyone through the /v1 API
        return Entry(validate_topic(topic), tuple(validate_topic(t) for t in stale))
    except InvalidInput:
        return None


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


class IdJobs:
    """Push, pop, finish and get of jobs named by id, for both protocols."""

    def __init__(self, queue: AsyncQueue, polls: LongPolls, metrics: Metrics) -> None:
        self.q = queue
        self.polls = polls
        self.metrics = metrics

    # -- the index -------------------------------------------------------------

    async def lookup(self, job_id: str) -> Entry | None:
        """The index entry of ``job_id``; None for an id never pushed, finished,
        or one that chronoq could not have taken (so it cannot exist)."""
        try:
            validate_id(job_id)
        except InvalidInput:
            return None
        info = await self.q.get(BYID_TOPIC, job_id)
        if info is None:
            return None
        entry = _entry(info.payload)
        if entry is None:
            log.warning("index job %r of %s is not {topic, stale}: ignored", job_id, BYID_TOPIC)
        return entry

    async def _index(self, job_id: str, entry: Entry) -> None:
        # never due: no consumer of the index topic ever gets one
        await self.q.put(BYID_TOPIC, entry.payload(), id=job_id, run_at=_NEVER, replace=True)

    def check(self, token: Token | None, action: Action, job_id: str, entry: Entry) -> None:
        """Raises a 403 ApiError unless ``token`` may ``action`` on every topic
        of ``entry``. The message does not name the topic: a token should not
        learn the names of topics it has no access to."""
        if token is None:
            return
        for topic in entry.topics:
            if not token.allows(action, topic):
                raise ApiError(
                    403,
                    "forbidden",
                    f"token {token.name!r} may not {action.value} job {job_id!r}: "
                    "its topic is outside the token's topics",
                )

    # -- the operations ---------------------------------------------------------------

    async def push(
        self, topic: str, job_id: str, payload: Any, *, delay: float, ttr: float
    ) -> None:
        """Put the job ``job_id`` on ``topic``, replacing any job of that id
        (on this topic or, as the originals do, on another one)."""
        if topic == BYID_TOPIC:
            raise Refused(f"topic {BYID_TOPIC} is chronoq's index of job ids: use another topic")
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
        entry = await self.lookup(job_id)
        stale = tuple(sorted(set(entry.topics) - {topic})) if entry is not None else ()
        wanted = Entry(topic, stale)
        # The index is written first: a job the index does not name could not
        # be finished by id and would come back every ttr, for ever; an index
        # entry whose job is missing (the put below failed) is harmless.
        if entry != wanted:
            await self._index(job_id, wanted)
        [result] = await self.q.put_many(topic, [job], replace=True)
        if not result.created:
            raise Refused(
                f"job {job_id!r} is reserved by a consumer, so it is not replaced "
                "(chronoq never changes a job under a lease): push it again once it is "
                "finished or its ttr ran out"
            )
        self.metrics.transition(topic, "put")
        if stale:
            # the old topics are in the index until their jobs are gone: a
            # failure here leaves them to the next push or finish of the id
            await self._delete(job_id, stale)
            await self._index(job_id, Entry(topic))

    async def _delete(self, job_id: str, topics: Sequence[str]) -> bool:
        deleted = False
        for topic in topics:
            if await self.q.delete(topic, job_id):
                self.metrics.transition(topic, "delete")
                deleted = True
        return deleted

    async def remove(self, job_id: str, entry: Entry) -> bool:
        """Delete the job ``job_id`` (in any state: not fenced by a lease) and
        its index entry; True if a job was there."""
        # the job before its entry: if the second delete fails, what is left
        # is an entry without a job, not a job that no id call can reach
        deleted = await self._delete(job_id, entry.topics)
        await self.q.delete(BYID_TOPIC, job_id)
        return deleted

    async def get(self, job_id: str, entry: Entry) -> JobInfo | None:
        for topic in entry.topics:  # a stale topic holds it if a re-push failed half way
            info = await self.q.get(topic, job_id)
            if info is not None:
                return info
        return None

    async def pop(
        self, topics: Sequence[str], wait: float, hung_up: asyncio.Event | None
    ) -> Reservation | None:
        """Lease one due job of the first of ``topics`` that has one, with the
        job's own ttr, waiting up to ``wait`` seconds on all of them at once;
        None when the wait ends or the client hung up."""
        if len(topics) > 1:  # in the order given first, as ouqiang's BLPOP looks
            for topic in topics:
                jobs = (await self.q.reserve_once(topic, 1)).jobs
                if jobs:
                    return await self._hand_over(jobs, hung_up)
            if wait <= 0:
                return None
        stop = asyncio.Event()  # a topic got a job, or the client is gone
        relay = asyncio.ensure_future(_relay(hung_up, stop)) if hung_up is not None else None

        async def one(topic: str) -> list[Reservation]:
            jobs = await self.polls.reserve(topic, 1, None, wait, stop)
            if jobs:
                stop.set()
            return jobs

        try:
            found = await asyncio.gather(*(one(topic) for topic in topics))
        finally:
            if relay is not None:
                relay.cancel()
        return await self._hand_over([job for jobs in found for job in jobs], hung_up)

    async def _hand_over(
        self, jobs: list[Reservation], hung_up: asyncio.Event | None
    ) -> Reservation | None:
        """The first job, if anyone is there to take it; the others, leased
        by a race between topics, go back at once."""
        keep = jobs[:1] if hung_up is None or not hung_up.is_set() else []
        if len(jobs) > len(keep):
            await self.polls.give_back(jobs[len(keep) :])
        self.metrics.reserved(keep)
        return keep[0] if keep else None
