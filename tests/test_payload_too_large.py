"""A payload over the store's ``max_payload`` raises ``PayloadTooLarge``, an
``InvalidJob`` that carries the payload's size and the limit (and the index
of a batch's job), through ``Queue`` and ``AsyncQueue`` on every store; a
payload of exactly the limit is put. The HTTP answers to it are in
tests/server/test_too_large.py, the clients' in tests/http/test_too_large.py."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq import Job
from chronoq.errors import InvalidInput, InvalidJob, PayloadTooLarge

from .aio_bridge import BridgedQueue

LIMIT = 100


@pytest.fixture(params=["sync", "aio"])
def small_queue(request: pytest.FixtureRequest, store_url: str) -> Iterator[Any]:
    """A queue of each API on a store whose payload limit is ``LIMIT`` bytes."""
    url = store_url + ("&" if "?" in store_url else "?") + f"max_payload={LIMIT}"
    if request.param == "sync":
        q: Any = chronoq.connect(url)
    else:
        q = BridgedQueue(lambda: chronoq.aio.connect(url))
    yield q
    q.close()


def test_the_error_is_an_invalid_job() -> None:
    assert issubclass(PayloadTooLarge, InvalidJob) and issubclass(PayloadTooLarge, InvalidInput)
    assert chronoq.errors.PayloadTooLarge is PayloadTooLarge


@pytest.mark.parametrize(
    ("payload", "size"),
    [
        pytest.param("x" * (LIMIT - 1), LIMIT + 1, id="json-one-over"),
        pytest.param(b"b" * (LIMIT + 1), LIMIT + 1, id="bytes-one-over"),
        pytest.param({"k": "v" * 1000}, 1008, id="json-far-over"),
    ],
)
def test_a_put_over_the_limit(small_queue: Any, topic: str, payload: Any, size: int) -> None:
    with pytest.raises(PayloadTooLarge) as info:
        small_queue.put(topic, payload, id="big")
    error = info.value
    assert (error.size, error.limit, error.index) == (size, LIMIT, None)
    assert str(error).startswith(f"payload is {size} bytes, over the limit of {LIMIT}: ")
    assert small_queue.get(topic, "big") is None


def test_a_put_at_the_limit(small_queue: Any, topic: str) -> None:
    assert small_queue.put(topic, "x" * (LIMIT - 2), id="json").created
    assert small_queue.put(topic, b"b" * LIMIT, id="bytes").created
    assert small_queue.get(topic, "bytes").payload == b"b" * LIMIT


def test_a_batch_with_one_job_over_the_limit(small_queue: Any, topic: str) -> None:
    jobs = [Job(1, id="a"), Job("x" * (LIMIT - 2), id="b"), Job(b"b" * (LIMIT + 1), id="c")]
    with pytest.raises(PayloadTooLarge) as info:
        small_queue.put_many(topic, jobs)
    error = info.value
    assert (error.size, error.limit, error.index) == (LIMIT + 1, LIMIT, 2)
    assert str(error).startswith(f"job #2 of the batch: payload is {LIMIT + 1} bytes")
    assert small_queue.stats(topic)["total"] == 0  # all or nothing


def test_the_error_survives_pickling() -> None:
    error = PayloadTooLarge("payload is 101 bytes, over the limit of 100", 101, 100, 3)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is PayloadTooLarge and str(copy) == str(error)
    assert (copy.size, copy.limit, copy.index) == (101, 100, 3)


def test_other_refusals_are_not_too_large(small_queue: Any, topic: str) -> None:
    with pytest.raises(InvalidJob) as info:
        small_queue.put_many(topic, [Job(1), Job({1, 2})])
    assert not isinstance(info.value, PayloadTooLarge) and info.value.index == 1
