"""The values chronoq passes around, their validation and payload encoding. No I/O."""

from __future__ import annotations

import json
import json.scanner
import math
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from chronoq.errors import InvalidInput, InvalidJob, PayloadTooLarge
from chronoq.ids import new_id
from chronoq.names import (
    ID_PATTERN,
    NEW_ID_PATTERN,
    TOPIC_PATTERN,
    validate_id,
    validate_new_id,
    validate_topic,
)
from chronoq.states import EventKind, State

__all__ = [
    "DEFAULT_MAX_PAYLOAD",
    "ID_PATTERN",
    "NEW_ID_PATTERN",
    "TOPIC_PATTERN",
    "YEAR_10000",
    "Event",
    "EventPage",
    "Job",
    "JobInfo",
    "JobLease",
    "JobPage",
    "LogRead",
    "LogShard",
    "NewJob",
    "PutResult",
    "Reservation",
    "decode_payload",
    "duration_ms",
    "encode_payload",
    "leases_by_topic",
    "prepare_job",
    "run_at_ms",
    "shard_of",
    "validate_id",
    "validate_new_id",
    "validate_topic",
]

DEFAULT_MAX_PAYLOAD = 1024 * 1024
MAX_PRIORITY = 1000
YEAR_10000 = 253_402_300_800  # epoch seconds: a run_at from there on is a unit mistake
MAX_DURATION_S = 10 * 365 * 24 * 3600  # ten years: beyond that it is a unit mistake
_BYTES_TAG = b"\x00"  # JSON text never starts with NUL, so one byte tells bytes apart
_BINARY = (bytes, bytearray, memoryview)


def _json_encoder() -> Callable[[Any], str]:
    """Compact JSON text; the C scanner built once (``JSONEncoder.encode``
    rebuilds it per call, a third of the cost of a small payload)."""
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if c_make_encoder is None:  # pragma: no cover - Pythons without the C speedups
        return encoder.encode
    scan = c_make_encoder(
        None, encoder.default, encode_basestring, None, ":", ",", False, False, False
    )

    def to_json(value: Any) -> str:
        try:
            return "".join(scan(value, 0))
        except RecursionError:
            raise ValueError("circular reference") from None

    return to_json


_to_json = _json_encoder()
# the C scanner behind json.loads, without its per-call checks (the text is ours)
_from_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Job:
    """A job to put. ``delay`` (seconds) and ``run_at`` (datetime, naive = UTC,
    or epoch seconds) are exclusive; neither means due now. ``id=None`` makes a
    ULID. ``ttr`` and ``unique_for`` are seconds."""

    payload: Any = None
    delay: float | None = None
    run_at: datetime | float | None = None
    id: str | None = None
    priority: int = 0
    ttr: float = 30.0
    max_attempts: int = 5
    unique_for: float = 0.0


class NewJob(NamedTuple):
    """A validated, encoded job as backends receive it. The due time is
    ``max(run_at_ms, now)`` when ``run_at_ms`` is set, else ``now + delay_ms``,
    with ``now`` taken from the store's clock. ``generated`` says the id is a
    fresh ULID made by this process, which no stored job can have: backends
    may skip the duplicate check for it."""

    id: str
    payload: bytes
    delay_ms: int
    run_at_ms: int | None
    priority: int
    ttr_ms: int
    max_attempts: int
    unique_for_ms: int
    generated: bool = False


@dataclass(frozen=True, slots=True)
class PutResult:
    """What a put did: ``created`` is False when a job with this id already
    existed (or was remembered through ``unique_for``) and was left as it was;
    ``due_at`` is then the existing job's due time (ms since epoch)."""

    id: str
    created: bool
    due_at: int


@dataclass(frozen=True, slots=True)
class Reservation:
    """A job leased to this consumer until ``deadline`` (ms since epoch).
    Pass it to ``ack``, ``nack``, ``touch`` or ``bury``."""

    topic: str
    id: str
    payload: Any
    attempts: int
    lease: str
    deadline: int
    due_at: int
    priority: int
    max_attempts: int
    ttr: float
    created_at: int


class JobLease(NamedTuple):
    """One lease of one job, as the lease calls of a backend take it (ack,
    nack, release, touch, bury): from a ``Reservation``, or from the three
    values a consumer elsewhere was given (``topic``, ``id``, ``lease``)."""

    topic: str
    id: str
    token: str


def leases_by_topic(leases: Iterable[JobLease]) -> dict[str, list[JobLease]]:
    """Leases grouped by topic, each group in the order given (``ack_many``)."""
    groups: dict[str, list[JobLease]] = {}
    for lease in leases:
        groups.setdefault(lease.topic, []).append(lease)
    return groups


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of one job, as ``get`` and ``dead`` return it."""

    topic: str
    id: str
    state: State
    payload: Any
    due_at: int
    priority: int
    ttr: float
    max_attempts: int
    attempts: int
    created_at: int
    last_error: str | None
    deadline: int | None
    unique_for: float


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the event log (docs/contract.md §7). ``seq`` increases within a log."""

    seq: int
    ts_ms: int
    topic: str
    id: str
    event: EventKind
    attempt: int
    due_at: int
    priority: int
    lag_ms: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class EventPage:
    """A page of events and the cursor to pass for the next page."""

    events: list[Event]
    cursor: str


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of a topic's jobs and the cursor to pass for the next page
    (None: there is no more)."""

    jobs: list[JobInfo]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class LogShard:
    """One separately numbered part of a store's event log. SQLite keeps one
    for every topic (``name`` "events", ``shard`` 0, ``shared``; ``topic``
    selects the events of one topic in it, or None); Redis one per topic and
    shard (``name``: its stream's key, such as "chronoq:{orders:3}:events").
    Within one, events are numbered 1, 2, 3... without holes, except where the
    store trimmed events (docs/contract.md §7)."""

    name: str
    topic: str | None
    shard: int
    shared: bool = False  # it holds the events of other topics too


@dataclass(frozen=True, slots=True)
class LogRead:
    """Events of one log shard after a seq, oldest first, up to the first
    hole in the numbering. ``lost``: how many events after that seq and before
    ``events[0]`` (or ``upto``) the store had trimmed before they could be
    read. ``upto``: the seq this read is complete up to (the last event's, or
    further when the rest of the log holds none of the events asked for):
    the ``after`` of the next read. ``head``: the seq of the shard's newest
    event (0 for an empty log; below ``after`` when the store lost or replaced
    its log, and then the read is empty)."""

    events: list[Event]
    lost: int
    head: int
    upto: int


def _finite(value: int | float) -> bool:
    """math.isfinite, and False for an int too large for a float (it raises)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def duration_ms(value: object, name: str, *, minimum_ms: int = 0) -> int:
    """Seconds (int or float, ms resolution) to whole ms, checked against ``minimum_ms``."""
    if type(value) is float or type(value) is int:  # the hot path; excludes bool
        if 0 <= value <= MAX_DURATION_S:  # NaN fails this too
            ms = round(value * 1000)
            if ms >= minimum_ms:
                return ms
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not _finite(value):
            raise InvalidInput(
                f"{name} must be between 0 and {MAX_DURATION_S} seconds, got {value!r}"
            )
        return duration_ms(float(value), name, minimum_ms=minimum_ms)  # numpy & co.
    else:
        raise InvalidInput(f"{name} must be a number of seconds, got {value!r}")
    if not _finite(value) or not 0 <= value <= MAX_DURATION_S:
        raise InvalidInput(f"{name} must be between 0 and {MAX_DURATION_S} seconds, got {value!r}")
    raise InvalidInput(f"{name} must be at least {minimum_ms / 1000:g} s, got {value!r}")


def run_at_ms(value: object) -> int:
    """A datetime (naive means UTC) or epoch seconds to epoch ms."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return math.floor(moment.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise InvalidInput(f"run_at must be a datetime or epoch seconds, got {value!r}")
    if not 0 <= value < YEAR_10000:  # beyond that it is ms or µs passed as seconds
        raise InvalidInput(
            f"run_at {value!r} is not an epoch time in seconds before the year 10000 "
            "(was it in milliseconds?)"
        )
    return math.floor(value * 1000)


def encode_payload(payload: Any, max_bytes: int = DEFAULT_MAX_PAYLOAD) -> bytes:
    """A JSON value becomes its compact UTF-8 text; bytes are kept as they are.
    Over ``max_bytes`` (the JSON text, or the bytes) raises ``PayloadTooLarge``."""
    # a dict, the usual payload, skips the isinstance test (slow for a union)
    if type(payload) is dict or not isinstance(payload, _BINARY):
        try:
            data = _to_json(payload).encode()
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"payload is not JSON-serializable ({exc}): pass a JSON value "
                "(dict, list, str, int, float, bool, None) or bytes"
            ) from None
        size = len(data)  # JSON text never starts with the tag
    else:
        data = _BYTES_TAG + bytes(payload)
        size = len(data) - 1
    if size > max_bytes:
        raise PayloadTooLarge(
            f"payload is {size} bytes, over the limit of {max_bytes}: store large "
            "data elsewhere and put a reference, or raise max_payload in the store URL",
            size,
            max_bytes,
        )
    return data


def decode_payload(data: bytes) -> Any:
    if data[:1] == _BYTES_TAG:
        return data[1:]
    return _from_json(data.decode(), 0)[0]


def _check_int(value: object, name: str, low: int, high: int) -> int:
    if type(value) is int and low <= value <= high:
        return value
    raise InvalidInput(f"{name} must be an integer from {low} to {high}, got {value!r}")


# Job's defaults: a job that keeps one (the usual case) skips its check. The
# integers are told by identity, so False for 0 or 5.0 for 5 still meet the
# checks; the floats by exact type and value (a 30.0 in a signature elsewhere
# is another object), which gives the same result as their checks.
_DEFAULT = Job()
_TTR_MS = duration_ms(_DEFAULT.ttr, "ttr", minimum_ms=1)
_UNIQUE_FOR_MS = duration_ms(_DEFAULT.unique_for, "unique_for")
# NewJob(...) with keywords costs as much as all the checks; the plain tuple
# constructor makes the same value.
_new_job = tuple.__new__


def prepare_job(job: Job, max_payload: int, index: int | None = None) -> NewJob:
    """Validate ``job`` and encode it for a backend; raises ``InvalidJob``."""
    try:
        if not isinstance(job, Job):
            raise InvalidInput(f"expected a chronoq.Job, got {type(job).__name__}")
        job_id, delay, run_at = job.id, job.delay, job.run_at
        if delay is not None and run_at is not None:
            raise InvalidInput("give delay or run_at, not both")
        # in the order of NewJob's fields, which is the order of the checks
        new = new_id() if job_id is None else validate_new_id(job_id)
        payload = encode_payload(job.payload, max_payload)
        delay_ms = 0 if delay is None else duration_ms(delay, "delay")
        at_ms = None if run_at is None else run_at_ms(run_at)
        default = _DEFAULT
        priority = job.priority
        if priority is not default.priority:
            priority = _check_int(priority, "priority", -MAX_PRIORITY, MAX_PRIORITY)
        ttr = job.ttr
        if type(ttr) is float and ttr == default.ttr:
            ttr_ms = _TTR_MS
        else:
            ttr_ms = duration_ms(ttr, "ttr", minimum_ms=1)
        attempts = job.max_attempts
        if attempts is not default.max_attempts:
            attempts = _check_int(attempts, "max_attempts", 1, 1_000_000)
        unique_for = job.unique_for
        unique_ms = _UNIQUE_FOR_MS
        if type(unique_for) is not float or unique_for != default.unique_for:
            unique_ms = duration_ms(unique_for, "unique_for")
        generated = job_id is None
        fields = (new, payload, delay_ms, at_ms, priority, ttr_ms, attempts, unique_ms, generated)
        return _new_job(NewJob, fields)
    except PayloadTooLarge as exc:  # encode_payload's, which knows no index
        if index is None:
            raise
        raise PayloadTooLarge(str(exc), exc.size, exc.limit, index) from None
    except InvalidJob:
        raise
    except InvalidInput as exc:
        raise InvalidJob(str(exc), index) from None


def shard_of(job_id: str, shards: int) -> int:
    """The shard of a job among ``shards``: a stable hash of its id (CRC-32),
    the same in every process and language (docs/contract.md §4)."""
    return zlib.crc32(job_id.encode()) % shards if shards > 1 else 0
