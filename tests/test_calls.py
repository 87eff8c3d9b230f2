"""Bad input through the public API, on every backend (docs/contract.md §1, §3): the checks of
``chronoq.calls`` and ``chronoq.job`` (the blocking facade).

Every rule raises ``InvalidJob`` (puts) or ``InvalidInput`` (everything else)
with a message naming what was wrong and what is allowed, and writes nothing.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import chronoq
from chronoq import Job, Reservation, State
from chronoq.errors import (
    BackendUnavailable,
    ChronoqError,
    DurabilityError,
    InvalidInput,
    InvalidJob,
    LeaseLost,
    NotFound,
)

from .localtime import local_timezone

MiB = 1024 * 1024
NOW_S = time.time()


def with_options(url: str, options: str) -> str:
    return url + ("&" if "?" in url else "?") + options


def assert_nothing_written(q: chronoq.Queue, topic: str, *ids: str) -> None:
    stats = q.stats(topic)
    assert stats["total"] == 0, stats
    assert topic not in q.topics()
    assert q.events(topic).events == []
    for job_id in ids:
        assert q.get(topic, job_id) is None


def assert_says(exc: BaseException, *fragments: str) -> None:
    text = str(exc).lower()
    for fragment in fragments:
        assert fragment.lower() in text, f"{fragment!r} not in message {str(exc)!r}"


# -- the error types ------------------------------------------------------------


def test_errors_share_one_base() -> None:
    for cls in (InvalidInput, InvalidJob, LeaseLost, NotFound, BackendUnavailable, DurabilityError):
        assert issubclass(cls, ChronoqError)
    assert issubclass(InvalidJob, InvalidInput)
    assert issubclass(InvalidInput, ValueError)
    assert chronoq.errors.InvalidJob is InvalidJob


# -- topics ---------------------------------------------------------------------

BAD_TOPICS = [
    pytest.param("", id="empty"),
    pytest.param("a" * 129, id="129-chars"),
    pytest.param("a b", id="space"),
    pytest.param("a/b", id="slash"),
    pytest.param("a*", id="star"),
    pytest.param("caf\u00e9", id="non-ascii"),
    pytest.param("abc\n", id="trailing-newline"),
    pytest.param(".abc", id="leading-dot"),
    pytest.param("-abc", id="leading-dash"),
    pytest.param("_abc", id="leading-underscore"),
    pytest.param(":abc", id="leading-colon"),
    pytest.param(5, id="int"),
    pytest.param(None, id="none"),
    pytest.param(b"abc", id="bytes"),
]


@pytest.mark.parametrize("bad", BAD_TOPICS)
def test_put_rejects_bad_topic(queue: chronoq.Queue, bad: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.put(bad, {"x": 1}, id="probe-job")
    assert_says(info.value, "topic", "1-128", "A-Z a-z 0-9 . _ : -")
    assert bad not in queue.topics()


@pytest.mark.parametrize("bad", BAD_TOPICS)
def test_put_many_rejects_bad_topic(queue: chronoq.Queue, bad: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.put_many(bad, [Job(payload=1, id="probe-job")])
    assert_says(info.value, "topic", "1-128")
    assert "job #" not in str(info.value)  # the topic is not any one job's fault
    assert bad not in queue.topics()


def test_put_with_bad_topic_raises_invalid_job(queue: chronoq.Queue) -> None:
    """Puts raise InvalidJob for every rule (docs/contract.md §1: the topic is half of a
    job's key), so ``except InvalidJob`` around a put catches every bad job."""
    with pytest.raises(InvalidJob) as info:
        queue.put("bad topic", 1)
    assert info.value.index is None
    with pytest.raises(InvalidJob) as info:
        queue.put_many("bad topic", [Job(payload=1)])
    assert info.value.index is None


TOPIC_CALLS: dict[str, Callable[[chronoq.Queue, Any], object]] = {
    "reserve": lambda q, t: q.reserve(t),
    "reserve-wait": lambda q, t: q.reserve(t, wait=0.1),
    "get": lambda q, t: q.get(t, "x"),
    "delete": lambda q, t: q.delete(t, "x"),
    "reschedule": lambda q, t: q.reschedule(t, "x", delay=1),
    "stats": lambda q, t: q.stats(t),
    "dead": lambda q, t: q.dead(t),
    "requeue": lambda q, t: q.requeue(t),
    "purge": lambda q, t: q.purge(t),
    "pause": lambda q, t: q.pause(t),
    "resume": lambda q, t: q.resume(t),
    "events": lambda q, t: q.events(t),
    "ack": lambda q, t: q.ack(t, "x", "lease"),
    "nack": lambda q, t: q.nack(t, "x", "lease"),
    "touch": lambda q, t: q.touch(t, "x", "lease"),
    "bury": lambda q, t: q.bury(t, "x", "lease"),
}


@pytest.mark.parametrize("call", sorted(TOPIC_CALLS))
@pytest.mark.parametrize("bad", ["", "a" * 129, "a b", ".abc", 7])
def test_other_calls_reject_bad_topic(queue: chronoq.Queue, call: str, bad: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        TOPIC_CALLS[call](queue, bad)
    assert_says(info.value, "topic", "1-128")
    assert bad not in queue.topics()


def test_topic_boundaries_are_accepted(queue: chronoq.Queue) -> None:
    for good in ["a" * 128, "0", "A9._:-z", "orders.close:eu-1"]:
        assert queue.put(good, 1, id="j").created
        assert queue.get(good, "j") is not None


# -- job fields -------------------------------------------------------------------


def _circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


#: Job/put keyword arguments that break one rule, and what the message must say
BAD_JOBS: list[Any] = [
    pytest.param({"id": ""}, ["id", "1-256"], id="id-empty"),
    pytest.param({"id": "x" * 257}, ["id", "1-256"], id="id-257-bytes"),
    pytest.param({"id": "a b"}, ["id", "spaces"], id="id-space"),
    pytest.param({"id": "a\tb"}, ["id", "printable ascii"], id="id-tab"),
    pytest.param({"id": "ab\n"}, ["id", "printable ascii"], id="id-newline"),
    pytest.param({"id": "caf\u00e9"}, ["id", "ascii"], id="id-non-ascii"),
    pytest.param({"id": "\u00e9" * 128}, ["id", "ascii"], id="id-256-utf8-bytes"),
    pytest.param({"id": 5}, ["id"], id="id-int"),
    pytest.param({"id": b"abc"}, ["id"], id="id-bytes"),
    pytest.param({"id": "."}, ["id", "'.' and '..'", "url"], id="id-dot"),
    pytest.param({"id": ".."}, ["id", "'.' and '..'", "url"], id="id-dot-dot"),
    pytest.param({"payload": object()}, ["payload", "JSON", "bytes"], id="payload-object"),
    pytest.param({"payload": {1, 2}}, ["payload", "JSON"], id="payload-set"),
    pytest.param({"payload": math.nan}, ["payload", "JSON"], id="payload-nan"),
    pytest.param({"payload": {"x": [math.inf]}}, ["payload", "JSON"], id="payload-inf"),
    pytest.param({"payload": {(1, 2): 3}}, ["payload", "JSON"], id="payload-tuple-key"),
    pytest.param({"payload": _circular()}, ["payload", "JSON"], id="payload-circular"),
    pytest.param({"delay": -1}, ["delay", "between 0"], id="delay-negative"),
    pytest.param({"delay": -0.001}, ["delay", "between 0"], id="delay-negative-ms"),
    pytest.param({"delay": math.nan}, ["delay", "seconds"], id="delay-nan"),
    pytest.param({"delay": math.inf}, ["delay", "seconds"], id="delay-inf"),
    pytest.param({"delay": True}, ["delay", "number of seconds"], id="delay-bool"),
    pytest.param({"delay": "5"}, ["delay", "number of seconds"], id="delay-str"),
    pytest.param({"delay": 1, "run_at": NOW_S + 60}, ["delay", "run_at"], id="delay-and-run_at"),
    pytest.param({"run_at": "2030-01-01"}, ["run_at", "datetime", "epoch"], id="run_at-str"),
    pytest.param({"run_at": [2030]}, ["run_at", "datetime"], id="run_at-list"),
    pytest.param({"run_at": object()}, ["run_at", "datetime"], id="run_at-object"),
    pytest.param({"run_at": True}, ["run_at", "datetime"], id="run_at-bool"),
    pytest.param({"run_at": math.nan}, ["run_at"], id="run_at-nan"),
    pytest.param({"run_at": math.inf}, ["run_at"], id="run_at-inf"),
    pytest.param({"run_at": -1}, ["run_at", "epoch"], id="run_at-negative"),
    pytest.param({"run_at": NOW_S * 1000}, ["run_at", "epoch"], id="run_at-in-ms"),
    pytest.param({"priority": -1001}, ["priority", "-1000", "1000"], id="priority-low"),
    pytest.param({"priority": 1001}, ["priority", "-1000", "1000"], id="priority-high"),
    pytest.param({"priority": 1.0}, ["priority", "integer"], id="priority-float"),
    pytest.param({"priority": 0.5}, ["priority", "integer"], id="priority-fraction"),
    pytest.param({"priority": True}, ["priority", "integer"], id="priority-bool"),
    pytest.param({"priority": "1"}, ["priority", "integer"], id="priority-str"),
    pytest.param({"ttr": 0}, ["ttr", "at least"], id="ttr-zero"),
    pytest.param({"ttr": 0.0004}, ["ttr", "at least"], id="ttr-under-1ms"),
    pytest.param({"ttr": -1}, ["ttr", "between 0"], id="ttr-negative"),
    pytest.param({"ttr": math.nan}, ["ttr"], id="ttr-nan"),
    pytest.param({"ttr": None}, ["ttr", "seconds"], id="ttr-none"),
    pytest.param({"max_attempts": 0}, ["max_attempts", "from 1"], id="max_attempts-zero"),
    pytest.param({"max_attempts": -3}, ["max_attempts", "from 1"], id="max_attempts-negative"),
    pytest.param({"max_attempts": 2.0}, ["max_attempts", "integer"], id="max_attempts-float"),
    pytest.param({"max_attempts": True}, ["max_attempts", "integer"], id="max_attempts-bool"),
    pytest.param({"unique_for": -1}, ["unique_for", "between 0"], id="unique_for-negative"),
    pytest.param({"unique_for": math.nan}, ["unique_for"], id="unique_for-nan"),
    pytest.param({"unique_for": "1"}, ["unique_for", "seconds"], id="unique_for-str"),
]


@pytest.mark.parametrize(("fields", "says"), BAD_JOBS)
def test_put_rejects_bad_field(
    queue: chronoq.Queue, topic: str, fields: dict[str, Any], says: list[str]
) -> None:
    fields = {"id": "probe-job", **fields}
    with pytest.raises(InvalidJob) as info:
        queue.put(topic, **fields)
    assert info.value.index is None
    assert "job #" not in str(info.value)
    assert_says(info.value, *says)
    assert_nothing_written(queue, topic, "probe-job")


@pytest.mark.parametrize(("fields", "says"), BAD_JOBS)
def test_put_many_rejects_bad_job_in_the_middle(
    queue: chronoq.Queue, topic: str, fields: dict[str, Any], says: list[str]
) -> None:
    jobs = [
        Job(payload={"n": 0}, id="first"),
        Job(payload={"n": 1}, id="second"),
        Job(**{"id": "probe-job", **fields}),
        Job(payload={"n": 3}, id="last"),
    ]
    with pytest.raises(InvalidJob) as info:
        queue.put_many(topic, jobs)
    assert info.value.index == 2
    assert "job #2" in str(info.value)
    assert_says(info.value, *says)
    assert_nothing_written(queue, topic, "first", "second", "probe-job", "last")


def test_put_many_names_the_first_bad_job(queue: chronoq.Queue, topic: str) -> None:
    jobs = [Job(id="ok"), Job(priority=5000), Job(ttr=0)]
    with pytest.raises(InvalidJob) as info:
        queue.put_many(topic, jobs)
    assert info.value.index == 1
    assert "job #1" in str(info.value)
    assert_nothing_written(queue, topic, "ok")


@pytest.mark.parametrize("position", [0, 4])
def test_put_many_rejects_bad_job_at_either_end(
    queue: chronoq.Queue, topic: str, position: int
) -> None:
    jobs = [Job(payload=n, id=f"j{n}") for n in range(5)]
    jobs[position] = Job(delay=-5, id="bad")
    with pytest.raises(InvalidJob) as info:
        queue.put_many(topic, jobs)
    assert info.value.index == position
    assert f"job #{position}" in str(info.value)
    assert_says(info.value, "delay")
    assert_nothing_written(queue, topic, *[f"j{n}" for n in range(5)])


@pytest.mark.parametrize("item", [{"payload": 1}, "payload", None, 42])
def test_put_many_rejects_what_is_not_a_job(queue: chronoq.Queue, topic: str, item: Any) -> None:
    with pytest.raises(InvalidJob) as info:
        queue.put_many(topic, [Job(id="a"), item, Job(id="b")])
    assert info.value.index == 1
    assert_says(info.value, "job #1", "chronoq.Job")
    assert_nothing_written(queue, topic, "a", "b")


def test_put_many_with_a_generator_is_validated_first(queue: chronoq.Queue, topic: str) -> None:
    jobs = (Job(id=f"g{n}", priority=2000 if n == 7 else 0) for n in range(10))
    with pytest.raises(InvalidJob) as info:
        queue.put_many(topic, jobs)
    assert info.value.index == 7
    assert_nothing_written(queue, topic, "g0", "g6", "g9")


def test_id_boundaries_are_accepted(queue: chronoq.Queue, topic: str) -> None:
    for good in ["x" * 256, "!", "~", "a-b_c.d:e/f|g{h}"]:
        result = queue.put(topic, 1, id=good)
        assert result.created and result.id == good
        assert queue.get(topic, good) is not None


@pytest.mark.parametrize("priority", [-1000, 1000, 0])
def test_priority_bounds_are_accepted(queue: chronoq.Queue, topic: str, priority: int) -> None:
    queue.put(topic, 1, id="p", priority=priority)
    info = queue.get(topic, "p")
    assert info is not None and info.priority == priority


def test_smallest_valid_durations_are_accepted(queue: chronoq.Queue, topic: str) -> None:
    queue.put(topic, 1, id="d", delay=0, ttr=0.001, unique_for=0, max_attempts=1)
    info = queue.get(topic, "d")
    assert info is not None
    assert info.ttr == 0.001 and info.max_attempts == 1 and info.unique_for == 0


# -- payload size ---------------------------------------------------------------


def test_payload_at_the_limit_is_accepted(queue: chronoq.Queue, topic: str) -> None:
    text = "x" * (MiB - 2)  # with its two quotes, exactly 1 MiB of JSON
    queue.put(topic, text, id="json")
    blob = bytes(range(256)) * (MiB // 256)
    queue.put(topic, blob, id="bytes")
    info = queue.get(topic, "json")
    assert info is not None and info.payload == text
    info = queue.get(topic, "bytes")
    assert info is not None and info.payload == blob


def test_payload_limit_counts_utf8_bytes(queue: chronoq.Queue, topic: str) -> None:
    queue.put(topic, "\u00e9" * ((MiB - 2) // 2), id="fits")  # 2 bytes each
    with pytest.raises(InvalidJob) as info:
        queue.put(topic, "\u00e9" * ((MiB - 2) // 2 + 1), id="over")
    assert_says(info.value, "payload", str(MiB))
    assert queue.get(topic, "over") is None


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param("x" * (MiB - 1), id="json-one-over"),
        pytest.param(b"\x01" * (MiB + 1), id="bytes-one-over"),
        pytest.param({"data": "y" * (2 * MiB)}, id="json-far-over"),
    ],
)
def test_payload_over_the_limit_is_rejected(queue: chronoq.Queue, topic: str, payload: Any) -> None:
    with pytest.raises(InvalidJob) as info:
        queue.put(topic, payload, id="big")
    assert_says(info.value, "payload", "over the limit", str(MiB), "max_payload")
    assert_nothing_written(queue, topic, "big")


@pytest.mark.parametrize(
    ("payload", "size"),
    [
        pytest.param("x" * (MiB - 1), MiB + 1, id="json"),
        pytest.param(b"\x01" * (MiB + 1), MiB + 1, id="bytes"),
    ],
)
def test_oversize_message_states_the_payload_size(
    queue: chronoq.Queue, topic: str, payload: Any, size: int
) -> None:
    with pytest.raises(InvalidJob) as info:
        queue.put(topic, payload)
    assert f"payload is {size} bytes" in str(info.value)


@pytest.mark.parametrize(
    "payload", [b"", b"\x00\xff binary", bytearray(b"\x00abc"), memoryview(b"mv\x00")]
)
def test_bytes_payloads_are_accepted(queue: chronoq.Queue, topic: str, payload: Any) -> None:
    queue.put(topic, payload, id="b")
    [job] = queue.reserve(topic)
    assert job.payload == bytes(payload)
    assert isinstance(job.payload, bytes)


def test_max_payload_option_sets_the_limit(store_url: str, topic: str) -> None:
    with chronoq.connect(with_options(store_url, "max_payload=100")) as q:
        q.put(topic, "x" * 98, id="json-fits")
        q.put(topic, b"b" * 100, id="bytes-fits")
        for payload in ["x" * 99, b"b" * 101, {"k": "v" * 100}]:
            with pytest.raises(InvalidJob) as info:
                q.put(topic, payload, id="over")
            assert_says(info.value, "over the limit of 100")
        with pytest.raises(InvalidJob) as info:
            q.put_many(topic, [Job(payload=1, id="a"), Job(payload="z" * 200, id="b")])
        assert info.value.index == 1
        assert q.stats(topic)["total"] == 2
        assert q.get(topic, "over") is None and q.get(topic, "a") is None


def test_max_payload_option_can_raise_the_limit(store_url: str, topic: str) -> None:
    with chronoq.connect(with_options(store_url, f"max_payload={2 * MiB}")) as q:
        q.put(topic, b"z" * (2 * MiB), id="two-mib")
        with pytest.raises(InvalidJob):
            q.put(topic, b"z" * (2 * MiB + 1), id="over")
        info = q.get(topic, "two-mib")
        assert info is not None and len(info.payload) == 2 * MiB


# -- run_at -----------------------------------------------------------------------


@pytest.fixture
def local_time_not_utc() -> Iterator[None]:
    """Make local time differ from UTC, so naive-as-local would show."""
    with local_timezone("America/New_York"):
        yield


@pytest.mark.usefixtures("local_time_not_utc")
def test_run_at_datetimes_naive_means_utc(queue: chronoq.Queue, topic: str) -> None:
    expected = calendar.timegm((2031, 5, 6, 7, 8, 9)) * 1000 + 123
    cases = {
        "naive": datetime(2031, 5, 6, 7, 8, 9, 123000),
        "utc": datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=UTC),
        "plus2": datetime(2031, 5, 6, 9, 8, 9, 123000, tzinfo=timezone(timedelta(hours=2))),
        "minus5": datetime(2031, 5, 6, 2, 8, 9, 123000, tzinfo=timezone(timedelta(hours=-5))),
        "epoch-float": expected / 1000,
        "epoch-int-ms-zero": (expected - 123) // 1000,
    }
    for job_id, run_at in cases.items():
        result = queue.put(topic, 1, id=job_id, run_at=run_at)
        want = expected - 123 if job_id == "epoch-int-ms-zero" else expected
        assert result.due_at == want, job_id
        info = queue.get(topic, job_id)
        assert info is not None and info.due_at == want and info.state == State.DELAYED


@pytest.mark.parametrize(
    "run_at",
    [
        pytest.param(datetime(2000, 1, 1), id="naive-past"),
        pytest.param(datetime(1960, 1, 1, tzinfo=UTC), id="before-epoch"),
        pytest.param(0, id="epoch-zero"),
        pytest.param(NOW_S - 3600, id="epoch-hour-ago"),
    ],
)
def test_run_at_in_the_past_means_due_now(queue: chronoq.Queue, topic: str, run_at: Any) -> None:
    before = time.time_ns() // 1_000_000
    result = queue.put(topic, 1, id="past", run_at=run_at)
    after = time.time_ns() // 1_000_000
    assert before - 1000 <= result.due_at <= after + 1000
    [job] = queue.reserve(topic)
    assert job.id == "past"


def test_run_at_epoch_seconds_accepts_what_a_datetime_accepts(
    queue: chronoq.Queue, topic: str
) -> None:
    """docs/contract.md §1: run_at is a datetime or epoch seconds; the two forms of one
    instant must be treated alike (here: 2045, nearer than a 10-year delay
    from a few years on)."""
    moment = datetime(2045, 1, 1, tzinfo=UTC)
    by_datetime = queue.put(topic, 1, id="dt", run_at=moment)
    by_epoch = queue.put(topic, 1, id="epoch", run_at=moment.timestamp())
    assert by_datetime.due_at == by_epoch.due_at == int(moment.timestamp()) * 1000


# -- consuming ----------------------------------------------------------------------


@pytest.fixture
def ready_job(queue: chronoq.Queue, topic: str) -> str:
    queue.put(topic, {"n": 1}, id="ready-job")
    return "ready-job"


@pytest.mark.parametrize("count", [0, -1, 10_001, 1.5, 2.0, True, "1", None])
@pytest.mark.usefixtures("ready_job")
def test_reserve_rejects_bad_count(queue: chronoq.Queue, topic: str, count: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.reserve(topic, count)
    assert_says(info.value, "count", "1 to 10000")
    stats = queue.stats(topic)
    assert stats["ready"] == 1 and stats["reserved"] == 0


@pytest.mark.parametrize("wait", [-1, -0.001, math.nan, math.inf, True, "1", None, 3601])
@pytest.mark.usefixtures("ready_job")
def test_reserve_rejects_bad_wait(queue: chronoq.Queue, topic: str, wait: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.reserve(topic, wait=wait)
    assert_says(info.value, "wait")
    assert queue.stats(topic)["reserved"] == 0


@pytest.mark.parametrize("ttr", [0, -1, math.nan, "30", True])
@pytest.mark.usefixtures("ready_job")
def test_reserve_rejects_bad_ttr(queue: chronoq.Queue, topic: str, ttr: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.reserve(topic, ttr=ttr)
    assert_says(info.value, "ttr")
    assert queue.stats(topic)["reserved"] == 0


@pytest.mark.usefixtures("ready_job")
def test_reserve_count_and_wait_bounds_are_accepted(queue: chronoq.Queue, topic: str) -> None:
    assert queue.reserve(topic, 10_000, wait=0) != []
    assert queue.reserve(topic, 1, wait=0.001) == []


@pytest.fixture
def leased(queue: chronoq.Queue, topic: str) -> Reservation:
    queue.put(topic, {"n": 1}, id="leased-job")
    [job] = queue.reserve(topic)
    return job


#: bad argument forms of a lease call: (args, kwargs) built from the reservation
LEASE_FORMS: dict[str, Callable[[Reservation], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "topic-only": lambda r: ((r.topic,), {}),
    "topic-and-id": lambda r: ((r.topic, r.id), {}),
    "topic-and-lease": lambda r: ((r.topic,), {"lease": r.lease}),
    "reservation-and-id": lambda r: ((r, r.id), {}),
    "reservation-and-lease": lambda r: ((r,), {"lease": r.lease}),
    "empty-lease": lambda r: ((r.topic, r.id, ""), {}),
    "int-lease": lambda r: ((r.topic, r.id, 5), {}),
    "bad-topic": lambda r: (("no such topic!", r.id, r.lease), {}),
    "bad-id": lambda r: ((r.topic, "a b", r.lease), {}),
    "id-only": lambda r: ((r.id,), {}),
    "dict": lambda r: (({"topic": r.topic, "id": r.id, "lease": r.lease},), {}),
    "none": lambda r: ((None,), {}),
}


@pytest.mark.parametrize("method", ["ack", "nack", "touch", "bury"])
@pytest.mark.parametrize("form", sorted(LEASE_FORMS))
def test_lease_calls_reject_bad_argument_forms(
    queue: chronoq.Queue, leased: Reservation, method: str, form: str
) -> None:
    args, kwargs = LEASE_FORMS[form](leased)
    with pytest.raises(InvalidInput) as info:
        getattr(queue, method)(*args, **kwargs)
    assert not isinstance(info.value, LeaseLost)
    if form in ("bad-topic", "bad-id"):
        assert_says(info.value, form.removeprefix("bad-"))
    info_after = queue.get(leased.topic, leased.id)
    assert info_after is not None
    assert info_after.state == State.RESERVED and info_after.deadline == leased.deadline
    queue.ack(leased)  # the lease is intact


def test_lease_form_messages_say_what_to_pass(queue: chronoq.Queue, leased: Reservation) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.ack(leased.topic, leased.id)
    assert_says(info.value, "Reservation", "topic", "id", "lease")
    with pytest.raises(InvalidInput) as info:
        queue.ack(leased, leased.id, leased.lease)
    assert_says(info.value, "Reservation", "not both")


def test_the_full_triple_is_accepted(queue: chronoq.Queue, leased: Reservation) -> None:
    queue.touch(leased.topic, leased.id, leased.lease, ttr=60)
    queue.ack(leased.topic, leased.id, leased.lease)
    assert queue.get(leased.topic, leased.id) is None


@pytest.mark.parametrize("bad", ["x", ("t", "id", "lease"), None, 5])
def test_ack_many_validates_every_item_before_acking(
    queue: chronoq.Queue, leased: Reservation, bad: Any
) -> None:
    with pytest.raises(InvalidInput):
        queue.ack_many([leased, bad])
    info = queue.get(leased.topic, leased.id)
    assert info is not None and info.state == State.RESERVED


@pytest.mark.parametrize("delay", [-1, math.nan, math.inf, True, "10"])
def test_nack_rejects_bad_delay(queue: chronoq.Queue, leased: Reservation, delay: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.nack(leased, delay=delay)
    assert_says(info.value, "delay")
    after = queue.get(leased.topic, leased.id)
    assert after is not None and after.state == State.RESERVED and after.last_error is None


@pytest.mark.parametrize("ttr", [0, -1, 0.0001, math.nan, "60"])
def test_touch_rejects_bad_ttr(queue: chronoq.Queue, leased: Reservation, ttr: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.touch(leased, ttr=ttr)
    assert_says(info.value, "ttr")
    after = queue.get(leased.topic, leased.id)
    assert after is not None and after.deadline == leased.deadline


# -- by id ------------------------------------------------------------------------------


@pytest.fixture
def delayed_job(queue: chronoq.Queue, topic: str) -> int:
    return queue.put(topic, 1, id="delayed-job", delay=600).due_at


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({}, id="neither"),
        pytest.param({"delay": 5, "run_at": NOW_S + 60}, id="both"),
        pytest.param({"delay": None, "run_at": None}, id="both-none"),
    ],
)
def test_reschedule_takes_exactly_one_of_delay_and_run_at(
    queue: chronoq.Queue, topic: str, delayed_job: int, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.reschedule(topic, "delayed-job", **kwargs)
    assert_says(info.value, "delay", "run_at")
    after = queue.get(topic, "delayed-job")
    assert after is not None and after.due_at == delayed_job


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": -1},
        {"delay": math.nan},
        {"delay": "5"},
        {"run_at": "tomorrow"},
        {"run_at": -5},
        {"run_at": math.inf},
    ],
)
def test_reschedule_rejects_bad_times(
    queue: chronoq.Queue, topic: str, delayed_job: int, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.reschedule(topic, "delayed-job", **kwargs)
    assert_says(info.value, next(iter(kwargs)))
    after = queue.get(topic, "delayed-job")
    assert after is not None and after.due_at == delayed_job
    assert [e.event for e in queue.events(topic).events] == ["put"]


@pytest.mark.parametrize("call", ["get", "delete", "reschedule"])
@pytest.mark.parametrize("bad", ["", "x" * 257, "a b", "caf\u00e9", 5, None])
def test_by_id_calls_reject_bad_id(
    queue: chronoq.Queue, topic: str, delayed_job: int, call: str, bad: Any
) -> None:
    kwargs = {"delay": 1} if call == "reschedule" else {}
    with pytest.raises(InvalidInput) as info:
        getattr(queue, call)(topic, bad, **kwargs)
    assert_says(info.value, "id", "1-256")
    assert queue.stats(topic)["total"] == 1


# -- topic-wide ---------------------------------------------------------------------------


@pytest.fixture
def dead_job(queue: chronoq.Queue, topic: str) -> str:
    queue.put(topic, 1, id="dead-job", max_attempts=1)
    [job] = queue.reserve(topic)
    queue.bury(job, error="test")
    return "dead-job"


@pytest.mark.parametrize(
    ("ids", "says"),
    [
        pytest.param("dead-job", ["ids", "list"], id="plain-string"),
        pytest.param(["dead-job", "a b"], ["id"], id="one-bad-id"),
        pytest.param(["dead-job", 5], ["id"], id="int-id"),
    ],
)
@pytest.mark.usefixtures("dead_job")
def test_requeue_rejects_bad_ids(
    queue: chronoq.Queue, topic: str, ids: Any, says: list[str]
) -> None:
    with pytest.raises(InvalidInput) as info:
        queue.requeue(topic, ids)
    assert_says(info.value, *says)
    assert queue.stats(topic)["dead"] == 1
    assert queue.stats(topic)["ready"] == 0


LIMIT_CALLS: dict[str, Callable[[chronoq.Queue, str, Any], object]] = {
    "dead": lambda q, t, limit: q.dead(t, limit=limit),
    "events": lambda q, t, limit: q.events(t, limit=limit),
    "events-all-topics": lambda q, t, limit: q.events(limit=limit),
}


@pytest.mark.parametrize("call", sorted(LIMIT_CALLS))
@pytest.mark.parametrize("limit", [0, -1, 100_001, 1.5, 10.0, True, "10", None])
@pytest.mark.usefixtures("dead_job")
def test_limits_out_of_bounds_are_rejected(
    queue: chronoq.Queue, topic: str, call: str, limit: Any
) -> None:
    with pytest.raises(InvalidInput) as info:
        LIMIT_CALLS[call](queue, topic, limit)
    assert_says(info.value, "limit", "1 to 100000")


@pytest.mark.parametrize("call", sorted(LIMIT_CALLS))
@pytest.mark.usefixtures("dead_job")
def test_limit_bounds_are_accepted(queue: chronoq.Queue, topic: str, call: str) -> None:
    LIMIT_CALLS[call](queue, topic, 1)
    LIMIT_CALLS[call](queue, topic, 100_000)


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("abc", id="letters"),
        pytest.param("1.5", id="decimal"),
        pytest.param(["1"], id="list"),
        pytest.param(object(), id="object"),
        pytest.param("9" * 30, id="out-of-range"),
    ],
)
def test_events_rejects_bad_cursor(queue: chronoq.Queue, topic: str, cursor: Any) -> None:
    queue.put(topic, 1)
    with pytest.raises(InvalidInput) as info:
        queue.events(topic, cursor=cursor)
    assert_says(info.value, "cursor")


def test_events_cursor_round_trips(queue: chronoq.Queue, topic: str) -> None:
    queue.put(topic, 1, id="a")
    page = queue.events(topic)
    queue.put(topic, 1, id="b")
    rest = queue.events(topic, cursor=page.cursor)
    assert [e.id for e in rest.events] == ["b"]


# -- connect ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["foo://bar", "http://localhost:7070/x", "mysql://localhost/db", "sqlite3:///x.db"]
)
def test_connect_rejects_unknown_scheme(url: str) -> None:
    with pytest.raises(InvalidInput) as info:
        chronoq.connect(url)
    assert_says(info.value, "scheme", url.split(":", 1)[0], "sqlite:///")


def test_connect_rejects_non_string_url() -> None:
    with pytest.raises(InvalidInput) as info:
        chronoq.connect(42)  # type: ignore[arg-type]
    assert_says(info.value, "url")


def test_connect_rejects_unknown_option(store_url: str) -> None:
    with pytest.raises(InvalidInput) as info:
        chronoq.connect(with_options(store_url, "max_payloads=10&colour=blue"))
    assert_says(info.value, "unknown", "max_payloads", "colour")


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1.5", "1e6", "0x10"])
def test_connect_rejects_bad_max_payload(store_url: str, value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        chronoq.connect(with_options(store_url, f"max_payload={value}"))
    assert_says(info.value, "max_payload", value, "integer")
