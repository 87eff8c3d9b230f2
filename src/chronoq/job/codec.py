"""The checks and encodings of a job's fields: durations and due times to
ms, payloads to bytes (compact JSON, or bytes as they are), trace contexts
(W3C ``traceparent``, as text or in 25 bytes), a ``Job`` to the ``NewJob`` a
backend takes, and the shard of an id. No I/O."""

from __future__ import annotations

import json
import json.scanner
import math
import re
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from chronoq.errors import InvalidInput, InvalidJob, PayloadTooLarge
from chronoq.ids import new_id
from chronoq.job.values import (
    DEFAULT_MAX_PAYLOAD,
    MAX_DURATION_S,
    MAX_FORECAST_STEPS,
    MAX_PRIORITY,
    YEAR_10000,
    Job,
    NewJob,
)
from chronoq.names import validate_group, validate_new_id

__all__ = [
    "check_int",
    "decode_payload",
    "duration_ms",
    "encode_payload",
    "finite",
    "forecast_steps",
    "prepare_job",
    "run_at_ms",
    "shard_of",
    "traceparent_from_bytes",
    "traceparent_to_bytes",
    "validate_traceparent",
]

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


def finite(value: int | float) -> bool:
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
        if not finite(value):
            raise InvalidInput(
                f"{name} must be between 0 and {MAX_DURATION_S} seconds, got {value!r}"
            )
        return duration_ms(float(value), name, minimum_ms=minimum_ms)  # numpy & co.
    else:
        raise InvalidInput(f"{name} must be a number of seconds, got {value!r}")
    if not finite(value) or not 0 <= value <= MAX_DURATION_S:
        raise InvalidInput(f"{name} must be between 0 and {MAX_DURATION_S} seconds, got {value!r}")
    raise InvalidInput(f"{name} must be at least {minimum_ms / 1000:g} s, got {value!r}")


def run_at_ms(value: object, name: str = "run_at") -> int:
    """A datetime (naive means UTC) or epoch seconds to epoch ms; ``name``
    is the argument's, for the message."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return math.floor(moment.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value):
        raise InvalidInput(f"{name} must be a datetime or epoch seconds, got {value!r}")
    if not 0 <= value < YEAR_10000:  # beyond that it is ms or µs passed as seconds
        raise InvalidInput(
            f"{name} {value!r} is not an epoch time in seconds before the year 10000 "
            "(was it in milliseconds?)"
        )
    return math.floor(value * 1000)


def forecast_steps(start_ms: int, until_ms: int, step_ms: int) -> int:
    """The steps of a forecast from the store's now (``start_ms``): enough to
    reach ``until_ms``, at most ``MAX_FORECAST_STEPS``; raises ``InvalidInput``.
    Both stores check with it, as only they know their now."""
    if until_ms <= start_ms:
        raise InvalidInput(
            f"until must be later than now, by the store's clock: got {_iso(until_ms)}, "
            f"and it is {_iso(start_ms)}; pass a time in the future"
        )
    steps = -(-(until_ms - start_ms) // step_ms)
    if steps > MAX_FORECAST_STEPS:
        raise InvalidInput(
            f"a forecast takes at most {MAX_FORECAST_STEPS} steps, and {_iso(until_ms)} is "
            f"{steps} steps of {step_ms / 1000:g} s away: pass a larger step or an earlier until"
        )
    return steps


def _iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


# version 00 of W3C Trace Context: lower-case hex, trace and span ids not all zero
TRACEPARENT_PATTERN = r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$"
_TRACEPARENT = re.compile(TRACEPARENT_PATTERN)
TRACEPARENT_BYTES = 25  # trace id (16), span id (8), flags (1)


def validate_traceparent(value: object) -> str:
    """A W3C ``traceparent`` (version 00), as given; raises ``InvalidInput``."""
    if type(value) is str and _TRACEPARENT.fullmatch(value):
        return value
    raise InvalidInput(
        "traceparent must be a W3C trace context of version 00, "
        f"'00-<32 hex digits>-<16 hex digits>-<2 hex digits>' in lower case, got {value!r}"
    )


def traceparent_to_bytes(traceparent: str) -> bytes:
    """A checked ``traceparent`` in ``TRACEPARENT_BYTES`` (the Redis record's)."""
    return bytes.fromhex(traceparent[3:35] + traceparent[36:52] + traceparent[53:55])


def traceparent_from_bytes(data: bytes) -> str:
    raw = data.hex()
    return f"00-{raw[:32]}-{raw[32:48]}-{raw[48:50]}"


def check_int(value: object, name: str, low: int, high: int) -> int:
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


def _checked_extras(trace: object, group: object) -> tuple[str | None, str | None]:
    """A job's trace context and group, each checked when given."""
    return (
        None if trace is None else validate_traceparent(trace),
        None if group is None else validate_group(group),
    )


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
            priority = check_int(priority, "priority", -MAX_PRIORITY, MAX_PRIORITY)
        ttr = job.ttr
        if type(ttr) is float and ttr == default.ttr:
            ttr_ms = _TTR_MS
        else:
            ttr_ms = duration_ms(ttr, "ttr", minimum_ms=1)
        attempts = job.max_attempts
        if attempts is not default.max_attempts:
            attempts = check_int(attempts, "max_attempts", 1, 1_000_000)
        unique_for = job.unique_for
        unique_ms = _UNIQUE_FOR_MS
        if type(unique_for) is not float or unique_for != default.unique_for:
            unique_ms = duration_ms(unique_for, "unique_for")
        generated = job_id is None
        trace, group = job.traceparent, job.group
        if trace is not None or group is not None:
            trace, group = _checked_extras(trace, group)
        fields = (
            new, payload, delay_ms, at_ms, priority, ttr_ms, attempts, unique_ms, generated, trace,
            group,
        )  # fmt: skip
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
