"""Bad input and a store that is down: every refusal is a 4xx (or 503) JSON
``{"error": {"code", "message"}}`` that says what to do; nothing is written;
never a 500, never a traceback."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from chronoq.server import ServerSettings

from ..redis_server import RedisServer, redis_server_binary
from .live import LiveServer, start_server


def _refused(answer: httpx.Response, status: int, code: str, words: str = "") -> None:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code, error
    assert words in error["message"]
    assert "Traceback" not in answer.text


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"{", "bad_json", "not valid JSON"),
        (b"[1]", "invalid_input", "Expected `object`"),
        (b'{"payload": 1, "dealy": 5}', "invalid_input", "unknown field `dealy`"),
        (b'{"priority": 1001}', "invalid_input", "<= 1000"),
        (b'{"delay": -1}', "invalid_input", ">= 0.0"),
        (b'{"delay": 1, "run_at": 2}', "invalid_job", "delay or run_at"),
        (b'{"id": "has space"}', "invalid_job", "invalid job id"),
        (b'{"payload_b64": "***"}', "invalid_input", "$.payload_b64"),
        (b'{"ttr": 0}', "invalid_input", ">= 0.001"),
        (b'{"run_at": 1e15}', "invalid_job", "milliseconds"),
    ],
)
def test_bad_puts(http: httpx.Client, body: bytes, code: str, words: str) -> None:
    answer = http.post("/v1/topics/t/jobs", content=body)
    _refused(answer, 400, code, words)
    assert http.get("/v1/topics/t/stats").json()["total"] == 0


def test_limits(serve: Callable[..., LiveServer]) -> None:
    settings = ServerSettings().with_limits(max_body=2000, max_count=10, max_wait=2, max_batch=5)
    server = serve(settings)
    with httpx.Client(base_url=server.url) as http:
        _refused(http.post("/v1/topics/t/jobs", json={"payload": "x" * 3000}), 413, "too_large")

        def chunks():  # no content-length: the limit is counted as it arrives
            for _ in range(10):
                yield b" " * 500

        _refused(http.post("/v1/topics/t/jobs", content=chunks()), 413, "too_large")
        _refused(http.post("/v1/topics/t/reserve", json={"count": 11}), 400, "invalid_input",
                 "max_count")  # fmt: skip
        _refused(http.post("/v1/topics/t/reserve", json={"wait": 3}), 400, "invalid_input",
                 "max_wait")  # fmt: skip
        jobs = [{"payload": i} for i in range(6)]
        _refused(http.post("/v1/topics/t/jobs:batch", json={"jobs": jobs}), 400, "too_many")
        assert http.get("/v1/topics/t/stats").json()["total"] == 0


def test_payload_limit_of_the_store(serve: Callable[..., LiveServer], tmp_path: Path) -> None:
    server = serve(store=f"sqlite:///{tmp_path / 'small.db'}?max_payload=100")
    with httpx.Client(base_url=server.url) as http:
        _refused(http.post("/v1/topics/t/jobs", json={"payload": "x" * 200}), 413, "too_large",
                 "over the limit of 100")  # fmt: skip


def test_routes_and_methods(http: httpx.Client) -> None:
    _refused(http.get("/v1/nothing"), 404, "no_such_route", "openapi")
    _refused(http.get("/v1/topics/t/reserve"), 405, "method_not_allowed", "POST")
    _refused(http.get("/v1/topics/bad%20topic/stats"), 400, "invalid_input", "invalid topic")
    _refused(http.get("/v1/topics/t/dead?limit=0"), 400, "invalid_input", "limit")
    _refused(http.get("/v1/topics/t/jobs/nope"), 404, "not_found")
    lost = http.post("/v1/topics/t/jobs/nope/ack", json={"lease": "x"})
    _refused(lost, 409, "lease_lost")


def test_a_client_that_sends_garbage_gets_400(server: LiveServer) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")


@pytest.mark.skipif(redis_server_binary() is None, reason="redis-server is not installed")
def test_store_down_is_503_with_retry_after(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis")
    server = start_server(redis.url + "?prefix=down")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.post("/v1/topics/t/jobs", json={"id": "a"}).status_code == 201
            redis.stop(kill=True)
            for answer in (
                http.post("/v1/topics/t/jobs", json={"id": "b"}),
                http.post("/v1/topics/t/reserve", json={"wait": 1}),
                http.get("/healthz"),
            ):
                _refused(answer, 503, "store_unavailable", "unavailable")
                assert answer.headers["retry-after"] == "1"
            redis.start()
            assert http.get("/healthz").status_code == 200
    finally:
        server.stop()
        redis.stop()


def test_without_tokens_browsers_of_other_sites_are_refused(http: httpx.Client) -> None:
    """A web page elsewhere cannot make a visitor's browser use a server that
    has no tokens: not by a cross-site form or fetch, not by DNS rebinding."""
    evil = {"origin": "http://evil.example", "content-type": "text/plain"}
    _refused(http.post("/v1/topics/t/jobs", content=b"{}", headers=evil), 403, "cross_origin")
    fetch = {"sec-fetch-site": "cross-site"}
    _refused(http.post("/v1/topics/t/purge", headers=fetch), 403, "cross_origin")
    rebound = {"host": "evil.example:7070"}
    _refused(http.get("/v1/topics", headers=rebound), 403, "foreign_host", "127.0.0.1")
    _refused(http.get("/ui/", headers=rebound), 403, "foreign_host")
    assert http.get("/v1/topics/t/stats").json()["total"] == 0
    # its own pages, and clients that are not browsers, are answered
    own = {"origin": str(http.base_url).rstrip("/"), "sec-fetch-site": "same-origin"}
    assert http.post("/v1/topics/t/jobs", json={}, headers=own).status_code == 201
    assert http.get("/v1/topics", headers={"host": "localhost"}).status_code == 200


def test_internal_topics_are_out_of_reach_without_tokens(http: httpx.Client) -> None:
    _refused(http.post("/v1/topics/chronoq.byid/purge"), 403, "internal_topic")
    _refused(http.post("/v1/topics/chronoq.byid/jobs", json={}), 403, "internal_topic")
    _refused(http.get("/v1/topics/chronoq.byid/stats"), 403, "internal_topic")


def test_metrics_need_read_on_every_topic(serve: Callable[..., LiveServer]) -> None:
    from chronoq.server import Action, Auth, Token, hash_token

    tokens = [
        Token("all", hash_token("s-all"), ("*",), frozenset({Action.READ})),
        Token("some", hash_token("s-some"), ("orders.*",), frozenset({Action.READ})),
    ]
    server = serve(ServerSettings(auth=Auth(tokens)))
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/metrics", headers={"authorization": "Bearer s-all"}).status_code == 200
        some = http.get("/metrics", headers={"authorization": "Bearer s-some"})
        _refused(some, 403, "forbidden", "'*'")
