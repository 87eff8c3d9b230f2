"""The Lua and Python twins of the Redis backend's packed formats stay in step,
field by field. A record the Lua codec packs (lua/lib/2_record.lua: pack_job,
lease_record) reads the same with codec.py (_record, leased_fields,
info_from_record) as with Lua (unpack_job, lease_view); a record put.lua makes
from pack_new_job's bytes reads the same on both sides; every event
lua/lib/3_events.lua packs decodes to what was emitted (codec.decode_entry);
and the constants, flags, formats and key order of the Lua files are
codec.py's and keys.py's. The Lua runs through EVAL on a private redis-server:
the lib files' text in scripts.LIB_FILES order, then a test body, run the way
the library runs each of its functions (begin_call, body, flush_events)."""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Callable, Iterable
from importlib.resources import files
from typing import Any

import pytest

from chronoq.backends.redis import codec, keys, scripts
from chronoq.ids import encode as encode_ulid
from chronoq.job import MAX_DURATION_S, Event, NewJob
from chronoq.states import EventKind, lease_expired_error

from ..redis_server import RedisServer

LUA = files("chronoq.backends.redis").joinpath("lua")
EVENT_CAP = 1_000_000  # ARGV[1]: no trimming of the test's event log
I6_MIN, I6_MAX, U6_MAX = -(2**47), 2**47 - 1, 2**48 - 1
U4_MAX = 2**32 - 1
TEN_YEARS_MS = MAX_DURATION_S * 1000  # the longest ttr / unique_for validation allows

# The Lua record's fields (unpack_job's table) -> codec._record's keys; None for
# the two Python does not return: seq (checked in the head) and the lease token
# (skipped by Python, checked through lease_view and unpack_job).
TWIN = {
    "state": "state",
    "due": "due",
    "prio": "priority",
    "created": "created",
    "seq": None,
    "ttr": "ttr",
    "max": "max",
    "att": "attempts",
    "uf": "unique_for",
    "at": "at",
    "lease": None,
    "err": "error",
    "payload": "payload",
}
FIELDS = tuple(TWIN)
STATES = {
    "PENDING": codec.PENDING,
    "RESERVED": codec.RESERVED,
    "DEAD": codec.DEAD,
    "REMEMBERED": codec.REMEMBERED,
}


def _source(text: str) -> str:
    """Lua text without its comments."""
    return re.sub(r"--[^\n]*", "", text)


def _lib(name: str) -> str:
    return LUA.joinpath("lib").joinpath(name).read_text()


def _function(name: str) -> str:
    """The text of a top-level Lua function of the lib files."""
    match = re.search(rf"^local function {name}\(.*?^end$", scripts.lib_source(), re.M | re.S)
    assert match, f"no function {name} in the lib files"
    return match.group(0)


# for the test bodies: a Lua record table of the 13 arguments from ARGV[b] on
# (FIELDS order: see _args)
JOB_AT = """
local function job_at(b)
  return {state = tonumber(ARGV[b]), due = tonumber(ARGV[b + 1]), prio = tonumber(ARGV[b + 2]),
          created = tonumber(ARGV[b + 3]), seq = tonumber(ARGV[b + 4]),
          ttr = tonumber(ARGV[b + 5]), max = tonumber(ARGV[b + 6]), att = tonumber(ARGV[b + 7]),
          uf = tonumber(ARGV[b + 8]), at = tonumber(ARGV[b + 9]), lease = ARGV[b + 10],
          err = ARGV[b + 11], payload = ARGV[b + 12]}
end
"""


def _script(body: str) -> str:
    # KEYS and ARGV are globals of EVAL, which the library's locals of the same
    # names hide: taken first
    return (
        "local CALL_KEYS, CALL_ARGV = KEYS, ARGV\n"
        + scripts.lib_source()
        + JOB_AT
        + "\nbegin_call(CALL_KEYS, CALL_ARGV)\nlocal reply = (function()\n"
        + body
        + "\nend)()\nflush_events()\nreturn reply\n"
    )


class Lua:
    """Runs a Lua body after the library's shared definitions, on one shard's keys."""

    def __init__(self, client: Any, prefix: str) -> None:
        self.client = client
        self.keys = keys.shard_keys(prefix, "t", 0, shards=1, spread=False)

    def key(self, part: str) -> str:
        return self.keys[keys.PARTS.index(part)]

    def __call__(self, body: str, *args: Any) -> Any:
        return self.client.eval(_script(body), len(self.keys), *self.keys, EVENT_CAP, *args)

    def events(self) -> list[Event]:
        entries = self.client.xrange(self.key("events"))
        return [e for entry, fields in entries for e in codec.decode_entry("t", entry, fields)]


@pytest.fixture
def lua(redis_server: RedisServer, raw_client: Callable[..., Any], prefix: str) -> Lua:
    return Lua(raw_client(redis_server), prefix)


# --- the record codec, packed by Lua ---------------------------------------------

BASE: dict[str, Any] = {
    "due": 1_767_225_600_123,
    "prio": 0,
    "created": 1_767_225_500_000,
    "seq": 7,
    "ttr": codec.DEFAULT_TTR_MS,
    "max": codec.DEFAULT_MAX_ATTEMPTS,
    "att": 0,
    "uf": 0,
    "at": 1_767_225_630_123,
    "lease": b"lease-token",
    "err": b"",
    "payload": b'{"n": 1}',
}
# each alone on the base record: every flag alone, and each field at the edges of its width
VARIANTS: list[dict[str, Any]] = [
    {},  # all defaults: no flag (reserved: the leased_fields fast path once leased)
    {"ttr": 0},
    {"ttr": 1},
    {"ttr": TEN_YEARS_MS},
    {"ttr": I6_MAX},  # the widest both sides read alike (see test_ttr_past_2_47_reads_alike)
    {"max": 0},
    {"max": 1},
    {"max": U4_MAX},
    {"att": 1},
    {"att": U4_MAX},
    {"uf": 1},
    {"uf": TEN_YEARS_MS},
    {"uf": I6_MAX},
    {"uf": -1},
    {"uf": I6_MIN},
    {"err": b"e"},
    {"err": "é€".encode() * 9},
    {"err": b"\x00" + b"x" * 65534},  # the longest error
    {"err": b"y" * 70_000},  # cut to 65535 bytes
    {"due": 0},
    {"due": U6_MAX},
    {"prio": -32768},
    {"prio": 32767},
    {"prio": -1},
    {"created": I6_MIN},
    {"created": I6_MAX},
    {"created": -1},
    {"seq": I6_MIN},
    {"seq": I6_MAX},
    {"seq": 0},
    {"at": I6_MIN},
    {"at": I6_MAX},
    {"at": -1},
    {"lease": b""},
    {"lease": b"L"},
    {"lease": bytes(range(255))},  # the longest token
    {"payload": b""},
    {"payload": b"\x00\xff\x00" * 40_000},
    {"ttr": 1, "max": 7, "att": 3, "uf": 60_000, "err": b"boom", "prio": -5, "lease": b"t"},
]

PACK_BODY = """
local out = {}
for b = 2, #ARGV, 13 do
  local j = job_at(b)
  local raw = pack_job(j)
  local u = unpack_job(raw)
  local view = {lease_view(raw)}
  out[#out + 1] = {raw, {u.state, u.due, u.prio, u.created, u.seq, u.ttr, u.max, u.att, u.uf,
                         u.at, u.lease, u.err, u.payload}, view, state_of(raw)}
end
return out
"""


def _cases() -> list[dict[str, Any]]:
    return [{"state": s, **BASE, **v} for s in STATES.values() for v in VARIANTS]


def _args(cases: Iterable[dict[str, Any]]) -> list[Any]:
    return [case[f] for case in cases for f in FIELDS]


def _stored(case: dict[str, Any]) -> dict[str, Any]:
    """The fields a record packed from ``case`` holds."""
    want = dict(case, err=case["err"][:65535])
    if case["state"] == codec.PENDING:
        want["at"] = case["due"]  # a pending job's `at` is its due time
    if case["state"] != codec.RESERVED:
        want["lease"] = b""
    return want


def _leased(want: dict[str, Any]) -> tuple[Any, ...]:
    """codec.leased_fields of a reserved record holding ``want``."""
    names = ("att", "at", "due", "prio", "max", "ttr", "created", "payload")
    return tuple(want[name] for name in names)


def _check_record(raw: bytes, want: dict[str, Any]) -> None:
    """Python reads every field of ``raw`` as ``want`` has it."""
    assert codec._record(raw) == {TWIN[f]: want[f] for f in FIELDS if TWIN[f]}
    assert codec._HEAD.unpack_from(raw)[4] == want["seq"].to_bytes(6, "big", signed=True)
    if want["state"] == codec.RESERVED:
        assert codec.leased_fields(raw) == _leased(want)


def test_records_packed_by_lua_read_alike_in_python(lua: Lua) -> None:
    cases = _cases()
    reply = lua(PACK_BODY, *_args(cases))
    flags = 0
    for case, (raw, unpacked, view, state) in zip(cases, reply, strict=True):
        want = _stored(case)
        assert dict(zip(FIELDS, unpacked, strict=True)) == want, case  # Lua's own round trip
        assert state == case["state"]
        _check_record(raw, want)
        if case["state"] == codec.RESERVED:
            lease_fields = ("at", "lease", "att", "due", "prio", "uf")
            assert view == [want[f] for f in lease_fields]
        else:
            assert view == []  # lease_view: nil
        flags |= raw[0] % 32
    # every flag and state the Lua codec has was packed and read
    lua_flags = _lua_constants("F_")
    assert lua_flags and flags == sum(lua_flags.values())
    assert {case["state"] for case in cases} == set(_lua_constants("", list(STATES)).values())


def test_records_read_as_jobs_by_info_from_record(lua: Lua) -> None:
    """info_from_record's units and names, on the records pack_job makes."""
    cases = [case for case in _cases() if case["payload"] == BASE["payload"]]
    reply = lua(PACK_BODY, *_args(cases))
    for case, (raw, *_) in zip(cases, reply, strict=True):
        want = _stored(case)
        info = codec.info_from_record("t", "id", raw, I6_MIN - 1)  # before every `at`
        if case["state"] == codec.REMEMBERED:
            assert info is None
            continue
        assert info is not None
        assert (info.due_at, info.priority) == (want["due"], want["prio"])
        assert info.created_at == want["created"]
        assert (info.ttr, info.unique_for) == (want["ttr"] / 1000, want["uf"] / 1000)
        assert (info.max_attempts, info.attempts) == (want["max"], want["att"])
        assert info.last_error == (want["err"].decode() or None)
        assert info.payload == {"n": 1}
        reserved = case["state"] == codec.RESERVED
        assert info.deadline == (want["at"] if reserved else None)


def _python_packed(want: dict[str, Any]) -> bytes:
    """The record of ``want`` packed as 2_record.lua's comments lay it out
    (test_python_layout_matches_lua_pack_job holds it to pack_job)."""
    flags, rest = 0, b""
    optional = [
        (codec.F_TTR, "ttr", codec.DEFAULT_TTR_MS, 6),
        (codec.F_MAX, "max", codec.DEFAULT_MAX_ATTEMPTS, 4),
        (codec.F_ATT, "att", 0, 4),
        (codec.F_UF, "uf", 0, 6),
    ]
    for flag, name, default, size in optional:
        if want[name] != default:  # two's complement, cut to `size` bytes
            flags, rest = flags | flag, rest + (want[name] % 2**64).to_bytes(8, "big")[-size:]
    if want["state"] != codec.PENDING:
        rest += want["at"].to_bytes(6, "big", signed=True)
    if want["state"] == codec.RESERVED:
        rest += bytes([len(want["lease"])]) + want["lease"]
    if want["err"]:
        flags, rest = flags | codec.F_ERR, rest + struct.pack(">H", len(want["err"])) + want["err"]
    head = codec._HEAD.pack(
        want["state"] * 32 + flags,
        want["due"].to_bytes(6, "big"),
        want["prio"],
        want["created"].to_bytes(6, "big", signed=True),
        want["seq"].to_bytes(6, "big", signed=True),
    )
    return head + rest + bytes(want["payload"])


def test_python_layout_matches_lua_pack_job(lua: Lua) -> None:
    """The layout _python_packed writes (from 2_record.lua's comments) is pack_job's."""
    cases = _cases()
    reply = lua(PACK_BODY, *_args(cases))
    for case, (raw, *_) in zip(cases, reply, strict=True):
        assert _python_packed(_stored(case)) == raw, case


LEASE_BODY = """
local out = {}
for b = 2, #ARGV, 15 do
  local j = job_at(b)
  local at, lease = tonumber(ARGV[b + 13]), ARGV[b + 14]
  local leased, att = lease_record(pack_job(j), at, lease)
  -- the same job packed whole: what lease_record splices must be that
  j.state, j.att, j.at, j.lease = RESERVED, j.att + 1, at, lease
  out[#out + 1] = {leased, att, pack_job(j), {lease_view(leased)}}
end
return out
"""


def test_lease_record_splices_what_pack_job_and_python_read(lua: Lua) -> None:
    """reserve's hot path: a pending record leased without unpacking it."""
    deadlines = (I6_MIN, -1, 0, BASE["due"] + 30_000, I6_MAX)
    tokens = (b"", b"t", bytes(range(255)))
    pending = [c for c in _cases() if c["state"] == codec.PENDING and c["att"] < U4_MAX]
    cases = [(c, deadlines[n % 5], tokens[n % 3]) for n, c in enumerate(pending)]
    args = [v for c, at, lease in cases for v in (*_args([c]), at, lease)]
    reply = lua(LEASE_BODY, *args)
    for (case, at, lease), (leased, att, whole, view) in zip(cases, reply, strict=True):
        assert leased == whole, case
        assert att == case["att"] + 1
        want = _stored(dict(case, state=codec.RESERVED, att=att, at=at, lease=lease))
        _check_record(leased, want)
        assert view == [at, lease, att, want["due"], want["prio"], want["uf"]]
    fast = [leased for leased, *_ in reply if leased[0] == codec.RESERVED * 32 + codec.F_ATT]
    assert fast  # leased_fields' fast path was taken too


def test_expire_writes_the_error_python_shows(lua: Lua) -> None:
    """A lease that ran out on its last attempt: expire (8_transitions) kills the job
    with the text of chronoq.states.lease_expired_error."""
    body = """
    local now = now_ms()
    local j = {state = RESERVED, due = now, prio = 0, created = now, seq = 1, ttr = 1000, max = 3,
               att = 3, uf = 0, at = now - 1, lease = 'x', err = '', payload = 'p'}
    expire(ARGV[2], j, now)
    return job_raw(ARGV[2])
    """
    raw = lua(body, "job")
    assert codec._record(raw)["error"] == lease_expired_error(3, 3).encode()
    [event] = lua.events()
    assert (event.event, event.error) == (EventKind.DEAD, lease_expired_error(3, 3))


# --- the record codec, packed by Python (the put path) ---------------------------

ULIDS = [encode_ulid(v) for v in (0, 1, 2**128 - 1, 0x0123456789ABCDEF0123456789ABCDEF)]
NEW_JOBS = [
    NewJob(ULIDS[0], b'"a"', 0, None, 0, codec.DEFAULT_TTR_MS, codec.DEFAULT_MAX_ATTEMPTS, 0, True),
    NewJob(ULIDS[1], b"\x00\x01\xff", 0, 0, -32768, 1, 1, 1, False),
    NewJob(ULIDS[2], b"", TEN_YEARS_MS, None, 32767, TEN_YEARS_MS, U4_MAX, TEN_YEARS_MS, True),
    NewJob(ULIDS[3], b'"d"', 5_000, None, 3, 0, 0, I6_MAX, False),
    NewJob("job-1", b'"e"', 0, I6_MAX, -1, I6_MAX, 2, 0, False),
    NewJob("x" * 256, b"\x00" * 70_000, -5_000, None, 1000, 7, 5, 0, False),
    NewJob("é-id", b'"g"', 0, None, 0, codec.DEFAULT_TTR_MS, 6, 0, False),
]
UNPACK_BODY = """
local out = {}
for b = 2, #ARGV do
  local u = unpack_job(job_raw(ARGV[b]))
  out[#out + 1] = {u.state, u.due, u.prio, u.created, u.seq, u.ttr, u.max, u.att, u.uf,
                   u.at, u.lease, u.err, u.payload}
end
return out
"""


def test_records_packed_by_python_read_alike_in_lua(lua: Lua) -> None:
    """pack_new_job's bytes, made a record by put.lua, read alike in Lua and Python."""
    reply = lua(LUA.joinpath("put.lua").read_text(), "0", *map(codec.pack_new_job, NEW_JOBS))
    assert reply[0::2] == [1] * len(NEW_JOBS)
    dues = reply[1::2]
    ids = [codec.id_key(job.id) for job in NEW_JOBS]
    assert [len(i) for i in ids[:4]] == [17] * 4  # ULIDs as 17 bytes
    unpacked = lua(UNPACK_BODY, *ids)
    now = dues[0]  # the first job is due at once
    assert dues[1] == now and dues[2] == now + TEN_YEARS_MS
    assert dues[4] == I6_MAX and dues[5] == now - 5_000
    for n, (job, due, lua_fields) in enumerate(zip(NEW_JOBS, dues, unpacked, strict=True)):
        want = {
            "state": codec.PENDING,
            "due": due,
            "prio": job.priority,
            "created": now,
            "seq": n + 1,
            "ttr": job.ttr_ms,
            "max": job.max_attempts,
            "att": 0,
            "uf": job.unique_for_ms,
            "at": due,
            "lease": b"",
            "err": b"",
            "payload": job.payload,
        }
        assert dict(zip(FIELDS, lua_fields, strict=True)) == want, job
        _check_record(lua.client.hget(lua.key("jobs"), ids[n]), want)
    events = lua.events()
    put = [(e.id, e.event, e.attempt, e.due_at, e.priority, e.lag_ms, e.error) for e in events]
    assert put == [
        (job.id, EventKind.PUT, 0, due, job.priority, None, None)
        for job, due in zip(NEW_JOBS, dues, strict=True)
    ]


def test_ttr_past_2_47_reads_alike(lua: Lua) -> None:
    case = {"state": codec.PENDING, **BASE, "ttr": 2**47}
    [(raw, unpacked, *_)] = lua(PACK_BODY, *_args([case]))
    assert dict(zip(FIELDS, unpacked, strict=True))["ttr"] == 2**47
    assert codec._record(raw)["ttr"] == 2**47


# --- the events codec ------------------------------------------------------------

EMIT_BODY = """
local now = now_ms()
for b = 2, #ARGV, 8 do
  local err, g = nil, nil
  if ARGV[b + 5] == '1' then err = ARGV[b + 6] end
  if ARGV[b + 7] ~= '-' then g = ARGV[b + 7] end
  emit_event(ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2]), now + tonumber(ARGV[b + 3]),
             tonumber(ARGV[b + 4]), err, g)
end
return now
"""
ATTEMPTS = (0, 1, 254, 255, 300, U4_MAX)
OFFSETS = (0, 1, -1, 2**31 - 1, 2**31, -(2**31) + 1, -(2**31), 2**40, -(2**40))
PRIORITIES = (0, 1, -1, 32767, -32768)
EVENT_IDS = [*ULIDS, "a", "job-1", "x" * 256, "é-ü", "0" * 26 + "x", "8" + "0" * 25]
ERRORS: list[bytes | None] = [None, b"", b"boom", "é€".encode() * 5]  # nil: emit(kind, id, j)
# the longest error, one cut to 65535 bytes, one cut inside a character (then decoded
# with a replacement): once each for every kind that has an error
LONG_ERRORS = [b"z" * 65535, b"q" * 70_000, "é".encode() * 40_000]
# a job's group: none (nil, as the events of before, or ''), the shortest, the longest
GROUPS: list[str | None] = [None, None, "", "g", "tenant-42", "x" * 128]
Emitted = tuple[str, str, int, int, int, bytes | None, str | None]


def _emitted() -> list[Emitted]:
    """Every kind with every attempt, due offset and priority, ids, errors and
    groups in turn."""
    rng = random.Random(7)
    out = []
    for kind in codec.EVENT_KINDS[1:]:
        assert kind is not None
        combinations = [(a, d, p) for a in ATTEMPTS for d in OFFSETS for p in PRIORITIES]
        for n, (att, d, prio) in enumerate(combinations):
            error = None
            if kind in codec._HAS_ERROR:
                error = LONG_ERRORS[n] if n < len(LONG_ERRORS) else rng.choice(ERRORS)
            group = rng.choice(GROUPS)
            out.append((kind.value, rng.choice(EVENT_IDS), att, d, prio, error, group))
    return out


def _emit_args(emitted: Iterable[Emitted]) -> list[Any]:
    """EMIT_BODY's ARGV: 8 values an event ('-': no group given, nil)."""
    return [
        v
        for kind, job_id, att, d, prio, error, group in emitted
        for v in (
            *(kind, codec.id_key(job_id), att, d, prio),
            *(int(error is not None), error or b"", "-" if group is None else group),
        )
    ]


def test_every_event_field_decodes_as_emitted(lua: Lua) -> None:
    emitted = _emitted()
    now = lua(EMIT_BODY, *_emit_args(emitted))
    events = lua.events()
    entries = lua.client.xrange(lua.key("events"))
    assert len(entries) > 1  # several stream entries: flush_events splits at ENTRY_BYTES
    assert [e.seq for e in events] == list(range(1, len(emitted) + 1))
    for event, (kind, job_id, att, d, prio, error, group) in zip(events, emitted, strict=True):
        lag = -d if kind == "reserve" else None
        text = (error or b"")[:65535].decode(errors="replace") or None
        got = (event.ts_ms, event.id, event.event, event.attempt, event.due_at, event.priority)
        assert got == (now, job_id, EventKind(kind), att, now + d, prio)
        assert (event.lag_ms, event.error, event.group) == (lag, text, group or None)
    # every kind and flag the Lua side has was packed and decoded
    firsts = [first for _, fields in entries for first in _event_firsts(fields[b"b"])]
    assert len(firsts) == len(events)
    assert {first & 15 for first in firsts} == set(_lua_event_kinds().values())
    for flag in _lua_constants("EV_").values():
        assert any(first & flag for first in firsts), flag


def _event_firsts(blob: bytes) -> list[int]:
    """The first byte of each packed event of ``blob`` (lengths as decode_entry reads them)."""
    firsts, pos = [], 0
    while pos < len(blob):
        if blob[pos] == codec._GROUP_TAG:  # the group of the event that follows
            pos += 2 + blob[pos + 1]
        flags = blob[pos]
        firsts.append(flags)
        pos += 17 if flags & codec.EV_ULID else 2 + blob[pos + 1] + 1
        if flags & codec.EV_ATT:
            pos += 5 if blob[pos] == 255 else 1
        if flags & codec.EV_DUE:
            escaped = blob[pos : pos + 4] == struct.pack(">i", codec._I4_ESCAPE)
            pos += 12 if escaped else 4
        if flags & codec.EV_PRIO:
            pos += 2
        if codec.EVENT_KINDS[flags & 15] in codec._HAS_ERROR:
            pos += 2 + int.from_bytes(blob[pos : pos + 2], "big")
    return firsts


def test_a_group_costs_its_tag_and_no_group_costs_nothing(lua: Lua) -> None:
    """The event of a job without a group is packed as before groups were
    logged (so events of before decode, with group None); a group adds
    GROUP_TAG, its length and its name."""
    plain: Emitted = ("reserve", ULIDS[1], 1, -5, 0, None, None)
    lua(EMIT_BODY, *_emit_args([plain, (*plain[:6], ""), (*plain[:6], "tenant-42")]))
    [(_, fields)] = lua.client.xrange(lua.key("events"))
    blob = fields[b"b"]
    assert len(blob) == 3 * 22 + 2 + len("tenant-42")  # flags, 16 id bytes, B att, i4 due
    assert blob[:22] == blob[22:44]  # nil and '' alike: no group
    assert blob[44:55] == bytes([codec._GROUP_TAG, 9]) + b"tenant-42"
    assert blob[55:] == blob[:22]
    assert [e.group for e in lua.events()] == [None, None, "tenant-42"]


# --- constants, formats and key order ----------------------------------------------


def _lua_constants(prefix: str, names: list[str] | None = None) -> dict[str, int]:
    """The lib files' numeric top-level constants (``local A, B = 1, 2``) whose names
    start with ``prefix`` (or are in ``names``)."""
    out = {}
    pattern = r"^local ([A-Z_][A-Z0-9_]*(?:, [A-Z_][A-Z0-9_]*)*) = (-?\d+(?:, -?\d+)*)\s*$"
    for names_text, values in re.findall(pattern, _source(scripts.lib_source()), re.M):
        for name, value in zip(names_text.split(", "), values.split(", "), strict=True):
            if (name in names) if names is not None else name.startswith(prefix):
                out[name] = int(value)
    return out


def _python_constants(prefix: str) -> dict[str, int]:
    return {n: getattr(codec, n) for n in dir(codec) if re.fullmatch(prefix + r"[A-Z]+", n)}


def _lua_table(name: str) -> dict[str, str]:
    match = re.search(rf"^local {name} = \{{(.*?)\}}", _source(scripts.lib_source()), re.M | re.S)
    assert match, name
    return dict(re.findall(r"(\w+) = (\w+)", match.group(1)))


def _lua_event_kinds() -> dict[str, int]:
    return {k: int(v) for k, v in _lua_table("EVENT_KIND").items()}


def test_flags_states_and_defaults_are_pythons() -> None:
    assert _lua_constants("F_") == _python_constants("F_")
    assert _lua_constants("EV_") == _python_constants("EV_")
    assert _lua_constants("", list(STATES)) == STATES
    assert _lua_constants("", ["I4_ESCAPE"]) == {"I4_ESCAPE": codec._I4_ESCAPE}
    assert _lua_constants("", ["GROUP_TAG"]) == {"GROUP_TAG": codec._GROUP_TAG}
    defaults = _lua_constants("DEFAULT_")
    assert defaults == {
        "DEFAULT_TTR": codec.DEFAULT_TTR_MS,
        "DEFAULT_MAX": codec.DEFAULT_MAX_ATTEMPTS,
    }


def test_event_kinds_are_pythons() -> None:
    python = {kind.value: n for n, kind in enumerate(codec.EVENT_KINDS) if kind is not None}
    assert _lua_event_kinds() == python
    assert set(python) == {kind.value for kind in EventKind}
    assert set(_lua_table("EVENT_HAS_ERROR")) == {kind.value for kind in codec._HAS_ERROR}
    assert max(python.values()) < 16  # the kind is the low 4 bits
    assert codec._GROUP_TAG not in python.values()  # no event starts like a group tag
    assert min(_lua_constants("EV_").values()) == 16


_LUA_SIZES = {"B": 1, "b": 1, "H": 2, "h": 2, "I": 4, "i": 4}


def _lua_sizes(fmt: str) -> list[int]:
    """The byte size of each field of a Lua struct format (iN, IN: N bytes)."""
    fields = re.findall(r"([A-Za-z])(\d*)", fmt.lstrip("<>!"))
    return [int(width) if width else _LUA_SIZES[code] for code, width in fields]


def _python_sizes(fmt: str) -> list[int]:
    """The byte size of each field of a Python struct format (Ns: one field)."""
    out = []
    for count, code in re.findall(r"(\d*)([A-Za-z])", fmt.lstrip("<>!=@")):
        if code == "s":
            out.append(int(count))
        else:
            out += [struct.calcsize(">" + code)] * int(count or 1)
    return out


def test_record_head_and_put_head_are_pythons() -> None:
    lua_head = re.search(r"^local HEAD = '(.+?)'", _lib("2_record.lua"), re.M)
    assert lua_head
    assert _lua_sizes(lua_head.group(1)) == _python_sizes(codec._HEAD.format)
    assert sum(_python_sizes(codec._HEAD.format)) == codec._HEAD.size
    assert codec._LEASED_HEAD.size == codec._HEAD.size
    # the literal offsets past the head (1-based in Lua)
    assert f"local pos = {codec._HEAD.size + 1} -- after the head" in _function("lease_record")
    reserve = LUA.joinpath("reserve.lua").read_text()
    assert f"struct.unpack('>I6', raw, {codec._HEAD.size + 1})" in reserve
    put = LUA.joinpath("put.lua").read_text()
    put_head = re.search(r"struct\.unpack\('(>[^']+)', arg\)", put)
    assert put_head
    assert _lua_sizes(put_head.group(1)) == _python_sizes(codec._PUT_HEAD.format)
    assert f"struct.pack('{lua_head.group(1)}c0'" in put  # put.lua packs the same head


def test_record_fields_are_the_twins() -> None:
    """A field added to the Lua record or to codec._record without the other fails here."""
    unpack_job = _function("unpack_job")
    table = re.search(r"local j = \{(.*?)\}", unpack_job, re.S)
    assert table
    lua_fields = set(re.findall(r"(\w+) =", table.group(1)))
    lua_fields |= set(re.findall(r"\bj\.(\w+)", unpack_job))
    assert lua_fields == set(FIELDS)
    python = codec._record(_python_packed(_stored({"state": codec.PENDING, **BASE})))
    assert set(python) == {twin for twin in TWIN.values() if twin}
    # pack_job writes each of them
    assert set(re.findall(r"\bj\.(\w+)", _function("pack_job"))) == set(FIELDS)


def test_keys_order_is_keys_parts() -> None:
    text = _lib("1_keys.lua")
    layout = re.findall(r"^--\s+(\d+) (\w+)\s+(?:HASH|ZSET|STREAM|LIST|STRING)\b", text, re.M)
    assert [int(n) for n, _ in layout] == list(range(1, len(keys.PARTS) + 1))
    assert [name for _, name in layout] == list(keys.PARTS)
    begin_call = _function("begin_call")
    assigned: dict[str, int] = {}
    assignment = r"^\s*(K_[\w, ]+?) = ((?:keys\[\d+\],? ?)+)$"
    for names, indexes in re.findall(assignment, begin_call, re.M):
        numbers = [int(n) for n in re.findall(r"keys\[(\d+)\]", indexes)]
        assigned.update(zip(names.split(", "), numbers, strict=True))
    assert assigned == {f"K_{part.upper()}": n + 1 for n, part in enumerate(keys.PARTS)}


# --- the lib files ---------------------------------------------------------------


def _declared(code: str) -> list[tuple[str, int]]:
    """The top-level locals of Lua code, with where each is declared."""
    out = []
    for match in re.finditer(r"^local (?:function (\w+)|([\w, ]+?)(?: =|$))", code, re.M):
        for name in (match.group(1) or match.group(2)).split(", "):
            out.append((name.strip(), match.start()))
    return out


def test_lib_files_use_only_what_is_declared_above() -> None:
    """Lua locals are lexically scoped: a name used above its `local` is a global
    (nil: an error when called), and a second `local` of a name hides the first
    from the code above it. LIB_FILES lists every lib file, in its numbered order."""
    listed = sorted(p.name for p in LUA.joinpath("lib").iterdir() if p.name.endswith(".lua"))
    assert list(scripts.LIB_FILES) == listed
    code = _source(scripts.lib_source())
    code = re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", code)  # no strings
    declared = _declared(code)
    names = [name for name, _ in declared]
    assert len(names) == len(set(names)), "a top-level local declared twice"
    # no table constructor keys ({put = 1}), blanked to keep the offsets
    uses = re.sub(r"(?<=[{,])\s*\w+ = (?!=)", lambda m: " " * len(m.group(0)), code)
    for name, at in declared:
        first = re.search(rf"(?<![\w.:]){name}\b", uses)
        assert first is not None and first.start() >= at, f"{name} is used above its declaration"


def test_functions_are_the_library_with_handover() -> None:
    assert "handover" in scripts.SCRIPT_NAMES and "release" not in scripts.SCRIPT_NAMES
    for name in scripts.SCRIPT_NAMES:
        assert LUA.joinpath(f"{name}.lua").is_file(), name
    library, source = scripts._library()
    assert source.startswith(f"#!lua name={library}\n" + scripts.lib_source())
