"""Which requests are sent again, and when, against real servers: a chronoq
server whose redis-server was killed answers 503 ``store_unavailable`` with
``Retry-After: 1``; a port with nothing listening refuses connections; a
small HTTP server of the test's own on loopback (fault_server.py) drops
connections, holds them past the client's timeout, answers a proxy's error
pages, or forwards to a real chronoq server, and counts what it received."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import chronoq
import chronoq.http
from chronoq.errors import BackendUnavailable, InvalidInput, InvalidJob, NotFound
from chronoq.http import HTTPError
from chronoq.server import ServerSettings
from chronoq.server.web.problems import RETRY_AFTER_S

from ..redis_server import RedisServer, redis_server_binary
from ..server.live import LiveServer, ServeProcess, free_port, start_server
from .fault_server import DROP, Answer, FaultServer, Forward, Hold

BACKOFF_S = 0.25  # the client's first pause without a Retry-After (http/transport.py)


@dataclass
class StoreDown:
    """A real chronoq server on a Redis store whose redis-server is killed:
    it answers 503 until ``redis.start()`` brings the store back."""

    redis: RedisServer
    server: LiveServer


@pytest.fixture
def store_down(tmp_path: Path) -> Iterator[StoreDown]:
    if redis_server_binary() is None and os.environ.get("CI") != "true":
        pytest.skip("redis-server is not installed")  # in CI it fails, never skips
    redis = RedisServer(tmp_path / "redis")
    server = start_server(redis.url + "?prefix=retries")
    redis.stop(kill=True)
    try:
        yield StoreDown(redis, server)
    finally:
        server.stop()
        redis.stop()


@pytest.fixture
def sqlite_server(sqlite_url: str) -> Iterator[LiveServer]:
    server = start_server(sqlite_url)
    yield server
    server.stop()


def test_a_read_is_retried_after_503_as_retry_after_asks(store_down: StoreDown) -> None:
    # the store comes back while the client waits out the first 503's Retry-After
    forward = Forward(then=store_down.redis.start)
    with (
        FaultServer(forward, upstream=store_down.server.url) as proxy,
        chronoq.http.Client(proxy.url, retries=2) as client,
    ):
        stats = client.stats("t")
    with chronoq.http.Client(store_down.server.url) as direct:
        assert stats == direct.stats("t")
    assert [r.status for r in proxy.received] == [503, 200]
    assert proxy.gaps()[0] >= RETRY_AFTER_S - 0.05


def test_retries_run_out(store_down: StoreDown) -> None:
    with (
        FaultServer(upstream=store_down.server.url) as proxy,
        chronoq.http.Client(proxy.url, retries=1) as client,
        pytest.raises(BackendUnavailable, match="503"),
    ):
        client.get("t", "j")
    assert [r.status for r in proxy.received] == [503, 503]
    assert proxy.gaps()[0] >= RETRY_AFTER_S - 0.05
    # a proxy's 502 page has no Retry-After: the client's own backoff
    bad_gateway = Answer.page(502, "<html><body>502 Bad Gateway</body></html>")
    with (
        FaultServer(bad_gateway, bad_gateway) as proxy,
        chronoq.http.Client(proxy.url, retries=1) as client,
        pytest.raises(BackendUnavailable, match="502"),
    ):
        client.get("t", "j")
    assert proxy.count == 2 and proxy.gaps()[0] >= BACKOFF_S - 0.05
    with (
        FaultServer(upstream=store_down.server.url) as proxy,
        chronoq.http.Client(proxy.url, retries=0) as client,
        pytest.raises(BackendUnavailable, match="503"),
    ):
        client.topics()
    assert proxy.count == 1


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda c: c.put("t", 1, id="x"), id="put"),
        pytest.param(lambda c: c.reserve("t", wait=0.5), id="reserve"),
        pytest.param(lambda c: c.ack("t", "j", "lease"), id="ack"),
        pytest.param(lambda c: c.delete("t", "j"), id="delete"),
    ],
)
def test_writes_are_not_sent_again_after_503_or_a_dropped_connection(
    store_down: StoreDown, call: Callable[[chronoq.http.Client], object]
) -> None:
    for step, words in (
        (Forward(), "answered 503"),  # the real server's store_unavailable
        (DROP, "check before repeating"),  # closed without an answer
        (Hold(), "check before repeating"),  # no answer within the timeout
    ):
        with (
            FaultServer(step, upstream=store_down.server.url) as proxy,
            chronoq.http.Client(proxy.url, retries=3, timeout=0.3) as client,
            pytest.raises(BackendUnavailable) as failed,
        ):
            call(client)
        assert proxy.count == 1, (step, proxy.received)
        assert words in str(failed.value), (step, failed.value)
        if isinstance(step, Hold):
            assert "no answer from" in str(failed.value)


def test_a_refused_connection_is_tried_again_even_for_a_put(sqlite_url: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (
        chronoq.http.Client(url, retries=0) as client,
        pytest.raises(BackendUnavailable, match="cannot connect"),
    ):
        client.put("t", 1)  # nothing listens there yet
    started: list[LiveServer] = []

    def start_later() -> None:
        time.sleep(0.1)
        started.append(start_server(sqlite_url, port=port))

    thread = threading.Thread(target=start_later)
    thread.start()
    try:
        with chronoq.http.Client(url, retries=3) as client:
            before = time.monotonic()
            assert client.put("t", 1).created
            assert time.monotonic() - before >= BACKOFF_S - 0.05  # refused, then tried again
            thread.join()
            assert client.stats("t")["total"] == 1  # nothing had been sent: no second job
    finally:
        thread.join()
        for server in started:
            server.stop()


def test_a_dropped_connection_is_tried_again_for_a_read(sqlite_server: LiveServer) -> None:
    with chronoq.http.Client(sqlite_server.url) as direct:
        direct.put("a", 1)
    with (
        FaultServer(DROP, upstream=sqlite_server.url) as proxy,
        chronoq.http.Client(proxy.url) as client,
    ):
        assert client.topics() == ["a"]
    assert [r.status for r in proxy.received] == [None, 200]
    assert proxy.gaps()[0] >= BACKOFF_S - 0.05


def test_the_async_client_retries_the_same_way(store_down: StoreDown) -> None:
    upstream = store_down.server.url
    with contextlib.ExitStack() as stack:
        put_503 = stack.enter_context(FaultServer(upstream=upstream))
        read_503 = stack.enter_context(
            FaultServer(Forward(then=store_down.redis.start), upstream=upstream)
        )
        read_dropped = stack.enter_context(FaultServer(DROP, upstream=upstream))
        put_dropped = stack.enter_context(FaultServer(DROP, upstream=upstream))

        async def main() -> None:
            async with chronoq.http.AsyncClient(put_503.url) as client:
                with pytest.raises(BackendUnavailable, match="503"):
                    await client.put("t", 1)
            async with chronoq.http.AsyncClient(read_503.url) as client:
                assert (await client.stats("t"))["total"] == 0  # the store is back
            async with chronoq.http.AsyncClient(read_dropped.url) as client:
                assert await client.topics() == []
            async with chronoq.http.AsyncClient(put_dropped.url) as client:
                with pytest.raises(BackendUnavailable, match="check before repeating"):
                    await client.put("t", 1)

        asyncio.run(main())
    assert [r.status for r in put_503.received] == [503]
    assert [r.status for r in read_503.received] == [503, 200]
    assert read_503.gaps()[0] >= RETRY_AFTER_S - 0.05
    assert [r.status for r in read_dropped.received] == [None, 200]
    assert [r.status for r in put_dropped.received] == [None]
    with chronoq.http.Client(upstream) as direct:
        assert direct.stats("t")["total"] == 0  # neither put made a job


def test_what_each_status_becomes(tmp_path: Path) -> None:
    # what a real server refuses
    settings = ServerSettings().with_limits(max_body=2000, max_wait=2)
    server = start_server(f"sqlite:///{tmp_path / 'small.db'}?max_payload=100", settings)
    try:
        with chronoq.http.Client(server.url, retries=0, long_poll=3) as client:
            with pytest.raises(InvalidInput, match="max_wait"):
                client.reserve("t", wait=3)  # 400 invalid_input
            with pytest.raises(InvalidInput, match="over 2000 bytes"):
                client.put("t", "x" * 3000)  # 413 too_large
            jobs = [chronoq.Job(i) for i in range(3)] + [chronoq.Job("x" * 200)]
            with pytest.raises(InvalidJob) as invalid:
                client.put_many("t", jobs)  # 413 too_large, with the index
        specs = [{"payload": i} for i in range(3)] + [{"payload": "x" * 200}]
        raw = httpx.post(f"{server.url}/v1/topics/t/jobs:batch", json={"jobs": specs})
        problem = raw.json()["error"]
        assert invalid.value.index == 3 == problem["index"]
        assert str(invalid.value) == problem["message"]
        with (
            chronoq.http.Client(server.url + "/v1", retries=0) as client,
            pytest.raises(HTTPError, match="without /v1") as not_root,
        ):
            client.stats("t")  # 404 no_such_route: base_url is not the root
        assert (not_root.value.status, not_root.value.code) == (404, "no_such_route")
    finally:
        server.stop()
    # what a server answers that the client's own calls cannot make it answer,
    # and what a proxy in front of it answers
    cases: list[tuple[Answer, type[Exception]]] = [
        (Answer.problem(404, "not_found"), NotFound),
        (Answer.problem(500, "internal"), HTTPError),
        (Answer.problem(405, "method_not_allowed"), HTTPError),
        (Answer.page(502, "<html>bad gateway</html>"), BackendUnavailable),
        (Answer.page(200, "<html>a proxy</html>"), HTTPError),
        (Answer(418), HTTPError),
    ]
    for answer, error in cases:
        with (
            FaultServer(answer) as fault,
            chronoq.http.Client(fault.url, retries=0) as client,
            pytest.raises(error),
        ):
            client.delete("t", "j")
        assert fault.count == 1


def test_what_is_sent(sqlite_server: LiveServer) -> None:
    with (
        FaultServer(upstream=sqlite_server.url) as proxy,
        chronoq.http.Client(proxy.url, long_poll=0.3) as client,
    ):
        client.put("orders", b"\x00", id="a/b", priority=3, ttr=1)
        assert client.reserve("idle", count=2, wait=0.5, ttr=0.25) == []
    first, *polls = proxy.received
    assert (first.method, first.path) == ("POST", "/v1/topics/orders/jobs")
    assert first.json() == {"payload_b64": "AA==", "id": "a/b", "priority": 3, "ttr": 1.0}
    assert first.headers["user-agent"].startswith("chronoq-python")
    assert [(poll.method, poll.path) for poll in polls] == [("POST", "/v1/topics/idle/reserve")] * 2
    bodies = [poll.json() for poll in polls]
    assert bodies[0]["wait"] == 0.3 and 0.1 <= bodies[1]["wait"] <= 0.2
    assert all(b["count"] == 2 and b["ttr"] == 0.25 for b in bodies)
    with chronoq.http.Client(sqlite_server.url) as direct:
        job = direct.get("orders", "a/b")
        assert job is not None and (job.payload, job.priority, job.ttr) == (b"\x00", 3, 1.0)
        for i in range(3):
            direct.put("a", i, id=f"j{i}")
        direct.put("b", 0, id="k")
        held = sorted(direct.reserve("a", count=3) + direct.reserve("b"), key=lambda r: r.id)
    leases = [chronoq.JobLease(r.topic, r.id, "stale" if r.id == "j0" else r.lease) for r in held]
    with (
        FaultServer(upstream=sqlite_server.url) as proxy,
        chronoq.http.Client(proxy.url, max_batch=2) as client,  # split by topic, then max_batch
    ):
        assert client.ack_many(leases) == ["j0"]
    assert [(r.path, len(r.json()["leases"])) for r in proxy.received] == [
        ("/v1/topics/a/jobs:ack", 2),
        ("/v1/topics/a/jobs:ack", 1),
        ("/v1/topics/b/jobs:ack", 1),
    ]


def test_a_poll_ended_early_by_a_stopping_server_ends_the_reserve(tmp_path: Path) -> None:
    served = ServeProcess(tmp_path)  # `chronoq serve`: SIGTERM answers its long polls at once
    stopped: list[float] = []
    try:
        with FaultServer(upstream=served.url) as proxy:

            def stop_while_it_waits() -> None:
                deadline = time.monotonic() + 10
                while proxy.count < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(0.3)  # the poll has reached the server and waits
                stopped.append(time.monotonic())
                served.stop()

            thread = threading.Thread(target=stop_while_it_waits)
            thread.start()
            with chronoq.http.Client(proxy.url) as client:
                started = time.monotonic()
                assert client.reserve("t", wait=5) == []
                ended = time.monotonic()
            thread.join()
        assert proxy.count == 1 and [r.status for r in proxy.received] == [200]
        assert ended - stopped[0] < 2 and ended - started < 4  # not the 5 s of its wait
    finally:
        served.kill()
