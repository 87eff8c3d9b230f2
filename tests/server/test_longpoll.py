"""Long polls: they share the store's wake-up (one watcher per topic per
server process, one blocked connection on Redis), a hang-up gives the job
back at once, and each waiting request costs no store call while it waits."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import httpx
import pytest
import redis

from .live import LiveServer


def _blocked_clients(store_url: str) -> int | None:
    if not store_url.startswith("redis://"):
        return None
    client = redis.Redis.from_url(store_url.partition("?")[0])
    try:
        return int(client.info("clients")["blocked_clients"])
    finally:
        client.close()


def test_a_thousand_idle_long_polls_share_one_wake_up(server: LiveServer, store_url: str) -> None:
    polls = server.app.polls
    before = _blocked_clients(store_url)

    async def run() -> list[float]:
        limits = httpx.Limits(max_connections=1100, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

            async def poll() -> float:
                answer = await client.post("/v1/topics/idle/reserve", json={"wait": 30})
                return time.monotonic() if answer.json()["jobs"] else 0.0

            tasks = [asyncio.ensure_future(poll()) for _ in range(1000)]
            deadline = time.monotonic() + 30
            while polls.waiting < 1000:
                assert time.monotonic() < deadline, f"only {polls.waiting} long polls waiting"
                await asyncio.sleep(0.05)
            assert polls.watchers == 1
            if before is not None:
                assert _blocked_clients(store_url) - before <= 1
            answer = await client.post("/v1/topics/idle/jobs", json={"payload": 1})
            assert answer.status_code == 201
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED, timeout=10)
            assert len(done) >= 1
            # the rest keep waiting; stop them by closing the server side
            await server.on_server_loop(server.app.service.drain)
            return await asyncio.gather(*tasks)

    results = asyncio.run(run())
    assert sum(1 for r in results if r) == 1  # one job, one request got it
    assert polls.watchers == 0


def test_a_client_that_hangs_up_leaves_the_job_for_others(
    server: LiveServer, http: httpx.Client
) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    body = b'{"wait": 20, "ttr": 600}'
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/topics/gone/reserve HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        deadline = time.monotonic() + 10
        while server.app.polls.waiting < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    # hung up: the waiting request ends, and a job put now is not leased for it
    deadline = time.monotonic() + 10
    while server.app.polls.waiting:
        assert time.monotonic() < deadline, "the hung-up long poll is still waiting"
        time.sleep(0.01)
    http.post("/v1/topics/gone/jobs", json={"id": "j", "payload": 1})
    time.sleep(0.2)
    assert http.get("/v1/topics/gone/jobs/j").json()["state"] == "ready"


def test_a_job_leased_for_a_client_that_hung_up_goes_back_at_once(
    server: LiveServer, http: httpx.Client
) -> None:
    """Rounds of a job that becomes due just after the client hangs up (0 to
    20 ms after): whether the hub was reserving for it or not, the job is
    never left leased for its 600 s ttr. (A client that hangs up after the
    answer was written keeps its lease, as over any HTTP: not tested here.)"""
    host, port = server.url.removeprefix("http://").split(":")
    for round_ in range(20):
        job_id = f"r{round_}"
        http.post("/v1/topics/race/jobs", json={"id": job_id, "payload": 1, "delay": 0.12})
        body = b'{"wait": 5, "ttr": 600}'
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/topics/race/reserve HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body
            )  # fmt: skip
            time.sleep(0.1 - 0.01 * (round_ % 3))
        deadline = time.monotonic() + 5
        while True:  # leased at most until the server saw the hang-up
            state = http.get(f"/v1/topics/race/jobs/{job_id}").json()["state"]
            if state == "ready":
                break
            assert time.monotonic() < deadline, f"{job_id} still {state}"
            time.sleep(0.01)
        http.delete(f"/v1/topics/race/jobs/{job_id}")


@pytest.mark.parametrize("count", [1, 3])
def test_waiters_are_served_in_turn(serve: Callable[..., LiveServer], count: int) -> None:
    server = serve()

    async def run() -> list[list[str]]:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:

            async def poll() -> list[str]:
                answer = await client.post(
                    "/v1/topics/turns/reserve", json={"wait": 10, "count": count}
                )
                return [job["id"] for job in answer.json()["jobs"]]

            tasks = []
            for _ in range(3):
                tasks.append(asyncio.ensure_future(poll()))
                while server.app.polls.waiting < len(tasks):
                    await asyncio.sleep(0.01)
            jobs = [{"id": f"j{i}", "payload": i} for i in range(3 * count)]
            await client.post("/v1/topics/turns/jobs:batch", json={"jobs": jobs})
            return await asyncio.gather(*tasks)

    got = asyncio.run(run())
    assert sorted(i for ids in got for i in ids) == sorted(f"j{i}" for i in range(3 * count))
    assert all(ids for ids in got)
