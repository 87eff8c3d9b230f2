"""Review findings on the Redis backend's two drivers (sync and redis.asyncio):
recurring schedules under ``?replicas=N``, the same on both paths; an
AsyncQueue used from a second event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

import chronoq
import chronoq.aio
from chronoq.errors import ChronoqError, DurabilityError

from ..redis_server import RedisServer

T = TypeVar("T")


@pytest.mark.timeout(30)
def test_schedule_writes_wait_for_replicas_like_every_other_write(
    server: RedisServer, raw_client: Callable[..., Any]
) -> None:
    raw = raw_client(server)
    url = f"{server.url}?replicas=1&replica_timeout_ms=100"  # this server has no replica
    with chronoq.connect(url) as q:
        with pytest.raises(DurabilityError, match="only 0 of 1"):
            q.recurring("t", name="sync", every=60)
        assert [r.name for r in q.recurring_list("t")] == ["sync"]  # applied; reads need none
        with pytest.raises(DurabilityError, match="only 0 of 1"):
            q.backend.schedules_mark("t", "sync", 60_000)
        with pytest.raises(DurabilityError, match="only 0 of 1"):
            q.recurring_remove("t", "sync")
        assert q.recurring_list("t") == []

    async def main() -> None:
        async with chronoq.aio.connect(url) as aq:
            with pytest.raises(DurabilityError, match="only 0 of 1"):
                await aq.recurring("t", name="aio", every=60)
            assert [r.name for r in await aq.recurring_list("t")] == ["aio"]
            with pytest.raises(DurabilityError, match="only 0 of 1"):
                await aq.backend.schedules_mark("t", "aio", 60_000)
            with pytest.raises(DurabilityError, match="only 0 of 1"):
                await aq.recurring_remove("t", "aio")
            assert await aq.recurring_list("t") == []

    asyncio.run(main())
    assert raw.hlen("chronoq:{t:0}:schedules") == 0


@pytest.mark.timeout(30)
def test_an_async_queue_is_bound_to_the_event_loop_it_is_first_used_on(
    server: RedisServer,
) -> None:
    q = chronoq.aio.connect(server.url)  # made outside any loop: bound at its first call
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()

    def on_other(coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, other).result(10)

    async def elsewhere() -> None:
        for call in (
            q.put("t", 2, id="b"),
            q.reserve("t", wait=0.1),
            q.recurring_list("t"),
        ):
            with pytest.raises(ChronoqError, match="another event loop"):
                await asyncio.wait_for(call, 5)

    async def again() -> None:
        async with q:
            assert (await q.put("t", 3, id="c")).created

    try:
        assert on_other(q.put("t", 1, id="a")).created
        asyncio.run(elsewhere())  # a clear error, not a RuntimeError or a hang
        assert on_other(q.get("t", "b")) is None
        on_other(q.close())
        asyncio.run(again())  # closed, it holds no connection: a new loop may use it
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()
