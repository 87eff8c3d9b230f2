"""The Redis backend: every transition is one Lua script (lua/*.lua), one round
trip, on the keys of one ``{topic:shard}`` hash slot."""

from __future__ import annotations

import heapq
import itertools
import json
import secrets
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import urlencode, urlsplit

import redis
from redis.connection import URL_QUERY_ARGUMENT_PARSERS
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chronoq.backends import StoreURL
from chronoq.backends.base import Backend, ReserveResult, Watcher
from chronoq.backends.redis.codec import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TTR_MS,
    F_MAX,
    F_TTR,
    F_UF,
    decode_entry,
    id_key,
    info_from_record,
    key_id,
    leased_fields,
)
from chronoq.backends.redis.keys import shard_keys, shard_of, topics_key
from chronoq.backends.redis.link import Link
from chronoq.backends.redis.scripts import Scripts
from chronoq.backends.redis.watcher import RedisWatcher
from chronoq.backoff import Backoff
from chronoq.errors import (
    BackendUnavailable,
    ChronoqError,
    DurabilityError,
    InvalidInput,
    LeaseLost,
)
from chronoq.job import Event, EventPage, JobInfo, NewJob, PutResult, Reservation, decode_payload
from chronoq.states import State

__all__ = ["RedisBackend"]

_PURGE_BATCH = 1000
_PUT_CHUNK = 200
_PUT_HEAD = struct.Struct(">BqqhBH")  # see lua/put.lua
_U32 = struct.Struct(">I")
_READ_ONLY = frozenset({"get"})  # every other script may write: WAIT after it
# query options redis-py's from_url understands: passed on to it
_DRIVER_OPTIONS = frozenset(URL_QUERY_ARGUMENT_PARSERS) | {
    "client_name",
    "username",
    "password",
    "protocol",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
}


def _redacted(url: str) -> str:
    """The URL without its query and without any password."""
    base = url.split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return base
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"


def _driver_url(url: StoreURL, options: dict[str, str]) -> str:
    """The URL for redis-py: chronoq's options taken out, the db checked."""
    base = url.raw.split("?", 1)[0]
    if url.scheme in ("redis", "rediss"):
        try:
            parts = urlsplit(base)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {_redacted(url.raw)!r}: {exc}") from None
        db = parts.path.strip("/")
        if parts.path not in ("", "/") and not (db.isdigit() and "/" not in db):
            raise InvalidInput(
                f"bad Redis URL {_redacted(url.raw)!r}: the path must be a database "
                f"number, as in redis://host:6379/0, not {parts.path!r}"
            )
    return base + ("?" + urlencode(options) if options else "")


class RedisBackend(Backend):
    """Jobs in Redis 7+, sharded by a stable hash of their id."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        url: str,
        shards: int = 1,
        prefix: str = "chronoq",
        events_max: int = 100_000,
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
    ) -> None:
        self.url = url
        self._client = client
        self._shards = shards
        self._prefix = prefix
        self._events_max = events_max
        self._replicas = replicas
        self._replica_timeout_ms = replica_timeout_ms
        self._scripts = Scripts()
        self._link = Link(client)
        self._key_cache: dict[tuple[str, int], list[str]] = {}
        self._known_topics: set[str] = set()
        self._next_shard = 0

    @classmethod
    def from_url(cls, url: StoreURL) -> RedisBackend:
        options = StoreURL(url.scheme, url.raw, dict(url.options))
        shards = options.pop_int("shards", 1, minimum=1)
        events_max = options.pop_int("events_max", 100_000, minimum=1)
        prefix = options.options.pop("prefix", "chronoq")
        replicas = options.pop_int("replicas", 0)
        replica_timeout_ms = options.pop_int("replica_timeout_ms", 1000, minimum=1)
        unknown = set(options.options) - _DRIVER_OPTIONS
        if unknown:
            raise InvalidInput(
                f"unknown store URL option(s): {', '.join(sorted(unknown))} (chronoq takes "
                "shards, prefix, events_max, replicas, replica_timeout_ms; redis-py takes "
                + ", ".join(sorted(_DRIVER_OPTIONS))
                + ")"
            )
        try:
            client = redis.Redis.from_url(_driver_url(url, options.options))
        except ValueError as exc:
            raise InvalidInput(f"bad Redis URL {_redacted(url.raw)!r}: {exc}") from None
        return cls(
            client,
            url=_redacted(url.raw),
            shards=shards,
            prefix=prefix,
            events_max=events_max,
            replicas=replicas,
            replica_timeout_ms=replica_timeout_ms,
        )

    # -- plumbing ------------------------------------------------------------------

    def _keys(self, topic: str, shard: int) -> list[str]:
        keys = self._key_cache.get((topic, shard))
        if keys is None:
            if len(self._key_cache) > 10_000:  # topics come and go: stay bounded
                self._key_cache.clear()
            keys = self._key_cache[topic, shard] = shard_keys(self._prefix, topic, shard)
        return keys

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise BackendUnavailable(f"{self.url}: {exc}") from None
        except ResponseError as exc:
            raise ChronoqError(f"{self.url}: Redis refused a chronoq script: {exc}") from None

    def _run(self, name: str, topic: str, shard: int, *args: Any) -> Any:
        return self._run_many(name, topic, [(shard, list(args))])[0]

    def _run_many(
        self,
        name: str,
        topic: str,
        calls: Iterable[tuple[int, list[Any]]],
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """One script call per ``(shard, args)``, in order, in one round trip;
        ``on_reply`` sees each reply as it arrives (see Scripts.run)."""
        events_max = self._events_max
        keyed = ((self._keys(topic, shard), [events_max, *args]) for shard, args in calls)
        wait = None
        if self._replicas and name not in _READ_ONLY:
            wait = (self._replicas, self._replica_timeout_ms)
        with self._errors():
            replies, confirmed = self._scripts.run(self._link, name, keyed, wait, on_reply)
        if wait is not None and confirmed < self._replicas:
            raise DurabilityError(
                f"{self.url}: {name} was applied on the primary but only {confirmed} of "
                f"{self._replicas} replicas confirmed it within {self._replica_timeout_ms} ms; "
                "it may be lost if the primary fails now (a put can be retried safely "
                "with the same id)"
            )
        return replies

    def _register(self, topic: str) -> None:
        if topic not in self._known_topics:
            with self._errors():
                self._client.sadd(topics_key(self._prefix), topic)
            self._known_topics.add(topic)

    def _by_shard(self, ids: Sequence[str]) -> dict[int, Sequence[int]]:
        """The indexes of ``ids`` grouped by the shard each id belongs to."""
        if self._shards == 1:
            return {0: range(len(ids))} if ids else {}
        groups: dict[int, list[int]] = {}
        for index, job_id in enumerate(ids):
            groups.setdefault(shard_of(job_id, self._shards), []).append(index)
        return cast(dict[int, Sequence[int]], groups)

    # -- producing ---------------------------------------------------------------------

    def put_many(self, topic: str, jobs: Sequence[NewJob], replace: bool) -> list[PutResult]:
        self._register(topic)
        flag = "1" if replace else "0"
        groups = self._by_shard([job.id for job in jobs])
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
            (shard, [flag, *map(self._packed, (jobs[i] for i in chunk))]) for shard, chunk in chunks
        )
        results: list[PutResult | None] = [None] * len(jobs)

        def read(index: int, reply: list[int]) -> None:  # while Redis runs the next call
            for n, i in enumerate(chunks[index][1]):
                results[i] = PutResult(jobs[i].id, reply[2 * n] == 1, reply[2 * n + 1])

        self._run_many("put", topic, calls, read)
        return cast(list[PutResult], results)

    @staticmethod
    def _packed(job: NewJob) -> bytes:
        """One argument per job: redis-py's per-argument packing was most of the
        cost. The client packs the record's optional fields and payload; the
        script adds the head (due time, creation time, seq: the server's)."""
        key = id_key(job.id)
        flags, rest = 0, b""
        if job.ttr_ms != DEFAULT_TTR_MS:
            flags, rest = F_TTR, job.ttr_ms.to_bytes(6, "big")
        if job.max_attempts != DEFAULT_MAX_ATTEMPTS:
            flags, rest = flags | F_MAX, rest + _U32.pack(job.max_attempts)
        if job.unique_for_ms:
            flags, rest = flags | F_UF, rest + job.unique_for_ms.to_bytes(6, "big")
        head = _PUT_HEAD.pack(
            job.generated,
            job.delay_ms,
            -1 if job.run_at_ms is None else job.run_at_ms,
            job.priority,
            flags,
            len(key),
        )
        return b"".join((head, key, rest, job.payload))

    # -- consuming -------------------------------------------------------------------------

    def reserve(
        self, topic: str, count: int, ttr_ms: int | None, waiter: Watcher | None = None
    ) -> ReserveResult:
        token = waiter.token if isinstance(waiter, RedisWatcher) else ""
        jobs: list[Reservation] = []
        wake: float | None = None
        start = self._next_shard
        self._next_shard = (start + 1) % self._shards
        for step in range(self._shards):
            shard = (start + step) % self._shards
            reply = self._run(
                "reserve",
                topic,
                shard,
                count - len(jobs),
                ttr_ms or 0,
                secrets.token_hex(8),
                token,
            )
            wake_in = int(reply[0]) / 1000  # µs from the script
            if wake_in >= 0:
                wake = wake_in if wake is None else min(wake, wake_in)
            if token:
                timers = cast(RedisWatcher, waiter).timers
                if reply[1] == 1:
                    timers.add(shard)
                else:
                    timers.discard(shard)
            jobs += self._reservations(topic, reply, ttr_ms)
            if len(jobs) >= count:
                break
        return ReserveResult(jobs, None if jobs else wake)

    @staticmethod
    def _reservations(topic: str, reply: list[Any], ttr_ms: int | None) -> list[Reservation]:
        """The jobs of a reserve reply: its lease token, then id and record pairs."""
        if len(reply) < 5:
            return []
        lease = reply[2].decode()
        out = []
        for b in range(3, len(reply), 2):
            attempts, deadline, due_at, priority, max_attempts, ttr, created, payload = (
                leased_fields(reply[b + 1])
            )
            out.append(
                Reservation(
                    topic,
                    key_id(reply[b]),
                    decode_payload(payload),
                    attempts,
                    lease,
                    deadline,
                    due_at,
                    priority,
                    max_attempts,
                    (ttr_ms or ttr) / 1000,
                    created,
                )
            )
        return out

    def watch(self, topic: str) -> Watcher:
        return RedisWatcher(
            self._client,
            self._link,
            [self._keys(topic, shard)[7] for shard in range(self._shards)],
            self._errors,
            lambda shards, token: self._release_timers(topic, shards, token),
        )

    def _release_timers(self, topic: str, shards: set[int], token: str) -> None:
        self._run_many("release", topic, [(shard, [token]) for shard in sorted(shards)])

    def ack_many(self, topic: str, leases: Sequence[tuple[str, str]]) -> list[str]:
        lost: list[str] = []
        for shard, indexes in self._by_shard([job_id for job_id, _ in leases]).items():
            args = [v for i in indexes for v in (id_key(leases[i][0]), leases[i][1])]
            lost += [key_id(job_id) for job_id in self._run("ack", topic, shard, *args)]
        return lost

    def nack(
        self,
        topic: str,
        job_id: str,
        lease: str,
        delay_ms: int | None,
        error: str | None,
        backoff: Backoff,
        jitter: float,
    ) -> State:
        reply = self._run(
            "nack",
            topic,
            shard_of(job_id, self._shards),
            id_key(job_id),
            lease,
            -1 if delay_ms is None else delay_ms,
            error or "",
            round(backoff.base * 1000),
            backoff.factor,
            round(backoff.cap * 1000),
            jitter,
        )
        if reply is None:
            raise LeaseLost(topic, job_id)
        return State(reply.decode())

    def touch(self, topic: str, job_id: str, lease: str, ttr_ms: int | None) -> int:
        reply = self._run(
            "touch", topic, shard_of(job_id, self._shards), id_key(job_id), lease, ttr_ms or 0
        )
        if reply is None:
            raise LeaseLost(topic, job_id)
        return int(reply)

    def bury(self, topic: str, job_id: str, lease: str, error: str | None) -> None:
        reply = self._run(
            "bury", topic, shard_of(job_id, self._shards), id_key(job_id), lease, error or ""
        )
        if reply is None:
            raise LeaseLost(topic, job_id)

    # -- by id ------------------------------------------------------------------------------

    def get(self, topic: str, job_id: str) -> JobInfo | None:
        reply = self._run("get", topic, shard_of(job_id, self._shards), id_key(job_id))
        if reply is None:
            return None
        return info_from_record(topic, job_id, reply[1], int(reply[0]))

    def delete(self, topic: str, job_id: str) -> bool:
        return bool(self._run("delete", topic, shard_of(job_id, self._shards), id_key(job_id)))

    def reschedule(self, topic: str, job_id: str, delay_ms: int, run_at_ms: int | None) -> bool:
        return bool(
            self._run(
                "reschedule",
                topic,
                shard_of(job_id, self._shards),
                id_key(job_id),
                delay_ms,
                -1 if run_at_ms is None else run_at_ms,
            )
        )

    # -- topic-wide ---------------------------------------------------------------------------

    def stats(self, topic: str) -> dict[str, Any]:
        totals = {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0}
        paused = False
        next_due: int | None = None
        for shard in range(self._shards):
            delayed, ready, reserved, dead, is_paused, first = (
                int(v) for v in self._run("stats", topic, shard)
            )
            for name, value in zip(totals, (delayed, ready, reserved, dead), strict=True):
                totals[name] += value
            paused = paused or bool(is_paused)
            if first >= 0:
                next_due = first if next_due is None else min(next_due, first)
        return {**totals, "total": sum(totals.values()), "paused": paused, "next_due_at": next_due}

    def topics(self) -> list[str]:
        with self._errors():
            names = cast(set[bytes], self._client.smembers(topics_key(self._prefix)))
        return sorted(name.decode() for name in names)

    def dead(self, topic: str, limit: int) -> list[JobInfo]:
        found: list[JobInfo] = []
        for shard in range(self._shards):
            reply = self._run("dead", topic, shard, limit)
            now = int(reply[0])
            for b in range(1, len(reply), 2):
                info = info_from_record(topic, key_id(reply[b]), reply[b + 1], now)
                if info is not None:
                    found.append(info)
        return found[:limit]

    def requeue(self, topic: str, ids: Sequence[str] | None) -> int:
        if ids is not None:
            return sum(
                int(self._run("requeue", topic, shard, 0, *(id_key(ids[i]) for i in indexes)))
                for shard, indexes in self._by_shard(ids).items()
            )
        moved = 0
        for shard in range(self._shards):
            while (n := int(self._run("requeue", topic, shard, _PURGE_BATCH))) > 0:
                moved += n
        return moved

    def purge(self, topic: str) -> int:
        deleted = 0
        for shard in range(self._shards):
            while (n := int(self._run("purge", topic, shard, _PURGE_BATCH))) >= 0:
                deleted += n
        if not self.stats(topic)["paused"]:
            with self._errors():
                self._client.srem(topics_key(self._prefix), topic)
            self._known_topics.discard(topic)
        return deleted

    def set_paused(self, topic: str, paused: bool) -> None:
        if paused:
            self._register(topic)
        for shard in range(self._shards):
            self._run("pause", topic, shard, "1" if paused else "0")

    def events(self, topic: str | None, cursor: str | None, limit: int) -> EventPage:
        # the cursor maps each stream to the seq of the last event read from it
        positions = _parse_cursor(cursor)
        topics = [topic] if topic is not None else self.topics()
        streams: list[list[tuple[str, Event]]] = []
        with self._errors():
            for name in topics:
                for shard in range(self._shards):
                    key = self._keys(name, shard)[6]
                    after = positions.get(key, 0)
                    # an entry's id is its last event's seq: from the entry holding after + 1
                    entries = cast(
                        list[tuple[bytes, dict[bytes, bytes]]],
                        self._client.xrange(key, f"{after + 1}-0", "+", count=limit),
                    )
                    streams.append(
                        [
                            (key, event)
                            for entry_id, fields in entries
                            for event in decode_entry(name, entry_id, fields)
                            if event.seq > after
                        ]
                    )
        # oldest first across streams; each stream stays in its own order, so a
        # page is a prefix of every stream and the cursor loses nothing
        merged = heapq.merge(*streams, key=lambda item: (item[1].ts_ms, item[1].seq))
        page = list(itertools.islice(merged, limit))
        for key, event in page:
            positions[key] = event.seq
        return EventPage([event for _, event in page], json.dumps(positions, sort_keys=True))

    def close(self) -> None:
        self._link.close()
        self._client.close()


def _parse_cursor(cursor: str | None) -> dict[str, int]:
    if cursor is None:
        return {}
    try:
        positions = json.loads(cursor)
    except (TypeError, ValueError):
        positions = None
    if not isinstance(positions, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 0 for k, v in positions.items()
    ):
        raise InvalidInput(
            f"bad event cursor {cursor!r}: pass the cursor of a previous page, or None"
        )
    return positions
