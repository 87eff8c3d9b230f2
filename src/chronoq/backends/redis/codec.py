"""The packed job record of the Redis backend (see lua/lib/2_record.lua) and its
conversion to chronoq values."""

from __future__ import annotations

import struct
from typing import Any

from chronoq.ids import encode as encode_ulid
from chronoq.job import (
    Event,
    JobInfo,
    NewJob,
    Reservation,
    decode_payload,
    traceparent_from_bytes,
    traceparent_to_bytes,
)
from chronoq.states import EventKind, State, lease_expired_error, observed_state

__all__ = [
    "as_text",
    "by_name",
    "decode_entry",
    "entry_last_seq",
    "id_key",
    "info_from_record",
    "key_id",
    "leased_fields",
    "pack_new_job",
    "reservations",
    "split_payload",
]

PENDING, RESERVED, DEAD, REMEMBERED = 0, 2, 3, 4
# state * 32 + flags, due_at (unsigned), priority, created_at, seq
_HEAD = struct.Struct(">B6sh6s6s")
F_TTR, F_MAX, F_ATT, F_UF, F_ERR = 1, 2, 4, 8, 16
DEFAULT_TTR_MS, DEFAULT_MAX_ATTEMPTS = 30_000, 5  # a record leaves them out
_PUT_HEAD = struct.Struct(">BqqhBH")  # see lua/put.lua
_U32 = struct.Struct(">I")
# A 6-byte big-endian int read as a signed 2-byte high part and a 4-byte low part.
_LEASED_HEAD = struct.Struct(">BHIhhI6x")  # state * 32 + flags, due_at, priority, created_at
_LEASED_TAIL = struct.Struct(">IhIB")  # attempts, deadline, lease length: flags = F_ATT only
# A canonical ULID's digits to the ones int(..., 32) reads; every other byte is
# deleted, so the text is a canonical ULID when 26 digits are left and the
# first is 0-7 (bytes.translate: one pass in C, where a regex took as long).
_CROCKFORD = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TO_BASE32 = bytes.maketrans(_CROCKFORD, b"0123456789abcdefghijklmnopqrstuv")
_NOT_CROCKFORD = bytes(b for b in range(256) if b not in _CROCKFORD)
# A job's trace context leads the payload part of its record: this tag (no
# payload starts with it: JSON text starts with a printable character, a
# binary payload with NUL), then the traceparent in 25 bytes. A job without
# one costs no byte, and Lua, which never looks into the payload part, keeps
# it through every transition; a record written without it reads the same.
_TRACED = b"\x01"
_TRACED_END = 1 + 25
# Then a job's group, the same way: this tag, its length in a byte, its name
# (kept, like the trace context, through every transition).
_GROUPED = b"\x02"


def id_key(job_id: str) -> bytes:
    """The id as stored: a canonical ULID in 17 bytes (NUL, then its 128 bits),
    any other id as its ASCII text (printable, so never starting with NUL)."""
    text = job_id.encode()
    if len(text) == 26:  # a non-ASCII character takes 2 bytes or more, then fails below
        digits = text.translate(_TO_BASE32, _NOT_CROCKFORD)
        if len(digits) == 26 and text[0] <= 0x37:  # [0-7]: the value fits in 128 bits
            return int(digits, 32).to_bytes(17, "big")
    return text


def as_text(value: bytes | str) -> str:
    """A reply's string (redis-py answers bytes unless told to decode)."""
    return value.decode() if isinstance(value, bytes) else value


def by_name(flat: list[Any]) -> dict[str, Any]:
    """A raw HGETALL or ZRANGE WITHSCORES reply, as a dict by name."""
    return {as_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def key_id(key: bytes) -> str:
    if key[:1] == b"\x00":
        return encode_ulid(int.from_bytes(key, "big"))  # the NUL adds nothing to the value
    return key.decode()


def _i6(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def _record(raw: bytes) -> dict[str, Any]:
    """Mirrors unpack_job in lua/lib/2_record.lua (tests/redis/test_lua_codec.py
    keeps the two in step)."""
    state_flags, due, priority, created, _ = _HEAD.unpack_from(raw)
    state, flags = divmod(state_flags, 32)
    r: dict[str, Any] = {
        "state": state,
        "due": int.from_bytes(due, "big"),
        "priority": priority,
        "created": _i6(created),
        "ttr": DEFAULT_TTR_MS,
        "max": DEFAULT_MAX_ATTEMPTS,
        "attempts": 0,
        "unique_for": 0,
        "error": b"",
    }
    r["at"] = r["due"]
    pos = _HEAD.size
    fields = [(F_TTR, "ttr", 6), (F_MAX, "max", 4), (F_ATT, "attempts", 4), (F_UF, "unique_for", 6)]
    for flag, name, size in fields:
        if flags & flag:
            # ttr is unsigned (I6 in Lua), unique_for signed (i6)
            r[name] = int.from_bytes(raw[pos : pos + size], "big", signed=name == "unique_for")
            pos += size
    if state != PENDING:
        r["at"] = _i6(raw[pos : pos + 6])
        pos += 6
    if state == RESERVED:
        pos += 1 + raw[pos]  # the lease token: never shown
    if flags & F_ERR:
        length = int.from_bytes(raw[pos : pos + 2], "big")
        r["error"] = raw[pos + 2 : pos + 2 + length]
        pos += 2 + length
    r["payload"] = raw[pos:]
    return r


def split_payload(data: bytes) -> tuple[bytes, str | None, str | None]:
    """A record's payload part: the payload (as encode_payload made it), and
    the trace context and the group stored ahead of it, if any."""
    lead = data[:1]
    if lead != _TRACED and lead != _GROUPED:
        return data, None, None
    trace = group = None
    if lead == _TRACED:
        trace, data = traceparent_from_bytes(data[1:_TRACED_END]), data[_TRACED_END:]
    if data[:1] == _GROUPED:
        end = 2 + data[1]
        group, data = data[2:end].decode(), data[end:]
    return data, trace, group


def leased_fields(raw: bytes) -> tuple[int, int, int, int, int, int, int, bytes]:
    """A reserved record's attempts, deadline, due_at, priority, max_attempts,
    ttr (ms), created_at and payload: as reserve returns it, on its hot path."""
    state_flags, due_hi, due_lo, priority, created_hi, created_lo = _LEASED_HEAD.unpack_from(raw)
    if state_flags == RESERVED * 32 + F_ATT:  # no other field differs from its default
        attempts, at_hi, at_lo, lease_length = _LEASED_TAIL.unpack_from(raw, _HEAD.size)
        return (
            attempts,
            (at_hi << 32) + at_lo,
            (due_hi << 32) + due_lo,
            priority,
            DEFAULT_MAX_ATTEMPTS,
            DEFAULT_TTR_MS,
            (created_hi << 32) + created_lo,
            raw[_HEAD.size + _LEASED_TAIL.size + lease_length :],
        )
    r = _record(raw)
    return (
        r["attempts"],
        r["at"],
        r["due"],
        r["priority"],
        r["max"],
        r["ttr"],
        r["created"],
        r["payload"],
    )


def pack_new_job(job: NewJob) -> bytes:
    """One put argument per job: redis-py's per-argument packing was most of the
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
    if job.traceparent is not None:
        rest += _TRACED + traceparent_to_bytes(job.traceparent)
    if job.group is not None:  # at most 128 ASCII characters (names.GROUP_PATTERN)
        name = job.group.encode()
        rest += _GROUPED + bytes((len(name),)) + name
    return b"".join((head, key, rest, job.payload))


def reservations(topic: str, reply: list[Any], ttr_ms: int | None) -> list[Reservation]:
    """The jobs of a reserve reply: its lease token, then id and record pairs."""
    if len(reply) < 5:
        return []
    lease = reply[2].decode()
    out = []
    for b in range(3, len(reply), 2):
        attempts, deadline, due_at, priority, max_attempts, ttr, created, data = leased_fields(
            reply[b + 1]
        )
        payload, trace, group = split_payload(data)
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
                trace,
                group,
            )
        )
    return out


def info_from_record(topic: str, job_id: str, raw: bytes, now: int) -> JobInfo | None:
    """The job as a reader sees it at ``now``; None for a remembered id."""
    r = _record(raw)
    if r["state"] == REMEMBERED:
        return None
    if r["state"] == PENDING:
        stored = State.DELAYED
    else:
        stored = State.RESERVED if r["state"] == RESERVED else State.DEAD
    state = observed_state(stored, r["at"], now, r["attempts"], r["max"])
    error = r["error"].decode() or None
    if state is State.DEAD and stored is State.RESERVED:
        error = lease_expired_error(r["attempts"], r["max"])
    payload, trace, group = split_payload(r["payload"])
    return JobInfo(
        topic=topic,
        id=job_id,
        state=state,
        payload=decode_payload(payload),
        due_at=r["due"],
        priority=r["priority"],
        ttr=r["ttr"] / 1000,
        max_attempts=r["max"],
        attempts=r["attempts"],
        created_at=r["created"],
        last_error=error,
        deadline=r["at"] if state is State.RESERVED else None,
        unique_for=r["unique_for"] / 1000,
        traceparent=trace,
        group=group,
    )


# The packed events of one stream entry (see lua/lib/3_events.lua, emit_event)
EVENT_KINDS = (
    None,
    EventKind.PUT,
    EventKind.RESERVE,
    EventKind.ACK,
    EventKind.NACK,
    EventKind.EXPIRE,
    EventKind.DEAD,
    EventKind.BURY,
    EventKind.DELETE,
    EventKind.RESCHEDULE,
    EventKind.REQUEUE,
    EventKind.TOUCH,
)
EV_ATT, EV_DUE, EV_PRIO, EV_ULID = 16, 32, 64, 128
_I4_ESCAPE = -(2**31)
_GROUP_TAG = 0  # leads the event of a job with a group: then its length (a byte) and name
_HAS_ERROR = frozenset({EventKind.NACK, EventKind.DEAD, EventKind.BURY, EventKind.DELETE})


def entry_last_seq(entry_id: bytes) -> int:
    """A stream entry's id is ``<seq of its last event>-0``."""
    return int(entry_id.partition(b"-")[0])


def decode_entry(topic: str, entry_id: bytes, fields: dict[bytes, bytes]) -> list[Event]:
    """The events of one stream entry, oldest first."""
    ts_ms = int(fields[b"t"])
    blob = fields[b"b"]
    parsed = []
    pos, end = 0, len(blob)
    while pos < end:
        flags = blob[pos]
        group = None  # events written before groups were logged have no tag: None
        if flags == _GROUP_TAG:
            n = blob[pos + 1]
            group = blob[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            flags = blob[pos]
        event = EVENT_KINDS[flags & 15]
        assert event is not None, f"unknown event kind {flags & 15} in {entry_id!r}"
        if flags & EV_ULID:
            job_id = key_id(b"\x00" + blob[pos + 1 : pos + 17])
            pos += 17
        else:
            idlen = blob[pos + 1] + 1
            job_id = key_id(blob[pos + 2 : pos + 2 + idlen])
            pos += 2 + idlen
        attempt = d = priority = 0
        error = None
        if flags & EV_ATT:
            attempt = blob[pos]
            pos += 1
            if attempt == 255:
                attempt = int.from_bytes(blob[pos : pos + 4], "big")
                pos += 4
        if flags & EV_DUE:
            d = int.from_bytes(blob[pos : pos + 4], "big", signed=True)
            pos += 4
            if d == _I4_ESCAPE:
                d = int.from_bytes(blob[pos : pos + 8], "big", signed=True)
                pos += 8
        if flags & EV_PRIO:
            priority = int.from_bytes(blob[pos : pos + 2], "big", signed=True)
            pos += 2
        if event in _HAS_ERROR:
            n = int.from_bytes(blob[pos : pos + 2], "big")
            error = blob[pos + 2 : pos + 2 + n].decode(errors="replace") or None
            pos += 2 + n
        lag = -d if event is EventKind.RESERVE else None
        parsed.append((job_id, event, attempt, ts_ms + d, priority, lag, error, group))
    first = entry_last_seq(entry_id) - len(parsed) + 1
    return [
        Event(first + n, ts_ms, topic, job_id, event, attempt, due, prio, lag, error, group)
        for n, (job_id, event, attempt, due, prio, lag, error, group) in enumerate(parsed)
    ]
