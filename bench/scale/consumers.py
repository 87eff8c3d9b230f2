"""The consumers of the promotion phase: processes that wait in
``reserve(count, wait=…)`` on the round's topic, ack what they get with ``ack_many``,
and note for every job its delivery time (this machine's clock, read when reserve
returns), its lag (that time − ``due_at``), its shard, and whether the store leased it
before its due time by the store's own clock (lease deadline − ttr < due_at), which
guarantee 1 forbids."""

from __future__ import annotations

import pickle
import time
from array import array
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from common import percentile
from producers import SPAWN

import chronoq

__all__ = ["Consumers", "Deliveries"]


@dataclass
class Signals:
    ready: Synchronized[int]
    stop: Event
    delivered: Synchronized[int]


def _consume(url: str, topic: str, count: int, wait_s: float, sig: Signals, out: str) -> None:
    times, lags, shards = array("d"), array("d"), array("H")
    early_store = lost = 0
    with chronoq.connect(url) as q:
        q.get(topic, "warm-up")
        with sig.ready.get_lock():
            sig.ready.value += 1
        while not sig.stop.is_set():
            jobs = q.reserve(topic, count=count, wait=wait_s)
            at = time.time() * 1000
            for job in jobs:
                times.append(at)
                lags.append(at - job.due_at)
                shards.append(q.shard_of(job.id))
                if job.deadline - round(job.ttr * 1000) < job.due_at:
                    early_store += 1
            if jobs:
                lost += len(q.ack_many(jobs))
                with sig.delivered.get_lock():
                    sig.delivered.value += len(jobs)
    Path(out).write_bytes(pickle.dumps((times, lags, shards, early_store, lost)))


@dataclass
class Deliveries:
    """Every consumer's notes, merged."""

    times: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    shards: list[int] = field(default_factory=list)
    early_store: int = 0
    leases_lost: int = 0

    def figures(self, shards: int) -> dict[str, Any]:
        if not self.times:
            return {"delivered": 0}
        first = min(range(len(self.times)), key=self.times.__getitem__)
        last = max(range(len(self.times)), key=self.times.__getitem__)
        firsts: dict[int, int] = {}
        for k, shard in enumerate(self.shards):
            if shard not in firsts or self.times[k] < self.times[firsts[shard]]:
                firsts[shard] = k
        return {
            "delivered": len(self.times),
            "early_store_clock": self.early_store,
            "early_client_clock": sum(1 for lag in self.lags if lag < 0),
            "leases_lost": self.leases_lost,
            "first_lag_ms": self.lags[first],
            "last_lag_ms": self.lags[last],
            "first_lag_ms_per_shard": [
                self.lags[firsts[s]] if s in firsts else None for s in range(shards)
            ],
            "lag_p50_ms": percentile(self.lags, 50),
            "lag_p99_ms": percentile(self.lags, 99),
            "first_delivery_ms": self.times[first],
            "last_delivery_ms": self.times[last],
        }


class Consumers:
    """``n`` consumer processes on ``topic``, started and waiting once constructed."""

    def __init__(
        self, url: str, topic: str, n: int, count: int, wait_s: float, workdir: Path
    ) -> None:
        self.signals = Signals(SPAWN.Value("q", 0), SPAWN.Event(), SPAWN.Value("q", 0))
        self.outs = [workdir / f"consumer-{k}.pickle" for k in range(n)]
        for out in self.outs:
            out.unlink(missing_ok=True)
        self.procs: list[BaseProcess] = [
            SPAWN.Process(
                target=_consume,
                args=(url, topic, count, wait_s, self.signals, str(out)),
                daemon=True,
            )
            for out in self.outs
        ]
        for proc in self.procs:
            proc.start()
        deadline = time.monotonic() + 60
        while self.signals.ready.value < n:
            self.check()
            if time.monotonic() > deadline:
                raise RuntimeError("the consumers did not connect within 60 s")
            time.sleep(0.01)

    @property
    def delivered(self) -> int:
        return int(self.signals.delivered.value)

    def check(self) -> None:
        failed = [p.exitcode for p in self.procs if p.exitcode not in (None, 0)]
        if failed:
            raise RuntimeError(f"a consumer process failed (exit code {failed[0]})")

    def finish(self, timeout: float = 60.0) -> Deliveries:
        """Stop them (each ends its current wait) and merge what they noted."""
        self.signals.stop.set()
        for proc in self.procs:
            proc.join(timeout)
        self.check()
        merged = Deliveries()
        for out in self.outs:
            times, lags, shards, early, lost = pickle.loads(out.read_bytes())
            merged.times.extend(times)
            merged.lags.extend(lags)
            merged.shards.extend(shards)
            merged.early_store += early
            merged.leases_lost += lost
        return merged

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
            proc.join()
