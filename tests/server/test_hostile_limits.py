"""What a hostile client tried against ``chronoq serve`` (issue 24), part
two: a pop on thousands of topics, connections that never finish a request
or never send one, a flood of connections. The process itself (its exit on
SIGTERM, its store option) is in test_hostile_process.py."""

from __future__ import annotations

import functools
import json
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis

import chronoq
from chronoq import Job
from chronoq.backends.redis.aio_watcher import SPARES
from chronoq.backends.redis.packing import Packed
from chronoq.job import prepare_job
from chronoq.server import ServerSettings

from ..redis_server import RedisServer
from .live import LiveServer, start_server


def wait_until(check: Callable[[], bool], what: str, limit: float = 10) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


# -- 2. a pop's topics: bounded, one wake-up, nothing left open ----------------------------


@functools.cache
def _admin(server: str) -> redis.Redis:
    """One client per Redis server for the tests' looks, kept: a new one per
    look would count among the connections they count."""
    return redis.Redis.from_url(server)


def _clients(store_url: str) -> tuple[int, int]:
    """The Redis server's connected and blocked clients (this one not counted)."""
    info = _admin(store_url.partition("?")[0]).info("clients")
    return int(info["connected_clients"]) - 1, int(info["blocked_clients"])


@pytest.fixture
def popper(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve(ServerSettings().with_limits(pop_wait=20))


def test_a_pop_on_too_many_topics_is_refused_at_once(popper: LiveServer) -> None:
    many = ",".join(f"t{n}" for n in range(2000))
    one_more = ",".join(f"t{n}" for n in range(33))
    with httpx.Client(base_url=popper.url, timeout=30) as http:
        for topics in (many, one_more):
            started = time.monotonic()
            answer = http.post("/pop", json={"topic": topics})
            assert answer.status_code == 200 and answer.json()["code"] == 1
            assert "at most 32 topics" in answer.json()["message"]
            youzan = http.post("/v1/command", json={"command": "pop", "topic": topics, "wait": 20})
            assert youzan.json()["success"] is False and "at most 32" in youzan.json()["error"]
            assert time.monotonic() - started < 10  # not the 20 s of a pop's wait
    assert popper.app.polls.watchers == 0


@pytest.mark.parametrize("protocol", ["ouqiang", "youzan"])
def test_a_pop_on_many_topics_waits_on_one_wake_up_and_leaves_nothing_open(
    popper: LiveServer, store_url: str, protocol: str
) -> None:
    topics = [f"m{n}" for n in range(32)]  # the most a pop may name
    on_redis = store_url.startswith("redis")
    pop: dict[str, Any] = {"topic": ",".join(topics)}
    if protocol == "youzan":
        pop = {"command": "pop", "wait": 20, **pop}
    path = "/pop" if protocol == "ouqiang" else "/v1/command"
    with httpx.Client(base_url=popper.url, timeout=30) as http, ThreadPoolExecutor(1) as pool:
        assert http.get("/healthz").status_code == 200  # the app's pool is open
        before = _clients(store_url) if on_redis else None
        popping = pool.submit(http.post, path, json=pop)
        wait_until(lambda: popper.app.polls.waiting == 1, "the pop does not wait")
        assert popper.app.polls.watchers == 1  # one watcher of the 32 topics
        if before is not None:
            wait_until(lambda: _clients(store_url)[1] > before[1], "no BLPOP")
            assert _clients(store_url)[1] - before[1] == 1  # not one per topic
        with httpx.Client(base_url=popper.url, timeout=30) as other:
            job = {"topic": topics[20], "id": "late", "delay": 1, "ttr": 30, "body": "b"}
            assert other.post("/push", json=job).json()["code"] == 0
        answer = popping.result(timeout=30).json()
        assert (answer["data"]["id"] if protocol == "ouqiang" else answer["id"]) == "late"
    wait_until(lambda: popper.app.polls.watchers == 0, "the watcher outlives the pop")
    if before is not None:
        # no BLPOP left, and no connection per topic: at most one kept for the
        # next wait (SPARES), and what the pop's and the push's calls used
        wait_until(lambda: _clients(store_url)[1] == before[1], "a BLPOP is left blocked")
        connected, _ = _clients(store_url)
        assert connected - before[0] <= 3, (before, connected)


def _hang_up(live: LiveServer, path: str, body: dict[str, Any]) -> None:
    """Send a long poll, wait until it waits, and hang up (nothing else waits)."""
    raw = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {len(raw)}\r\n\r\n"
    with _connect(live) as sock:
        sock.sendall(head.encode() + raw)
        wait_until(lambda: live.app.polls.waiting == 1, "the pop does not wait")
    wait_until(lambda: live.app.polls.waiting == 0, "the hung-up pop still waits")


def _connections_made(store_url: str) -> int:
    """How many connections the Redis server has accepted so far."""
    return int(_admin(store_url.partition("?")[0]).info("stats")["total_connections_received"])


def test_a_hung_up_pop_releases_its_wait_at_once(popper: LiveServer, store_url: str) -> None:
    on_redis = store_url.startswith("redis")
    before = _clients(store_url) if on_redis else None
    made = _connections_made(store_url) if on_redis else 0
    for n in range(20):  # each on topics of its own: a watcher each while it waits
        _hang_up(popper, "/pop", {"topic": f"gone{n},other{n}"})
    # not after the 20 s of their pop_wait
    wait_until(lambda: popper.app.polls.watchers == 0, "a hung-up pop keeps its watcher")
    if before is not None:
        wait_until(lambda: _clients(store_url)[1] == before[1], "a hung-up pop stays blocked")
        # each ended its wait with CLIENT UNBLOCK and kept the connection for
        # the next: a few new connections for the 20, not one each
        assert _connections_made(store_url) - made <= 3


def test_long_polls_one_after_another_reuse_their_connection(redis_server: RedisServer) -> None:
    store_url = f"{redis_server.url}?prefix=cq-{uuid.uuid4().hex[:12]}"
    server = start_server(store_url)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.post("/v1/topics/q0/reserve", json={"wait": 0.2}).json() == {"jobs": []}
            made = _connections_made(store_url)
            for n in range(10):  # empty: each waits, times out, and its hub ends
                body = {"wait": 0.2}
                assert http.post(f"/v1/topics/q{n}/reserve", json=body).json() == {"jobs": []}
            for n in range(5):  # and each hangs up, on topic lists
                _hang_up(server, "/pop", {"topic": f"h{n},q{n}"})
            wait_until(lambda: server.app.polls.watchers == 0, "a watcher outlives its poll")
        # 15 waits, not a connection each: at most a pool connection or two
        # more, for calls of one poll's end and the next one's start at once
        assert _connections_made(store_url) - made <= 3
    finally:
        server.stop()


def test_a_wake_up_a_pop_did_not_use_goes_to_the_next(redis_server: RedisServer) -> None:
    """Pop A on (b, a) blocks first, pop B on (a) second. One transaction
    makes a job ready on a, then one on b: Redis hands a's token to A (first
    in line on a's list), b's waits in b's list. A takes b's job (b comes
    first in its list) and gives a's token back, so B gets a's job at once,
    not at the end of its wait."""
    store_url = f"{redis_server.url}?prefix=cq-{uuid.uuid4().hex[:12]}"
    server = start_server(store_url, ServerSettings().with_limits(pop_wait=20))
    try:
        with chronoq.connect(store_url) as queue, ThreadPoolExecutor(2) as pool:
            for topic in "ab":  # the store knows both topics, which hold nothing
                queue.put(topic, 0, id="known")  # (nothing delayed: no due-time
                queue.delete(topic, "known")  # timers, and their tokens, in the way)
            blocked = _clients(store_url)[1]
            with httpx.Client(base_url=server.url, timeout=30) as http_a:
                pop_a = pool.submit(http_a.post, "/pop", json={"topic": "b,a"})
                wait_until(lambda: _clients(store_url)[1] == blocked + 1, "pop A blocks")
                with httpx.Client(base_url=server.url, timeout=30) as http_b:
                    started = time.monotonic()
                    pop_b = pool.submit(http_b.post, "/pop", json={"topic": "a"})
                    wait_until(lambda: _clients(store_url)[1] == blocked + 2, "pop B blocks")
                    _put_at_once(queue, [("a", "ja"), ("b", "jb")])
                    assert pop_a.result(timeout=30).json()["data"]["id"] == "jb"
                    assert pop_b.result(timeout=30).json()["data"]["id"] == "ja"
                    assert time.monotonic() - started < 10  # not its 20 s pop_wait
    finally:
        server.stop()


def _put_at_once(queue: chronoq.Queue, jobs: list[tuple[str, str]]) -> None:
    """Put ``(topic, id)`` jobs, due now, in one Redis transaction: the
    scripts' calls that ``RedisCore.put_many`` makes, in MULTI/EXEC, so that
    Redis serves the blocked consumers only after all of them."""
    core = queue.backend._core  # type: ignore[attr-defined]
    client = redis.Redis(connection_pool=queue.backend._client.connection_pool)  # type: ignore[attr-defined]
    commands = []
    for topic, job_id in jobs:
        steps = core.put_many(topic, [prepare_job(Job(1, id=job_id), 1 << 20)], False)
        request = next(steps)  # the topic is known: the put's script call
        assert isinstance(request, Packed)  # one job: one call, on the shortest path
        commands.append(request.as_tuple())
        steps.close()
    transaction = client.pipeline(transaction=True)
    for command in commands:
        transaction.execute_command(*command)
    assert all(not isinstance(reply, Exception) for reply in transaction.execute())


def test_a_pop_is_woken_whatever_other_pops_on_its_topic_did(
    popper: LiveServer, store_url: str
) -> None:
    """A wake-up that a pop on other topics took, and did not use, goes to
    the next waiter: pops on (a, xN) that hung up, then a live pop on (a, b),
    and a push to a."""
    for n in range(10):
        _hang_up(popper, "/pop", {"topic": f"a,x{n}"})
    with httpx.Client(base_url=popper.url, timeout=30) as http, ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        popping = pool.submit(http.post, "/pop", json={"topic": "b,a"})
        wait_until(lambda: popper.app.polls.waiting == 1, "the live pop does not wait")
        with httpx.Client(base_url=popper.url, timeout=30) as other:
            job = {"topic": "a", "id": "j1", "delay": 1, "ttr": 30, "body": "b"}
            assert other.post("/push", json=job).json()["code"] == 0
        answer = popping.result(timeout=30).json()
        assert answer["data"]["id"] == "j1", answer
        assert time.monotonic() - started < 10  # not at the end of its 20 s wait


def test_long_polls_leave_no_blocked_connections_behind(redis_server: RedisServer) -> None:
    """40 long polls on 40 topics at once block 40 connections; when they end
    they are kept a few seconds for the next waits, then closed down to
    SPARES: the connections that last ran BLPOP are counted (the pool's ran
    scripts)."""
    store_url = f"{redis_server.url}?prefix=cq-{uuid.uuid4().hex[:12]}"
    server = start_server(store_url)
    topics = [f"w{n}" for n in range(40)]

    def poll(topic: str) -> int:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            body = {"count": 1, "wait": 1.5}
            return len(http.post(f"/v1/topics/{topic}/reserve", json=body).json()["jobs"])

    try:
        with ThreadPoolExecutor(len(topics)) as pool:
            polls = pool.map(poll, topics)
            wait_until(lambda: _blpops(store_url) == len(topics), "40 blocked waits")
            assert sum(polls) == 0
        wait_until(lambda: server.app.polls.watchers == 0, "watchers outlive their polls")
        wait_until(lambda: _clients(store_url)[1] == 0, "a BLPOP is left blocked")
        # kept a few seconds for the next waits, then closed down to SPARES
        wait_until(lambda: _blpops(store_url) <= SPARES, "idle BLPOP connections", limit=20)
    finally:
        server.stop()


def _blpops(store_url: str) -> int:
    """The Redis server's connections whose last command was a BLPOP."""
    client = _admin(store_url.partition("?")[0])
    return sum(1 for entry in client.client_list() if entry["cmd"] == "blpop")


# -- 4. connections: a head, a body and an idle spell each have a bound ------------------------

BOUNDS = ServerSettings().with_limits(head_timeout=0.5, body_timeout=0.5, keep_alive=0.5)


@pytest.fixture
def bounded(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve(BOUNDS)


def _connect(live: LiveServer) -> socket.socket:
    port = int(live.url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """What the server sends until it closes, and how long that took."""
    started, data = time.monotonic(), b""
    with sock:
        while chunk := sock.recv(65536):
            data += chunk
    return data, time.monotonic() - started


def test_a_half_sent_head_is_answered_408_and_closed(bounded: LiveServer) -> None:
    sock = _connect(bounded)
    sock.sendall(b"POST /v1/topics/t/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
    data, took = _until_closed(sock)
    assert data.startswith(b"HTTP/1.1 408 ") and b'"code":"timeout"' in data, data
    assert took < 5  # closed, not held for as long as the client likes


def test_a_connection_that_sends_nothing_is_closed(bounded: LiveServer) -> None:
    data, took = _until_closed(_connect(bounded))
    assert data.startswith(b"HTTP/1.1 408 ") and took < 5


def test_a_half_sent_body_is_answered_408_and_closed(bounded: LiveServer) -> None:
    sock = _connect(bounded)
    head = b"POST /v1/topics/t/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
    sock.sendall(head + b'{"id": "x"')
    data, took = _until_closed(sock)
    assert data.startswith(b"HTTP/1.1 408 ") and b"body_timeout" in data, data
    assert took < 5
    with httpx.Client(base_url=bounded.url) as http:
        assert http.get("/v1/topics/t/stats").json()["total"] == 0


def test_a_request_pipelined_behind_a_long_poll_is_answered_after_it(
    bounded: LiveServer,
) -> None:
    """A request pipelined behind a long poll of 1.5 s, its body sent apart,
    is answered after the poll, not timed out by the 0.5 s bounds."""
    poll = b'{"wait": 1.5}'
    put = b'{"id": "behind"}'
    sock = _connect(bounded)
    sock.sendall(
        b"POST /v1/topics/p/reserve HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Content-Length: {len(poll)}\r\n\r\n".encode() + poll
        + b"POST /v1/topics/q/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        + f"Content-Length: {len(put)}\r\n\r\n".encode()
    )  # fmt: skip
    wait_until(lambda: bounded.app.polls.waiting == 1, "the long poll does not wait")
    sock.sendall(put)
    data, _ = _until_closed(sock)
    assert data.count(b"HTTP/1.1 ") == 2 and b" 408 " not in data, data
    assert data.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 201 " in data, data


def test_an_idle_keep_alive_connection_is_closed(bounded: LiveServer) -> None:
    sock = _connect(bounded)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200 ")
    rest, took = _until_closed(sock)
    assert rest == b"" and took < 5
    # a second request on a kept connection is timed from its first byte
    sock = _connect(bounded)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0")
    data, _ = _until_closed(sock)
    assert data.startswith(b"HTTP/1.1 408 ")


def test_connections_past_the_cap_are_answered_503_and_closed(
    serve: Callable[..., LiveServer],
) -> None:
    live = serve(ServerSettings().with_limits(max_connections=4, head_timeout=30))
    open_now = live.server.server_state.connections
    held = [_connect(live) for _ in range(4)]
    try:
        wait_until(lambda: len(open_now) == 4, "four connections accepted")
        extra = _connect(live)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data, _ = _until_closed(extra)
        assert data.startswith(b"HTTP/1.1 503 ") and b"too_many_connections" in data, data
        assert b"retry-after: 1" in data.lower()
        # ones that send nothing are answered and closed too, long before the
        # 30 s head timeout: the cap bounds the descriptors, not only requests
        for _ in range(20):
            data, took = _until_closed(_connect(live))
            assert data.startswith(b"HTTP/1.1 503 ") and took < 10, (data, took)
        wait_until(lambda: len(open_now) == 4, "refused connections left open")
        # one whose client reads the answer and keeps its end open: closed by
        # the server a second later all the same
        stays = _connect(live)
        assert stays.recv(65536).startswith(b"HTTP/1.1 503 ")
        try:
            wait_until(lambda: len(open_now) == 4, "a refused connection held open", limit=5)
        finally:
            stays.close()
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: len(open_now) == 0, "the held connections closed")
    with httpx.Client(base_url=live.url) as http:
        assert http.get("/healthz").status_code == 200
