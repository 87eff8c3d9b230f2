"""Every operation of the Redis backend, written once and without I/O.

Each method is a generator (steps.py): it yields the round trips it needs and
is sent their replies, and it returns the operation's result. ``RedisBackend``
drives them on blocking connections, ``AsyncRedisBackend`` on redis.asyncio;
which shards a call touches, its script arguments, how replies become results
and the replication check are here, in one copy."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from chronoq.backends.base import ReserveResult
from chronoq.backends.redis.codec import (
    id_key,
    info_from_record,
    key_id,
    pack_new_job,
    reservations,
)
from chronoq.backends.redis.far_ids import FarIds
from chronoq.backends.redis.hints import ShardHints
from chronoq.backends.redis.keys import logs_key, shard_keys, shard_of, topics_key
from chronoq.backends.redis.packing import Head
from chronoq.backends.redis.scripts import Scripts
from chronoq.backends.redis.steps import Pipeline, Steps
from chronoq.backends.redis.timers import TimerHolder
from chronoq.backoff import Backoff
from chronoq.errors import DurabilityError, LeaseLost
from chronoq.job import (
    JobInfo,
    JobLease,
    NewJob,
    PutResult,
    Reservation,
    leases_by_topic,
)
from chronoq.states import State

__all__ = ["RedisCore"]

_PUT_CHUNK = 200
# every other script may write: WAIT after it
_READ_ONLY = frozenset({"get", "far_jobs", "forecast", "limits_read", "groups"})
# scripts that can make a job available: the shards they touch are looked at
# by this process's next reserve (hints.py)
_AVAILING = frozenset({"put", "nack", "requeue", "reschedule", "pause", "limits", "group_pause"})


class RedisCore:
    """The operations on jobs in Redis 7+, sharded by a stable hash of their id."""

    def __init__(
        self,
        *,
        url: str,
        shards: int,
        prefix: str,
        events_max: int,
        replicas: int,
        replica_timeout_ms: int,
        horizon_ms: int | None = None,
        far_bucket_ms: int = 60_000,
        spread_slots: bool = False,
    ) -> None:
        self.url = url
        self.shards = shards
        self.spread_slots = spread_slots  # a cluster's tags (keys.py)
        self.prefix = prefix
        self.events_max = events_max
        self.horizon_ms = horizon_ms
        self.far_bucket_ms = far_bucket_ms
        # every call's ARGV[1] (lua/lib/1_keys.lua): the event cap and the far
        # tier's settings; with the tier off, no new far job, but those far already
        # are found and promoted, so the bucket width is always given
        self._call_head = f"{events_max}:{-1 if horizon_ms is None else horizon_ms}:{far_bucket_ms}"
        self.far_ids = FarIds(horizon_ms, far_bucket_ms)
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self.scripts = Scripts()
        self._key_cache: dict[tuple[str, int], list[str]] = {}
        self._heads: dict[tuple[str, str, int], Head] = {}
        self._topic_sets = (topics_key(prefix), logs_key(prefix))
        self.known_topics: set[str] = set()
        self.hints = ShardHints(shards)

    # -- plumbing ------------------------------------------------------------------

    def keys(self, topic: str, shard: int) -> list[str]:
        keys = self._key_cache.get((topic, shard))
        if keys is None:
            if len(self._key_cache) > 10_000:  # topics come and go: stay bounded
                self._key_cache.clear()
            keys = self._key_cache[topic, shard] = shard_keys(
                self.prefix, topic, shard, shards=self.shards, spread=self.spread_slots
            )
        return keys

    def _head(self, name: str, topic: str, shard: int) -> Head:
        """What every call of function ``name`` on this shard starts with, packed."""
        head = self._heads.get((name, topic, shard))
        if head is None:
            if len(self._heads) > 10_000:  # as _key_cache
                self._heads.clear()
            head = self._heads[name, topic, shard] = self.scripts.head(
                name, self.keys(topic, shard), self._call_head
            )
        return head

    def wake_keys(self, topic: str) -> list[str]:
        """The wake list of each shard of ``topic``: what a watcher blocks on."""
        return [self.keys(topic, shard)[7] for shard in range(self.shards)]

    def run(self, name: str, topic: str, shard: int, *args: Any) -> Steps[Any]:
        """One script call; its reply."""
        if self.replicas:  # then WAIT in the same round trip
            return (yield from self.run_many(name, topic, [(shard, list(args))]))[0]
        if name in _AVAILING and self.shards > 1:
            self.hints.mark(topic, shard)
        return (yield from self.scripts.call(self._head(name, topic, shard), args))

    def run_many(
        self,
        name: str,
        topic: str,
        calls: Iterable[tuple[int, list[Any]]],
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> Steps[list[Any]]:
        """One script call per ``(shard, args)``, in order, in one round trip;
        ``on_reply`` sees each reply as it arrives (see Scripts.run)."""
        if name in _AVAILING and self.shards > 1:
            calls = self._marking(topic, calls)
        keyed = ((self._head(name, topic, shard), args) for shard, args in calls)
        wait = None
        if self.replicas and name not in _READ_ONLY:
            wait = (self.replicas, self.replica_timeout_ms)
        replies, confirmed = yield from self.scripts.run(name, keyed, wait, on_reply)
        if wait is not None:
            self.check_replicas(name, confirmed)
        return replies

    def _marking(
        self, topic: str, calls: Iterable[tuple[int, list[Any]]]
    ) -> Iterator[tuple[int, list[Any]]]:
        for shard, args in calls:
            self.hints.mark(topic, shard)
            yield shard, args

    def check_replicas(self, name: str, confirmed: int) -> None:
        """DurabilityError when fewer replicas than asked confirmed a write."""
        if confirmed < self.replicas:
            raise DurabilityError(
                f"{self.url}: {name} was applied on the primary but only {confirmed} of "
                f"{self.replicas} replicas confirmed it within {self.replica_timeout_ms} ms; "
                "it may be lost if the primary fails now (a put can be retried safely "
                "with the same id)"
            )

    def register(self, topic: str) -> Steps[None]:
        if topic not in self.known_topics:
            replies = yield Pipeline([("SADD", key, topic) for key in self._topic_sets])
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            self.known_topics.add(topic)

    def by_shard(self, ids: Sequence[str]) -> dict[int, Sequence[int]]:
        """The indexes of ``ids`` grouped by the shard each id belongs to."""
        if self.shards == 1:
            return {0: range(len(ids))} if ids else {}
        groups: dict[int, list[int]] = {}
        for index, job_id in enumerate(ids):
            groups.setdefault(shard_of(job_id, self.shards), []).append(index)
        return cast(dict[int, Sequence[int]], groups)

    # -- producing ---------------------------------------------------------------------

    def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> Steps[list[PutResult]]:
        if topic not in self.known_topics:
            yield from self.register(topic)
        # 'g': the shard is under flow control from before the jobs (lib/6_flow.lua)
        flag = ("1" if replace else "0") + ("g" if any(job.group for job in jobs) else "")
        jobs = self.far_ids.apply(jobs)  # a generated id bound far names its bucket
        if len(jobs) == 1:  # a single put: the shortest path (its client time is most of it)
            job = jobs[0]
            shard = shard_of(job.id, self.shards)
            reply = yield from self.run("put", topic, shard, flag, pack_new_job(job))
            return [PutResult(job.id, reply[0] == 1, reply[1])]
        groups = self.by_shard([job.id for job in jobs])
        # calls of at most _PUT_CHUNK jobs keep Redis free for others between them
        # (about 1 ms each); each reply is read while Redis runs the next call
        chunks = [
            (shard, indexes[first : first + _PUT_CHUNK])
            for shard, indexes in groups.items()
            for first in range(0, len(indexes), _PUT_CHUNK)
        ]
        # packed lazily: each call is sent while the next is packed (15% more
        # jobs/s here). Packing cannot fail for a validated job, so no call is
        # sent for a batch that would fail half-way (test_records pins the limits)
        calls = (
            (shard, [flag, *map(pack_new_job, (jobs[i] for i in chunk))]) for shard, chunk in chunks
        )
        results: list[PutResult | None] = [None] * len(jobs)

        def read(index: int, reply: list[int]) -> None:  # while Redis runs the next call
            for n, i in enumerate(chunks[index][1]):
                results[i] = PutResult(jobs[i].id, reply[2 * n] == 1, reply[2 * n + 1])

        yield from self.run_many("put", topic, calls, read)
        return cast(list[PutResult], results)

    # -- consuming -------------------------------------------------------------------------

    def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: object = None
    ) -> Steps[ReserveResult]:
        """``waiter``: the caller's watcher; the script may hand it a shard's timer."""
        holder = waiter if isinstance(waiter, TimerHolder) else None
        token = holder.token if holder is not None else ""
        jobs: list[Reservation] = []
        wake: float | None = None
        sharded = self.shards > 1
        for shard in self.hints.due(topic) if sharded else (0,):
            asked = count - len(jobs)
            stamp = self.hints.stamp(topic, shard) if sharded else 0
            reply = yield from self.run(
                "reserve", topic, shard, asked, ttr_ms or 0, secrets.token_hex(8), token
            )
            wake_in = int(reply[0]) / 1000  # µs from the script
            if wake_in >= 0:
                wake = wake_in if wake is None else min(wake, wake_in)
            if holder is not None:
                if reply[1] == 1:
                    holder.timers.add(shard)
                else:
                    holder.timers.discard(shard)
            got = reservations(topic, reply, ttr_ms)
            if sharded:
                self.hints.seen(topic, shard, len(got), asked, wake_in / 1000, stamp)
            jobs += got
            if len(jobs) >= count:
                break
        if jobs:
            return ReserveResult(jobs, None)
        if sharded:
            soon = self.hints.next_wake(topic)
            wake = None if soon is None else soon * 1000
        return ReserveResult(jobs, wake)

    def hand_over(self, topic: str, shards: set[int], token: str) -> Steps[None]:
        """Hand on the timers a waiter held (it stops waiting: lua/handover.lua)."""
        yield from self.run_many("handover", topic, [(shard, [token]) for shard in sorted(shards)])

    # -- the lease calls ----------------------------------------------------------------------

    def ack_many(self, leases: Sequence[JobLease]) -> Steps[list[str]]:
        lost: list[str] = []
        for topic, held in leases_by_topic(leases).items():
            for shard, indexes in self.by_shard([lease.id for lease in held]).items():
                args = [v for i in indexes for v in (id_key(held[i].id), held[i].token)]
                reply = yield from self.run("ack", topic, shard, *args)
                lost += [key_id(job_id) for job_id in reply]
        return lost

    def nack(
        self,
        lease: JobLease,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> Steps[State]:
        delay = -1 if delay_ms is None else delay_ms
        curve = (round(backoff.base * 1000), backoff.factor, round(backoff.cap * 1000), jitter)
        reply = yield from self._leased("nack", lease, delay, error or "", *curve, "0")
        return State(reply.decode())

    def release(self, lease: JobLease, error: str | None) -> Steps[None]:
        """The nack script with its release flag (no delay, no backoff)."""
        yield from self._leased("nack", lease, 0, error or "", 0, 1, 0, 0, "1")

    def touch(self, lease: JobLease, ttr_ms: int | None) -> Steps[int]:
        return int((yield from self._leased("touch", lease, ttr_ms or 0)))

    def bury(self, lease: JobLease, error: str | None) -> Steps[None]:
        yield from self._leased("bury", lease, error or "")

    def _leased(self, name: str, lease: JobLease, *args: Any) -> Steps[Any]:
        """A script on one leased job (its id and token first); raises
        ``LeaseLost`` when the lease is not live (the script returned nil)."""
        topic, job_id, token = lease
        shard = shard_of(job_id, self.shards)
        reply = yield from self.run(name, topic, shard, id_key(job_id), token, *args)
        if reply is None:
            raise LeaseLost(topic, job_id)
        return reply

    # -- by id ------------------------------------------------------------------------------

    def get(self, topic: str, job_id: str) -> Steps[JobInfo | None]:
        reply = yield from self.run("get", topic, shard_of(job_id, self.shards), id_key(job_id))
        if reply is None:
            return None
        return info_from_record(topic, job_id, reply[1], int(reply[0]))

    def delete(self, topic: str, job_id: str) -> Steps[bool]:
        shard = shard_of(job_id, self.shards)
        return bool((yield from self.run("delete", topic, shard, id_key(job_id))))

    def reschedule(
        self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None
    ) -> Steps[bool]:
        moved = yield from self.run(
            "reschedule",
            topic,
            shard_of(job_id, self.shards),
            id_key(job_id),
            delay_ms,
            -1 if run_at_ms is None else run_at_ms,
        )
        return bool(moved)
