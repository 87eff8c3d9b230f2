"""The Starlette prototypes of issue 26's measurement (server/starlette_app.py)
answer the /v1 routes as the own dispatch does, so that the benchmark
compares two servers doing the same work: the same requests, over real
HTTP, on each store, get the same statuses, error codes and answer shapes
from each; the known differences are asserted as such."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from chronoq.server import Action, Auth, ServerSettings, Token, create_app, hash_token
from chronoq.server.connections import ServerConfig

from ..redis_server import free_port

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench" / "http"))
from starlette_app import starlette_app

VARIANTS = ("own", "starlette", "starlette-router")
SECRET = "proto-secret"


def _serve(
    store: str, variant: str, settings: ServerSettings | None = None
) -> tuple[uvicorn.Server, str, Any]:
    """A server of ``variant`` in a thread: (uvicorn's server, its URL, the app)."""
    settings = settings or ServerSettings()
    own = create_app(store, settings=settings)
    app: Any = own if variant == "own" else starlette_app(own, lean=variant.endswith("router"))
    port = free_port()
    config = ServerConfig(
        app, limits=settings.limits, host="127.0.0.1", port=port, loop="uvloop",
        log_level="warning", lifespan="on", timeout_graceful_shutdown=10,
    )  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{port}", app


@pytest.fixture
def servers(store_url: str) -> Iterator[dict[str, str]]:
    """A server of each variant on the test's store, with a body limit of 1,000 bytes."""
    settings = ServerSettings().with_limits(max_body=1000)
    started = {variant: _serve(store_url, variant, settings) for variant in VARIANTS}
    yield {variant: url for variant, (_, url, _) in started.items()}
    for server, _, _ in started.values():
        server.should_exit = True


def _shape(answer: httpx.Response) -> tuple[int, Any]:
    """The status and what does not change between runs: an error's code, or
    the answer's keys (and the count of jobs of a reserve)."""
    if answer.headers.get("content-type") != "application/json":
        return answer.status_code, answer.text
    body = answer.json()
    if "error" in body:
        return answer.status_code, body["error"]["code"]
    if "jobs" in body:
        return answer.status_code, ("jobs", len(body["jobs"]))
    return answer.status_code, sorted(body)


def _exchange(http: httpx.Client, topic: str) -> dict[str, tuple[int, Any]]:
    """Named answers to the same requests, in order."""
    base = f"/v1/topics/{topic}"
    post = http.post
    answers = {
        "put": post(f"{base}/jobs", json={"payload": {"n": 1}}),
        "put id": post(f"{base}/jobs", json={"id": "a", "payload": 2}),
        "put id again": post(f"{base}/jobs", json={"id": "a", "payload": 2}),
    }
    reserved = answers["reserve"] = post(f"{base}/reserve", json={"count": 1, "ttr": 60})
    job = reserved.json()["jobs"][0]
    answers |= {
        "ack": post(f"{base}/jobs/{job['id']}/ack", json={"lease": job["lease"]}),
        "ack again": post(f"{base}/jobs/{job['id']}/ack", json={"lease": job["lease"]}),
        "reserve the rest": post(f"{base}/reserve", json={"count": 5, "ttr": 60}),
        "long poll, empty": post(f"{base}/reserve", json={"count": 1, "wait": 0.2}),
        "bad json": post(f"{base}/jobs", content=b"{"),
        "bad field": post(f"{base}/jobs", json={"delay": "soon"}),
        "wait too long": post(f"{base}/reserve", json={"count": 1, "wait": 3600}),
        "own topic": post("/v1/topics/chronoq.own/jobs", json={}),
        "bad topic": post("/v1/topics/bad!name/jobs", json={}),
        "too large": post(f"{base}/jobs", content=b'{"payload": "' + b"x" * 2000 + b'"}'),
        "stats": http.get(f"{base}/stats"),
        "get": http.get(f"{base}/jobs/a"),
        "delete": http.delete(f"{base}/jobs/a"),
        "get deleted": http.get(f"{base}/jobs/a"),
        "foreign host": http.get(f"{base}/stats", headers={"host": "evil.example"}),
        "wrong method": http.get(f"{base}/jobs"),
        "no route": http.get("/v1/topics/x/nothing"),
    }
    return {name: _shape(answer) for name, answer in answers.items()}


def test_each_variant_answers_as_the_own_dispatch(servers: dict[str, str]) -> None:
    seen = {}
    for variant, url in servers.items():
        with httpx.Client(base_url=url, timeout=10) as http:
            seen[variant] = _exchange(http, f"proto.{variant}")
            metrics = http.get("/metrics").text
        line = 'chronoq_http_request_duration_seconds_count{route="/v1/topics/{topic}/jobs",'
        assert f'{line}status="201"}} 2.0' in metrics, variant
        assert f'{line}status="200"}} 1.0' in metrics, variant
    own = seen["own"]
    put = ["created", "due_at", "id"]
    job = ["attempts", "created_at", "deadline", "due_at", "id", "last_error", "max_attempts"]
    job += ["payload", "priority", "state", "topic", "ttr", "unique_for"]
    assert own == {
        "put": (201, put), "put id": (201, put), "put id again": (200, put),
        "reserve": (200, ("jobs", 1)), "ack": (200, []), "ack again": (409, "lease_lost"),
        "reserve the rest": (200, ("jobs", 1)), "long poll, empty": (200, ("jobs", 0)),
        "bad json": (400, "bad_json"), "bad field": (400, "invalid_input"),
        "wait too long": (400, "invalid_input"), "own topic": (403, "internal_topic"),
        "bad topic": (400, "invalid_input"), "too large": (413, "too_large"),
        "stats": (200, ["dead", "delayed", "next_due_at", "paused", "ready", "reserved", "total"]),
        "get": (200, job), "delete": (200, ["deleted"]), "get deleted": (404, "not_found"),
        "foreign host": (403, "foreign_host"), "wrong method": (405, "method_not_allowed"),
        "no route": (404, "no_such_route"),
    }  # fmt: skip
    # what a migration would have to mend: the bare Router answers a wrong
    # method itself, in plain text; the application's max_body_size answers a
    # body whose Content-Length is over it in plain text, whatever the handlers
    differences = {
        "starlette-router": {"wrong method": (405, "Method Not Allowed")},
        "starlette": {"too large": (413, "Content Too Large")},
    }
    for variant, different in differences.items():
        assert seen[variant] == own | different, variant


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_checks_the_token(store_url: str, variant: str) -> None:
    token = Token("p", hash_token(SECRET), ("orders.*",), frozenset({Action.PUT}))
    server, url, _ = _serve(store_url, variant, ServerSettings(auth=Auth([token])))
    try:
        with httpx.Client(base_url=url, timeout=10) as http:
            missing = http.post("/v1/topics/orders.eu/jobs", json={})
            good = {"authorization": f"Bearer {SECRET}"}
            put = http.post("/v1/topics/orders.eu/jobs", json={}, headers=good)
            other = http.post("/v1/topics/billing/jobs", json={}, headers=good)
            reserve = http.post("/v1/topics/orders.eu/reserve", json={}, headers=good)
    finally:
        server.should_exit = True
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert put.status_code == 201
    assert (other.status_code, other.json()["error"]["code"]) == (403, "forbidden")
    assert (reserve.status_code, reserve.json()["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_long_poll_whose_client_hangs_up_takes_no_job(store_url: str, variant: str) -> None:
    """The hang-up watch reads the connection after Starlette's ``body()``
    as after the own dispatch's body loop (test_longpoll.py's test)."""
    server, url, app = _serve(store_url, variant)
    try:
        host, port = url.removeprefix("http://").split(":")
        body = b'{"wait": 20, "ttr": 600}'
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/topics/gone/reserve HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )  # fmt: skip
            deadline = time.monotonic() + 10
            while app.polls.waiting < 1:
                assert time.monotonic() < deadline, "the long poll did not start waiting"
                time.sleep(0.01)
        deadline = time.monotonic() + 10
        while app.polls.waiting:
            assert time.monotonic() < deadline, "the hung-up long poll is still waiting"
            time.sleep(0.01)
        with httpx.Client(base_url=url, timeout=10) as http:
            http.post("/v1/topics/gone/jobs", json={"id": "j", "payload": 1})
            time.sleep(0.2)
            assert http.get("/v1/topics/gone/jobs/j").json()["state"] == "ready"
    finally:
        server.should_exit = True
