"""How an asyncio consumer waits after an empty reserve attempt
(``chronoq.aio.waiting``): woken by a change, at the next due time to the
tick, never after its limit; and ``sleep_until``, which times the last
stretch before a due time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import chronoq.aio
from chronoq.aio.waiting import WAKE_EARLY_S, sleep_until
from chronoq.backends.base import ReserveResult


def test_sleep_until_never_returns_before_its_deadline() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        for wait in (0.0, -0.001, 0.0003, 0.001, 0.0012, 0.0019, 0.003, 0.02):
            deadline = loop.time() + wait
            await sleep_until(loop, deadline)
            assert loop.time() >= deadline

    asyncio.run(main())


async def _lease_when_due(store_url: str, topic: str, early: float) -> tuple[list[Any], float]:
    """Put a job due in 0.3 s, then attempt and wait (``early``) until an
    attempt leases it: the empty attempts made with less than ``early`` to
    go, and the seconds from the first attempt. Checks it was not early."""
    async with chronoq.aio.connect(store_url) as q:
        await q.put(topic, "x", delay=0.3)
        watcher = await q.watch(topic)
        try:
            result = await q.reserve_once(topic, watcher=watcher)
            assert result.jobs == [] and result.wake_in_ms is not None
            started = time.monotonic()
            too_soon = []
            while not result.jobs:
                await q.wait_for_jobs(watcher, result, 10.0, early=early)
                result = await q.reserve_once(topic, watcher=watcher)
                if not result.jobs and (result.wake_in_ms or 0) < early * 1000:
                    too_soon.append(result.wake_in_ms)
            [job] = result.jobs
            assert time.time() * 1000 >= job.due_at
            await q.ack(job)
            return too_soon, time.monotonic() - started
        finally:
            await watcher.close()


def test_a_wait_ends_at_the_due_time_it_was_told(store_url: str, topic: str) -> None:
    _, took = asyncio.run(_lease_when_due(store_url, topic, WAKE_EARLY_S))
    assert took < 5.0  # the due time, not the limit


def test_the_attempt_after_a_timed_wait_finds_the_job(store_url: str, topic: str) -> None:
    # The watcher times all but the last `early` seconds before the due time;
    # the rest is slept on the loop's clock, so no attempt is spent in between
    # on finding nothing a moment too soon. (`early` is long here so that the
    # watcher's own lateness, about a ms, cannot hide such an attempt.)
    too_soon, _ = asyncio.run(_lease_when_due(store_url, topic, 0.05))
    assert too_soon == []


def test_a_wait_ends_when_a_job_is_put(store_url: str, topic: str) -> None:
    async def main() -> None:
        async with chronoq.aio.connect(store_url) as q:
            watcher = await q.watch(topic)
            try:
                result = await q.reserve_once(topic, watcher=watcher)
                assert result == ReserveResult([], None)

                async def put_soon() -> None:
                    await asyncio.sleep(0.2)
                    await q.put(topic, "now")

                putting = asyncio.ensure_future(put_soon())
                started = time.monotonic()
                await q.wait_for_jobs(watcher, result, 20.0)
                assert time.monotonic() - started < 10.0  # woken, not timed out
                await putting
                assert [j.payload for j in (await q.reserve_once(topic)).jobs] == ["now"]
            finally:
                await watcher.close()

    asyncio.run(main())


def test_a_wait_never_outlasts_its_limit(store_url: str, topic: str) -> None:
    async def main() -> None:
        async with chronoq.aio.connect(store_url) as q:
            await q.put(topic, "far", delay=3600)
            watcher = await q.watch(topic)
            try:
                result = await q.reserve_once(topic, watcher=watcher)
                started = time.monotonic()
                await q.wait_for_jobs(watcher, result, 0.2)
                assert time.monotonic() - started < 5.0
                await q.wait_for_jobs(watcher, ReserveResult([], 0.5), 0.0)  # due, no time left
            finally:
                await watcher.close()

    asyncio.run(main())
