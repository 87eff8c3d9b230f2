"""Generated ids, the Redis backend's id keys and job preparation: the fast
versions against the simple ones they replaced, kept here as the reference.

Stored data depends on these: an id key or a shard that changed for some id
would lose that job, so the outputs must agree for every input, not just the
usual ones.
"""

from __future__ import annotations

import math
import os
import random
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import product
from types import SimpleNamespace
from typing import Any

import pytest

from chronoq import Job, ids
from chronoq.backends.redis.codec import id_key, key_id
from chronoq.backends.redis.keys import shard_of
from chronoq.errors import InvalidInput, InvalidJob, PayloadTooLarge
from chronoq.job import (
    MAX_PRIORITY,
    NewJob,
    duration_ms,
    encode_payload,
    prepare_job,
    run_at_ms,
    validate_id,
)

# -- the reference: the implementations before the fast ones ----------------------

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PAIRS = [a + b for a in ALPHABET for b in ALPHABET]
ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
TO_BASE32 = str.maketrans("ABCDEFGHJKMNPQRSTVWXYZ", "abcdefghijklmnopqrstuv")


def ref_pairs(value: int, count: int) -> str:
    return "".join([PAIRS[(value >> (10 * i)) & 1023] for i in range(count - 1, -1, -1)])


def ref_encode(value: int) -> str:
    return ref_pairs(value >> 80, 5) + ref_pairs(value, 8)


def ref_id_key(job_id: str) -> bytes:
    if len(job_id) == 26 and ULID_RE.fullmatch(job_id):
        return b"\x00" + int(job_id.translate(TO_BASE32), 32).to_bytes(16, "big")
    return job_id.encode()


def ref_key_id(key: bytes) -> str:
    if key[:1] == b"\x00":
        return ref_encode(int.from_bytes(key[1:], "big"))
    return key.decode()


class RefClock:
    """The ULID clock as it was, on a given clock and random source."""

    def __init__(self, time_ns: Callable[[], int], urandom: Callable[[int], bytes]) -> None:
        self.time_ns, self.urandom = time_ns, urandom
        self.last_ms, self.last_rand, self.prefix = -1, 0, ""

    def next(self) -> str:
        ms = self.time_ns() // 1_000_000
        if ms <= self.last_ms:
            rand = self.last_rand + 1
            if rand >> 80:
                ms = self.last_ms + 1
                rand = int.from_bytes(self.urandom(10), "big") >> 1
            else:
                ms = self.last_ms
        else:
            rand = int.from_bytes(self.urandom(10), "big") >> 1
        if ms != self.last_ms:
            self.prefix = ref_pairs(ms, 5)
        self.last_ms, self.last_rand = ms, rand
        return self.prefix + ref_pairs(rand, 8)


def ref_encode_payload(payload: Any, max_bytes: int) -> bytes:
    if isinstance(payload, bytes | bytearray | memoryview):
        data = b"\x00" + bytes(payload)
    else:
        try:
            data = _ref_json(payload).encode()
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"payload is not JSON-serializable ({exc}): pass a JSON value "
                "(dict, list, str, int, float, bool, None) or bytes"
            ) from None
    size = len(data) - (data[:1] == b"\x00")
    if size > max_bytes:
        raise PayloadTooLarge(
            f"payload is {size} bytes, over the limit of {max_bytes}: store large "
            "data elsewhere and put a reference, or raise max_payload in the store URL",
            size,
            max_bytes,
        )
    return data


def _ref_json(payload: Any) -> str:
    from chronoq.job.codec import _to_json  # unchanged: the JSON text itself is not under test

    return _to_json(payload)


def _ref_check_int(value: object, name: str, low: int, high: int) -> int:
    if type(value) is int and low <= value <= high:
        return value
    raise InvalidInput(f"{name} must be an integer from {low} to {high}, got {value!r}")


def ref_prepare_job(job: Job, max_payload: int, index: int | None, job_id: str) -> NewJob:
    """prepare_job as it was, with ``job_id`` for the generated id."""
    try:
        if not isinstance(job, Job):
            raise InvalidInput(f"expected a chronoq.Job, got {type(job).__name__}")
        if job.delay is not None and job.run_at is not None:
            raise InvalidInput("give delay or run_at, not both")
        return NewJob(
            id=job_id if job.id is None else validate_id(job.id),
            generated=job.id is None,
            payload=ref_encode_payload(job.payload, max_payload),
            delay_ms=0 if job.delay is None else duration_ms(job.delay, "delay"),
            run_at_ms=None if job.run_at is None else run_at_ms(job.run_at),
            priority=_ref_check_int(job.priority, "priority", -MAX_PRIORITY, MAX_PRIORITY),
            ttr_ms=duration_ms(job.ttr, "ttr", minimum_ms=1),
            max_attempts=_ref_check_int(job.max_attempts, "max_attempts", 1, 1_000_000),
            unique_for_ms=duration_ms(job.unique_for, "unique_for"),
        )
    except PayloadTooLarge as exc:
        if index is None:
            raise
        raise PayloadTooLarge(str(exc), exc.size, exc.limit, index) from None
    except InvalidJob:
        raise
    except InvalidInput as exc:
        raise InvalidJob(str(exc), index) from None


# -- encode, id_key, key_id --------------------------------------------------------

EDGES = [0, 1, 31, 32, 2**80 - 1, 2**80, 2**127, 2**127 - 1, 2**128 - 1, 2**128 - 2]


def random_values(seed: int, count: int, bits: int = 128) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(rng.randint(1, bits)) for _ in range(count)]


def test_encode_matches_the_reference() -> None:
    for value in EDGES + random_values(1, 50_000):
        assert ids.encode(value) == ref_encode(value), value


def test_encode_keeps_the_low_130_bits_like_the_reference() -> None:
    odd = [2**128, 2**130 - 1, 2**130, 2**200 + 12345, -1, -(2**140) + 7]
    for value in odd + [v - 2**199 for v in random_values(2, 5_000, bits=200)]:
        assert ids.encode(value) == ref_encode(value), value


def test_id_key_round_trips() -> None:
    for value in EDGES + random_values(3, 50_000):
        text = ids.encode(value)
        key = id_key(text)
        assert key == b"\x00" + value.to_bytes(16, "big")
        assert key_id(key) == text


def test_edge_ids() -> None:
    assert id_key("0" * 26) == b"\x00" * 17
    assert id_key("7" + "Z" * 25) == b"\x00" + b"\xff" * 16
    assert id_key("4" + "0" * 25) == b"\x00\x80" + b"\x00" * 15
    assert key_id(b"\x00" * 17) == "0" * 26
    assert key_id(b"\x00" + b"\xff" * 16) == "7" + "Z" * 25


NOT_CANONICAL = [
    "01arz3ndektsv4rrffq69g5fav",  # lowercase
    "01ARZ3NDEKTSV4RRFFQ69G5FAv",
    "01ARZ3NDEKTSV4RRFFQ69G5FAI",  # I, L, O, U are not Crockford digits
    "01ARZ3NDEKTSV4RRFFQ69G5FAL",
    "O1ARZ3NDEKTSV4RRFFQ69G5FAV",
    "01ARZ3NDEKTSV4RRFFQ69G5FUV",
    "81ARZ3NDEKTSV4RRFFQ69G5FAV",  # over 128 bits
    "Z" * 26,
    "01ARZ3NDEKTSV4RRFFQ69G5FA-",
    "01ARZ3NDEKTSV4RRFFQ69G5FA ",
    "01ARZ3NDEKTSV4RRFFQ69G5FAé",  # 26 characters, 27 bytes
    "01ARZ3NDEKTSV4RRFFQ69G5FA\x00",
    "01ARZ3NDEKTSV4RRFFQ69G5FA",  # 25
    "01ARZ3NDEKTSV4RRFFQ69G5FAVV",  # 27
    "\u0661" * 26,  # Arabic-Indic digit one: not [0-9]
]


@pytest.mark.parametrize("job_id", NOT_CANONICAL)
def test_other_ids_stay_text(job_id: str) -> None:
    assert id_key(job_id) == ref_id_key(job_id) == job_id.encode()
    assert key_id(id_key(job_id)) == job_id


def random_ids(seed: int, count: int) -> Iterator[str]:
    """Mostly 26 characters, mostly Crockford digits, often one that is not."""
    rng = random.Random(seed)
    noise = "ILOUilouabz089-_ .~é\x00\u0661"
    for _ in range(count):
        length = rng.choice([26, 26, 26, 26, 25, 27, 1, 8, 40])
        share = rng.choice([0.0, 0.0, 0.02, 0.3])
        first = rng.choice("01234567" if rng.random() < 0.8 else ALPHABET)
        yield first + "".join(
            rng.choice(noise) if rng.random() < share else rng.choice(ALPHABET)
            for _ in range(length - 1)
        )


def test_id_key_matches_the_reference() -> None:
    canonical = 0
    for job_id in random_ids(4, 100_000):
        key = id_key(job_id)
        assert key == ref_id_key(job_id), job_id
        assert key_id(key) == ref_key_id(key)
        if not job_id.startswith("\x00"):  # valid ids are printable: never so
            assert key_id(key) == job_id
        canonical += bool(ULID_RE.fullmatch(job_id))
    assert 20_000 < canonical < 80_000  # both kinds were tried


def test_key_id_matches_the_reference() -> None:
    rng = random.Random(5)
    for _ in range(20_000):
        key = b"\x00" + rng.randbytes(16)
        assert key_id(key) == ref_key_id(key)
    for text in (b"order-42", b"a", b"~" * 256):
        assert key_id(text) == ref_key_id(text)


# -- new_id ------------------------------------------------------------------------


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """A fresh id clock in ids, on a settable time and a seeded random source."""
    state = SimpleNamespace(ns=1_700_000_000_123_456_789, rng=random.Random(6))
    monkeypatch.setattr(ids, "_clock", ids._Clock())
    monkeypatch.setattr(ids, "time", SimpleNamespace(time_ns=lambda: state.ns))
    monkeypatch.setattr(ids, "os", SimpleNamespace(urandom=lambda n: state.rng.randbytes(n)))
    yield state


def value_of(ulid: str) -> int:
    return int(ulid.translate(TO_BASE32), 32)


def test_new_id_is_a_ulid_of_now() -> None:
    before = time.time_ns() // 1_000_000
    made = ids.new_id()
    after = time.time_ns() // 1_000_000
    assert ULID_RE.fullmatch(made)
    assert before <= value_of(made) >> 80 <= after
    assert id_key(made)[:1] == b"\x00"


def test_new_id_counts_up_within_one_ms(fake_clock: SimpleNamespace) -> None:
    made = [ids.new_id() for _ in range(20_000)]  # ~600 carries past a Z
    values = [value_of(x) for x in made]
    assert values == list(range(values[0], values[0] + len(made)))
    assert {v >> 80 for v in values} == {fake_clock.ns // 1_000_000}
    assert values[0] & (2**80 - 1) < 2**79  # headroom to count up


def test_new_id_borrows_the_next_ms_when_the_count_runs_out(fake_clock: SimpleNamespace) -> None:
    first = ids.new_id()
    ids._clock.rand = "Z" * 16
    borrowed = ids.new_id()
    assert value_of(borrowed) >> 80 == (value_of(first) >> 80) + 1
    assert borrowed > first
    assert value_of(borrowed) & (2**80 - 1) < 2**79  # a fresh random part


def test_new_id_keeps_counting_when_the_clock_goes_back(fake_clock: SimpleNamespace) -> None:
    first = ids.new_id()
    fake_clock.ns -= 5_000_000
    assert value_of(ids.new_id()) == value_of(first) + 1


def test_new_id_matches_the_reference(fake_clock: SimpleNamespace) -> None:
    """The same clock readings and random bytes give the same ids."""
    ref_state = SimpleNamespace(ns=fake_clock.ns, rng=random.Random(6))
    ref = RefClock(lambda: ref_state.ns, lambda n: ref_state.rng.randbytes(n))
    steps = random.Random(7)
    for _ in range(30_000):
        step = steps.choice([0, 0, 0, 0, 0, 1, 999_999, 1_000_000, 7_300_000, -2_000_000])
        fake_clock.ns += step
        ref_state.ns += step
        assert ids.new_id() == ref.next()
    ids._clock.rand, ref.last_rand = "Z" * 16, 2**80 - 1  # the borrow
    assert ids.new_id() == ref.next()
    assert ids.new_id() == ref.next()


def test_new_id_from_many_threads() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def produce(out: list[str]) -> None:
        for _ in range(20_000):
            out.append(ids.new_id())

    threads = [threading.Thread(target=produce, args=(out,)) for out in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [x for out in made for x in out]
    assert len(set(everything)) == len(everything)
    for out in made:
        assert out == sorted(out)


# -- shard_of ----------------------------------------------------------------------

SHARD_COUNTS = (1, 2, 3, 4, 7, 16, 1024)
# computed with the code before the fast paths: shard assignment is stored data
SHARDS = {
    "01J9ZQ8W5X3K7M2N4P6R8T0V1W": [0, 1, 2, 1, 2, 1, 337],
    "00000000000000000000000000": [0, 0, 1, 2, 5, 2, 450],
    "7ZZZZZZZZZZZZZZZZZZZZZZZZZ": [0, 1, 0, 3, 6, 7, 71],
    "01ARZ3NDEKTSV4RRFFQ69G5FAV": [0, 1, 0, 1, 5, 13, 13],
    "order-42": [0, 0, 1, 2, 1, 14, 734],
    "a": [0, 1, 0, 3, 4, 3, 579],
    "user:1234:welcome-mail": [0, 1, 2, 3, 1, 15, 719],
    "~!#$%&'()*+,-./": [0, 1, 1, 1, 3, 13, 237],
    "x" * 256: [0, 0, 2, 0, 4, 0, 528],
    "é-not-ascii": [0, 1, 1, 3, 3, 7, 823],
}


@pytest.mark.parametrize("job_id", list(SHARDS))
def test_shard_of_is_unchanged(job_id: str) -> None:
    assert [shard_of(job_id, n) for n in SHARD_COUNTS] == SHARDS[job_id]


def test_shard_of_is_crc32() -> None:
    for job_id in random_ids(8, 2_000):
        for n in SHARD_COUNTS[1:]:
            assert shard_of(job_id, n) == zlib.crc32(job_id.encode()) % n


# -- prepare_job and encode_payload -----------------------------------------------


def circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


PAYLOADS: list[Any] = [
    None,
    {"order": 42, "kind": "close"},
    [1, "two", 3.0],
    "text",
    b"raw",
    bytearray(b"raw"),
    memoryview(b"raw"),
    b"",
    "x" * 40,
    {1, 2},  # not JSON
    {"bad": math.nan},  # not JSON
    circular(),
    b"y" * 41,  # over the limit below
]
MAX_PAYLOAD = 40


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_encode_payload_matches_the_reference(payload: Any) -> None:
    assert outcome(encode_payload, payload, MAX_PAYLOAD) == outcome(
        ref_encode_payload, payload, MAX_PAYLOAD
    )


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return ("value", fn(*args))
    except InvalidJob as exc:
        return ("InvalidJob", (str(exc), exc.index))
    except InvalidInput as exc:
        return ("InvalidInput", str(exc))


class Numpyish(float):
    """A float that is not exactly float, as numpy's are."""


# each setting: the default (the very object), equal values of other types,
# values at and past the limits
SETTINGS: dict[str, list[Any]] = {
    "priority": [0, False, True, 0.0, Decimal(0), -0, 3, -1000, 1000, 1001, -1001, "0", None],
    "ttr": [30.0, 30, Decimal(30), Numpyish(30.0), 0.001, 0.0004, 0, -1.0, math.nan, math.inf],
    "max_attempts": [5, 5.0, True, Decimal(5), 1, 0, 1_000_000, 1_000_001, None],
    "unique_for": [0.0, 0, False, -0.0, Decimal(0), 1.5, -1, math.nan, 10 * 365 * 24 * 3600 + 1],
}


def jobs() -> Iterator[Job]:
    for priority, ttr, attempts, unique_for in product(*SETTINGS.values()):
        yield Job(
            {"a": 1}, priority=priority, ttr=ttr, max_attempts=attempts, unique_for=unique_for
        )
    yield Job()
    for payload in PAYLOADS:
        yield Job(payload, id="given", delay=2.5)
    for job_id in ["ok-id", "", " x", "x" * 257, "é", 42, None]:
        yield Job(job_id, id=job_id)  # type: ignore[arg-type]
    delays: list[Any] = [None, 0, 1.25, -1, True, "1"]
    for delay, run_at in product(delays, [None, 1.7e9, -5, 1e12]):
        yield Job(delay=delay, run_at=run_at, priority=1001, ttr=0)
    yield Job(delay=1, run_at=2, payload={1, 2})  # the first error is the one reported


def test_prepare_job_matches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("chronoq.job.codec.new_id", lambda: "GENERATED")
    kinds: Counter[str] = Counter()
    for job in jobs():
        for index in (None, 7):
            got = outcome(prepare_job, job, MAX_PAYLOAD, index)
            want = outcome(ref_prepare_job, job, MAX_PAYLOAD, index, "GENERATED")
            assert got == want, job
            if got[0] == "value":
                assert type(got[1]) is NewJob
            kinds[got[0]] += 1
    assert kinds["value"] > 500 and kinds["InvalidJob"] > 10_000, kinds


@pytest.mark.parametrize("not_a_job", [None, {"payload": 1}, NewJob("a", b"", 0, None, 0, 1, 1, 0)])
def test_prepare_job_wants_a_job(not_a_job: Any) -> None:
    assert outcome(prepare_job, not_a_job, MAX_PAYLOAD, 3) == outcome(
        ref_prepare_job, not_a_job, MAX_PAYLOAD, 3, "GENERATED"
    )


def test_a_forked_child_does_not_repeat_the_parents_ids() -> None:
    new_id = ids.new_id
    read, write = os.pipe()
    new_id()
    # as if the last id were made 10 s from now: every id until then counts up
    # from it, in parent and child alike unless the child starts afresh
    ids._clock.ms += 10_000
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, "".join(new_id() for _ in range(50)).encode())
        os._exit(0)
    mine = {new_id() for _ in range(50)}
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    theirs = {text[i : i + 26] for i in range(0, len(text), 26)}
    ids._clock = ids._Clock()
    assert len(theirs) == 50
    assert not mine & theirs
