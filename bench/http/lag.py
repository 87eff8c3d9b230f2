"""The hand-over lag through HTTP: how long after its due time a job reaches
a client that waits for it in a long poll.

A producer puts one job at a time (``POST .../jobs`` with ``run_at``), each
``LEAD_S`` ahead of its due time, the due times spread evenly at the given
rate. ``CONSUMERS`` clients each loop: ``POST .../reserve`` (count 1, wait
``WAIT_S``), then ``POST .../jobs/{id}/ack``. Two lags per job, in ms:

- client: ``time.time()`` when the reserve's answer was read - ``due_at``;
- server: when the server reserved it - ``due_at`` = ``deadline - ttr*1000 -
  due_at`` from the answer (whole ms: the store keeps ms), the part of the lag
  that is not HTTP and client.

Client and server share the machine's clock. The clients are ``client.py``'s
raw asyncio streams on uvloop, in one process."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any

from client import Connection
from common import percentile  # bench/common.py: run.py puts bench/ on the path

LEAD_S = 1.5  # each job is put this long before it is due
CONSUMERS = 8
WAIT_S = 10.0
TTR_S = 30.0
GRACE_S = 10.0  # how long after the last due time a missing job is waited for


def summary(lags: list[float]) -> dict[str, float]:
    if not lags:
        return {"p50": math.nan, "p99": math.nan, "max": math.nan, "min": math.nan}
    return {
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
        "max": max(lags),
        "min": min(lags),
    }


class _Tally:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.client: list[float] = []
        self.server: list[float] = []
        self.ids: set[str] = set()
        self.all_in = asyncio.Event()

    def add(self, job: dict[str, Any], received_ms: float) -> None:
        self.client.append(received_ms - job["due_at"])
        self.server.append(job["deadline"] - job["ttr"] * 1000 - job["due_at"])
        self.ids.add(job["id"])
        if len(self.client) >= self.expected:
            self.all_in.set()


async def _produce(port: int, topic: str, due: list[float], start: float, rate: float) -> None:
    loop = asyncio.get_running_loop()
    conn = await Connection.open(port)
    try:
        for k, run_at in enumerate(due):
            pause = start + k / rate - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            await conn.post(f"/v1/topics/{topic}/jobs", {"payload": {"k": k}, "run_at": run_at})
    finally:
        await conn.close()


async def _consume(port: int, topic: str, tally: _Tally) -> None:
    conn = await Connection.open(port)
    reserve = {"count": 1, "wait": WAIT_S, "ttr": TTR_S}
    try:
        while True:
            answer = await conn.post(f"/v1/topics/{topic}/reserve", reserve)
            received = time.time() * 1000
            for job in answer["jobs"]:
                tally.add(job, received)
                await conn.post(f"/v1/topics/{topic}/jobs/{job['id']}/ack", {"lease": job["lease"]})
    finally:
        await conn.close()


async def handover(port: int, topic: str, rate: float, seconds: float) -> dict[str, Any]:
    """One run at ``rate`` due jobs/s for ``seconds``: the lags and counts."""
    n = max(1, round(rate * seconds))
    tally = _Tally(n)
    loop = asyncio.get_running_loop()
    start_wall, start = time.time() + 0.2, loop.time() + 0.2
    due = [start_wall + LEAD_S + k / rate for k in range(n)]
    consumers = [asyncio.ensure_future(_consume(port, topic, tally)) for _ in range(CONSUMERS)]
    try:
        await _produce(port, topic, due, start, rate)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tally.all_in.wait(), LEAD_S + GRACE_S)
    finally:
        for task in consumers:
            task.cancel()
        outcomes = await asyncio.gather(*consumers, return_exceptions=True)
    failed = [o for o in outcomes if not isinstance(o, asyncio.CancelledError | type(None))]
    if failed:
        raise RuntimeError(f"a consumer failed: {failed[0]!r}")
    early = sum(1 for lag in tally.server if lag < 0)
    return {
        "rate": rate,
        "seconds": seconds,
        "expected": n,
        "delivered": len(tally.client),
        "distinct": len(tally.ids),
        "early": early,
        "consumers": CONSUMERS,
        "lead_s": LEAD_S,
        "client_ms": summary(tally.client),
        "server_ms": summary(tally.server),
    }
