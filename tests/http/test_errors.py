"""The typed errors of the HTTP clients: refused input (checked before any
request where ``Queue`` checks it, else by the server), lost leases, auth,
a store that is down, a server that cannot be reached or does not answer."""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chronoq.http
from chronoq import Job
from chronoq.errors import (
    BackendUnavailable,
    ChronoqError,
    DurabilityError,
    InvalidInput,
    InvalidJob,
    LeaseLost,
)
from chronoq.http import AuthError, HTTPError
from chronoq.server import Action, Auth, ServerSettings, Token, hash_token

from ..redis_server import RedisServer, free_port, redis_server_binary
from ..server.live import LiveServer, start_server

needs_redis = pytest.mark.skipif(  # in CI a missing redis-server fails, never skips
    redis_server_binary() is None and os.environ.get("CI") != "true",
    reason="redis-server is not installed",
)


def test_input_refused_before_any_request(api_client: Any, topic: str) -> None:
    with pytest.raises(InvalidJob, match="invalid topic") as bad_topic:
        api_client.put("no spaces", 1)
    assert bad_topic.value.index is None
    with pytest.raises(InvalidJob, match="delay") as bad_delay:
        api_client.put(topic, 1, delay=-1)
    assert bad_delay.value.index is None
    with pytest.raises(InvalidJob, match="JSON") as not_json:
        api_client.put_many(topic, [Job(1), Job(2), Job({1, 2})])
    assert not_json.value.index == 2
    with pytest.raises(InvalidJob, match="JSON"):
        api_client.put(topic, math.nan)
    with pytest.raises(InvalidJob) as bad_id:
        api_client.put_many(topic, [Job(1, id="ok"), Job(2, id="bad id")])
    assert bad_id.value.index == 1 and str(bad_id.value).startswith("job #1 of the batch")
    with pytest.raises(InvalidJob, match=r"expected a chronoq\.Job"):
        api_client.put_many(topic, [{"payload": 1}])
    for call in (
        lambda: api_client.reserve(topic, count=0),
        lambda: api_client.reserve(topic, wait=-1),
        lambda: api_client.ack(topic, "id"),  # no lease
        lambda: api_client.reschedule(topic, "id", delay=1, run_at=2),
        lambda: api_client.dead(topic, limit=0),
        lambda: api_client.requeue(topic, "one-id"),
        lambda: api_client.get(topic, "bad id"),
    ):
        with pytest.raises(InvalidInput):
            call()
    assert api_client.stats(topic)["total"] == 0


def test_input_refused_by_the_server(serve: Callable[..., LiveServer], store_url: str) -> None:
    small = serve(store=store_url + ("&" if "?" in store_url else "?") + "max_payload=100")
    with chronoq.http.Client(small.url) as client:
        with pytest.raises(InvalidJob, match="over the limit of 100") as big:
            client.put("t", "x" * 200)
        assert big.value.index is None
        with pytest.raises(InvalidJob, match="over the limit of 100") as big_in_batch:
            client.put_many("t", [Job(1), Job(2), Job("x" * 200)])
        assert big_in_batch.value.index == 2
        assert str(big_in_batch.value).count("job #2") == 1
        with pytest.raises(InvalidInput, match="max_count"):
            client.reserve("t", count=1001)
        with pytest.raises(InvalidInput, match="over the limit of 1000") as too_many:
            client.put_many("t", [Job(i) for i in range(1001)])
        assert not isinstance(too_many.value, InvalidJob)
        with pytest.raises(InvalidInput, match="limit"):
            client.dead("t", limit=1001)
        assert client.stats("t")["total"] == 0  # all or nothing


def test_body_over_the_servers_limit(serve: Callable[..., LiveServer]) -> None:
    server = serve(ServerSettings().with_limits(max_body=1000, max_wait=0.5))
    with chronoq.http.Client(server.url, long_poll=0.5) as client:
        with pytest.raises(InvalidInput, match="over 1000 bytes"):
            client.put("t", "x" * 2000)
        started = time.monotonic()
        assert client.reserve("t", wait=1.2) == []  # three polls within max_wait
        assert time.monotonic() - started >= 1.15
    with (
        chronoq.http.Client(server.url, long_poll=5) as client,
        pytest.raises(InvalidInput, match="max_wait"),
    ):
        client.reserve("t", wait=1)


def test_lease_lost_names_the_job(api_client: Any, topic: str) -> None:
    api_client.put(topic, 1, id="j", max_attempts=3)
    [job] = api_client.reserve(topic, ttr=0.05)
    time.sleep(0.1)
    for call in (api_client.ack, api_client.nack, api_client.touch, api_client.bury):
        with pytest.raises(LeaseLost) as lost:
            call(job)
        assert (lost.value.topic, lost.value.job_id) == (topic, "j")
    with pytest.raises(LeaseLost):
        api_client.release(topic, "never-put", "some-lease")


def _secured() -> ServerSettings:
    tokens = [
        Token("producer", hash_token("put-token"), ("orders.*",), frozenset({Action.PUT})),
        Token("all", hash_token("all-token"), ("*",), frozenset(Action)),
    ]
    return ServerSettings(auth=Auth(tokens))


@pytest.mark.parametrize("kind", ["sync", "aio"])
def test_auth_errors(serve: Callable[..., LiveServer], kind: str) -> None:
    from ..aio_bridge import BridgedQueue

    server = serve(_secured())

    def client(token: str | None) -> Any:
        if kind == "sync":
            return chronoq.http.Client(server.url, token)
        return BridgedQueue(lambda: chronoq.http.AsyncClient(server.url, token))  # type: ignore[arg-type, return-value]

    anonymous, unknown, producer = client(None), client("wrong"), client("put-token")
    try:
        for who in (anonymous, unknown):
            with pytest.raises(AuthError, match=r"Bearer|unknown token") as refused:
                who.put("orders.eu", 1)
            assert refused.value.status == 401 and refused.value.code == "unauthorized"
        assert producer.put("orders.eu", 1, id="a").created
        with pytest.raises(AuthError, match="may not reserve") as forbidden:
            producer.reserve("orders.eu")
        assert forbidden.value.status == 403 and isinstance(forbidden.value, PermissionError)
        with pytest.raises(AuthError):
            producer.put("billing", 1)
        assert isinstance(forbidden.value, ChronoqError)
        with client("all-token") as admin:
            assert [job.id for job in admin.reserve("orders.eu")] == ["a"]
    finally:
        for c in (anonymous, unknown, producer):
            c.close()


def test_a_wrong_base_url(server: LiveServer) -> None:
    with chronoq.http.Client(server.url + "/v1") as client:
        with pytest.raises(HTTPError, match="without /v1") as wrong:
            client.topics()
        assert wrong.value.status == 404 and wrong.value.code == "no_such_route"
    with pytest.raises(InvalidInput, match="base_url"):
        chronoq.http.Client("localhost:7070")
    with pytest.raises(InvalidInput, match="timeout"):
        chronoq.http.Client(server.url, timeout=0)


@pytest.mark.parametrize("kind", ["sync", "aio"])
def test_nothing_listening(kind: str) -> None:
    from ..aio_bridge import BridgedQueue

    url = f"http://127.0.0.1:{free_port()}"
    client: Any = (
        chronoq.http.Client(url, retries=1)
        if kind == "sync"
        else BridgedQueue(lambda: chronoq.http.AsyncClient(url, retries=1))  # type: ignore[arg-type, return-value]
    )
    with client:
        for call in (lambda: client.put("t", 1), lambda: client.stats("t")):
            with pytest.raises(BackendUnavailable, match=r"cannot connect .* chronoq serve"):
                call()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_no_answer_within_the_timeout(silent_server: str) -> None:
    with chronoq.http.Client(silent_server, timeout=0.2) as client:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match=r"no answer .* within 0\.2 s.*check before"):
            client.put("t", 1)
        with pytest.raises(BackendUnavailable, match=r"within 0\.5 s"):
            client.reserve("t", wait=0.3)  # the wait is added to the read timeout
        with pytest.raises(BackendUnavailable, match="no answer") as read:
            client.get("t", "x")
        assert "check before" not in str(read.value)  # a read may be repeated
        assert time.monotonic() - started < 3  # timeouts are not retried


@needs_redis
def test_store_down_is_backend_unavailable(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis")
    server = start_server(redis.url + "?prefix=down")
    try:
        with chronoq.http.Client(server.url, retries=1) as client:
            client.put("t", 1, id="a")
            redis.stop(kill=True)
            with pytest.raises(BackendUnavailable, match=r"503.*unavailable"):
                client.put("t", 1, id="b")
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match="503"):
                client.stats("t")
            assert time.monotonic() - started >= 0.9  # one retry, after Retry-After: 1
            redis.start()  # empty: it keeps nothing on disk
            assert client.put("t", 1, id="c").created
    finally:
        server.stop()
        redis.stop()


@needs_redis
def test_not_replicated_is_a_durability_error(redis_server: RedisServer) -> None:
    server = start_server(f"{redis_server.url}?prefix=durable&replicas=1&replica_timeout_ms=20")
    try:
        with chronoq.http.Client(server.url) as client:
            with pytest.raises(DurabilityError, match="replica"):
                client.put("t", 1, id="a")
            assert client.get("t", "a") is not None  # applied, not confirmed
    finally:
        server.stop()
