"""chronoq on a Sentinel-managed primary (``redis+sentinel://``; the
``redis_sentinel`` fixture: a primary, a replica, one sentinel): the URL's
forms and errors, both APIs, and a failover that loses no confirmed put."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq.errors import BackendUnavailable, InvalidInput

from ..aio_bridge import BridgedQueue


@pytest.fixture
def url(redis_sentinel: Any) -> str:
    return f"{redis_sentinel.url}?prefix=cq-{uuid.uuid4().hex[:12]}"


def test_both_apis_on_a_sentinel_primary(url: str) -> None:
    q = chronoq.connect(url)
    try:
        q.put("s", {"n": 1}, id="a", delay=0.05)
        [job] = q.reserve("s", wait=5)
        q.ack(job)
    finally:
        q.close()
    aq = BridgedQueue(lambda: chronoq.aio.connect(url))
    try:
        aq.put("s", {"n": 2}, id="b", delay=0.05)
        [job] = aq.reserve("s", wait=5)
        assert job.payload == {"n": 2}
        aq.ack(job)
    finally:
        aq.close()


@pytest.mark.parametrize(
    ("tail", "words"),
    [
        ("", "name the primary"),
        ("/a/b/c", "name the primary"),
        ("/mymaster/x", "database number"),
        ("/mymaster?sentinel_bogus=1", "unknown store URL option"),
        ("/mymaster?retry_on_timeout=true", "never sends a call twice"),
    ],
)
def test_bad_sentinel_urls_are_refused(tail: str, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        chronoq.connect(f"redis+sentinel://127.0.0.1:26399{tail}")


def test_a_failover_loses_no_confirmed_put(redis_sentinel: Any, url: str) -> None:
    q = chronoq.connect(url + "&replicas=1")
    try:
        confirmed = [q.put("fo", n, id=f"j{n}").id for n in range(200)]
        old = redis_sentinel.primary_port()
        redis_sentinel.failover()
        assert redis_sentinel.primary_port() != old
        more: list[str] = []
        deadline = time.monotonic() + 30
        while len(more) < 50:  # the first calls may meet the switch: retried here
            try:
                more.append(q.put("fo", "after", id=f"after{len(more)}").id)
            except BackendUnavailable:
                assert time.monotonic() < deadline, "the new primary was never reached"
                time.sleep(0.1)
        got: set[str] = set()
        while jobs := q.reserve("fo", count=100):
            got.update(j.id for j in jobs)
            q.ack_many(jobs)
        assert got == set(confirmed) | set(more)
    finally:
        q.close()
