"""What idle long polls cost: ``POLLS`` connections each wait in ``POST
.../reserve`` (count 1, wait 60 s) on one empty topic, and the server's CPU
time (utime + stime of its process, all threads) is read over a window,
next to the same window with no poll and with one. On Redis, ``INFO clients`` says how
many connections the server holds blocked (one per topic is the design).

"All in" is taken as the server's CPU going quiet (at most one clock tick in
half a second) after the last request was written; then it is checked: one
``jobs:batch`` of ``POLLS`` due jobs must answer every poll with one job."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from client import Connection
from procs import TICKS

WAIT_S = 60.0
OPEN_AT_ONCE = 100  # connections opened concurrently (under the listen backlog)
SETTLE_S = 0.5
SETTLE_MAX_S = 30.0

CpuClock = Callable[[], float]


async def cpu_share(clocks: dict[str, CpuClock], seconds: float) -> dict[str, float]:
    """CPU % (of one core) of each process over ``seconds`` from now."""
    before = {name: clock() for name, clock in clocks.items()}
    began = time.monotonic()
    await asyncio.sleep(seconds)
    spent = time.monotonic() - began
    return {name: (clock() - before[name]) / spent * 100 for name, clock in clocks.items()}


async def settle(clock: CpuClock) -> float:
    """Wait until the process spends at most one tick in SETTLE_S; the seconds waited."""
    began = time.monotonic()
    last = clock()
    while time.monotonic() - began < SETTLE_MAX_S:
        await asyncio.sleep(SETTLE_S)
        now = clock()
        if now - last <= 1.0 / TICKS:
            break
        last = now
    return time.monotonic() - began


async def _open(port: int, n: int) -> list[Connection]:
    conns: list[Connection] = []
    while len(conns) < n:
        size = min(OPEN_AT_ONCE, n - len(conns))
        conns += await asyncio.gather(*(Connection.open(port) for _ in range(size)))
    return conns


async def _wake(port: int, topic: str, conns: list[Connection]) -> dict[str, Any]:
    """Put one due job per poll in one batch; how many polls got one, how fast."""
    jobs = [{"payload": {"k": k}} for k in range(len(conns))]
    producer = await Connection.open(port)
    began = time.perf_counter()
    try:
        await producer.post(f"/v1/topics/{topic}/jobs:batch", {"jobs": jobs})
        answers = await asyncio.wait_for(asyncio.gather(*(c.answer() for c in conns)), 60)
    finally:
        await producer.close()
    ms = (time.perf_counter() - began) * 1000
    answered = sum(1 for status, body in answers if status == 200 and len(body["jobs"]) == 1)
    return {"answered": answered, "all_answered_ms": ms}


async def idle_polls(
    port: int,
    topic: str,
    polls: int,
    seconds: float,
    clocks: dict[str, CpuClock],
    blocked: Callable[[], dict[str, int]] | None,
) -> dict[str, Any]:
    """``clocks``: the CPU seconds of "server" (and of "redis-server", if any)."""
    quiet = await cpu_share(clocks, seconds)
    conns: list[Connection] = []
    try:
        shares = []
        for n in (1, polls - 1):  # one poll, then all of them
            more = await _open(port, n)
            conns += more
            for conn in more:
                conn.send(f"/v1/topics/{topic}/reserve", {"count": 1, "wait": WAIT_S})
            settled = await settle(clocks["server"])
            shares.append(await cpu_share(clocks, seconds))
        redis_clients = blocked() if blocked is not None else None
        wake = await _wake(port, topic, conns)
    finally:
        await asyncio.gather(*(conn.close() for conn in conns))
    return {
        "polls": polls,
        "wait_s": WAIT_S,
        "window_s": seconds,
        "settled_after_s": settled,
        "cpu_percent": shares[-1],
        "cpu_percent_one_poll": shares[0],
        "cpu_percent_no_polls": quiet,
        "redis_clients": redis_clients,
        **wake,
    }
