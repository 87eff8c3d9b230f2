"""``reserve(wait=...)`` over HTTP is a long poll: answered as soon as a job
is due or put, made of several requests when the wait is longer than one
poll, and given up cleanly by a cancelled asyncio task."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest

import chronoq
import chronoq.http

from ..server.live import LiveServer


def test_a_waiting_reserve_returns_when_the_job_is_due(api_client: Any, topic: str) -> None:
    api_client.put(topic, "soon", id="soon", delay=0.4)
    started = time.monotonic()
    [job] = api_client.reserve(topic, wait=5)
    took = time.monotonic() - started
    assert job.id == "soon" and 0.35 <= took < 2  # woken by the due time, not the wait's end


def test_a_put_wakes_a_waiting_reserve(api_client: Any, server: LiveServer, topic: str) -> None:
    def put_later() -> None:
        time.sleep(0.3)
        with chronoq.http.Client(server.url) as other:
            other.put(topic, "now", id="now")

    thread = threading.Thread(target=put_later)
    thread.start()
    started = time.monotonic()
    jobs = api_client.reserve(topic, wait=10)
    thread.join()
    assert [job.id for job in jobs] == ["now"] and time.monotonic() - started < 3


def test_an_empty_wait_ends_empty(api_client: Any, topic: str) -> None:
    started = time.monotonic()
    assert api_client.reserve(topic, wait=0.3) == []
    assert 0.29 <= time.monotonic() - started < 2


def test_a_wait_longer_than_one_poll(server: LiveServer, topic: str) -> None:
    with chronoq.http.Client(server.url, long_poll=0.25) as client:
        client.put(topic, "late", id="late", delay=0.7)
        started = time.monotonic()
        [job] = client.reserve(topic, wait=5)  # the third poll gets it
        assert job.id == "late" and 0.65 <= time.monotonic() - started < 2
        started = time.monotonic()
        assert client.reserve(topic, wait=0.6) == []
        assert 0.59 <= time.monotonic() - started < 2


def test_a_cancelled_async_reserve_leaves_no_job_leased(server: LiveServer, topic: str) -> None:
    async def main() -> None:
        async with chronoq.http.AsyncClient(server.url) as client:
            waiting = asyncio.ensure_future(client.reserve(topic, wait=10))
            await asyncio.sleep(0.3)
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            for _ in range(200):  # the server sees the hang-up
                if server.app.polls.waiting == 0:
                    break
                await asyncio.sleep(0.01)
            assert server.app.polls.waiting == 0
            await client.put(topic, "x", id="x")
            [job] = await client.reserve(topic, wait=2)
            assert job.id == "x" and job.attempts == 1

    asyncio.run(main())


def test_async_reserves_wait_side_by_side(server: LiveServer, topic: str) -> None:
    async def main() -> None:
        async with chronoq.http.AsyncClient(server.url) as client:
            waiting = [asyncio.ensure_future(client.reserve(topic, wait=10)) for _ in range(3)]
            await asyncio.sleep(0.2)
            await client.put_many(topic, [chronoq.Job(i, id=f"j{i}") for i in range(3)])
            started = time.monotonic()
            got = await asyncio.wait_for(asyncio.gather(*waiting), 5)
            assert sorted(job.id for jobs in got for job in jobs) == ["j0", "j1", "j2"]
            assert time.monotonic() - started < 3

    asyncio.run(main())


def test_the_async_client_as_a_context_manager(server: LiveServer, topic: str) -> None:
    async def main() -> None:
        client = chronoq.http.AsyncClient(server.url)
        assert repr(client) == f"<chronoq.http.AsyncClient {server.url}>"
        async with client as same:
            assert same is client
            assert (await client.put(topic, b"\x00", id="b")).created
            assert (await client.get(topic, "b")).payload == b"\x00"
        with pytest.raises(RuntimeError):  # closed: httpx refuses
            await client.topics()

    asyncio.run(main())
