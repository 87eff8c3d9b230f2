"""Recurring schedules on Redis (backends/redis/schedules.py): their writes
wait for replicas under ``?replicas=N`` like every other write, on both drivers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import chronoq
import chronoq.aio
from chronoq.errors import DurabilityError

from ..redis_server import RedisServer


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
