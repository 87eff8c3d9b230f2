"""Phase 3 of the scale benchmark: a far bucket of many jobs, all due within one
second, promoted while consumers wait, then delivered.

Each round, on the private server (no persistence), emptied first:

1. consumer processes start waiting in ``reserve(count, wait=…)`` (consumers.py);
2. producers put the bucket's jobs, due in [S, S + 1 s), S a bucket's start far
   enough ahead that the puts end before its promotion is due (S − horizon);
3. a thread of this process reads each shard's far count (HGET <farn> all, raw
   redis-py) every 10 ms: when the promotion starts, how fast it moves jobs, when
   the tier is empty; SLOWLOG (every call) is read then, and again at the end;
4. the round ends when every job is delivered and acked.

The horizon is short (``horizon_ms=20000`` by default, not the 600,000 of the
default URL) so that a round waits 20 s for its promotion, not 10 minutes: the
promotion's work (the jobs of a bucket, a slice of 256 per call) does not depend on
the horizon, only how long before the bucket's start it begins."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from consumers import Consumers
from producers import Spread, put_all
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from slowlog import MAX_LEN, last_id, read_calls, record, summary

from chronoq.backends.redis.keys import shard_keys

__all__ = ["Plan", "promotion_rounds"]

POLL_S = 0.01
FIRST_LAG_TARGET = 5.0  # ms, p99 of the first job's lag per shard, issue 27
WHY_SHORT = (
    "horizon_ms={h} (the default is 600,000) so that each round waits {s:.0f} s for its "
    "promotion, not 10 minutes; the promotion's work does not depend on the horizon"
)


@dataclass(frozen=True)
class Plan:
    bucket: int  # jobs per round, all due within one second
    horizon_ms: int
    width_ms: int  # far_bucket_ms
    rounds: int
    shards: tuple[int, ...]
    consumers: int
    count: int  # reserve(count=…)
    wait_s: float  # reserve(wait=…)
    producers: int


class Poller(threading.Thread):
    """Each shard's far count every POLL_S until all are 0 (or ``until``, epoch s);
    then the id of the latest SLOWLOG entry: the calls up to it were the promotion's."""

    def __init__(self, url: str, farn_keys: list[str], until: float) -> None:
        super().__init__(daemon=True)
        self.url, self.keys, self.until = url, farn_keys, until
        self.samples: list[tuple[float, list[int]]] = []
        self.mark = -1
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with redis.Redis.from_url(self.url) as client:
                while time.time() < self.until:
                    pipe = client.pipeline(transaction=False)
                    for key in self.keys:
                        pipe.hget(key, "all")
                    counts = [int(v or 0) for v in pipe.execute()]
                    self.samples.append((time.time() * 1000, counts))
                    if not any(counts):
                        break
                    time.sleep(POLL_S)
                self.mark = last_id(client)
        except BaseException as exc:  # reported by the round, not lost in the thread
            self.error = exc


def promoted(samples: list[tuple[float, list[int]]], shard: int | None) -> dict[str, Any]:
    """When the far count (of ``shard``, or of all) last stood whole, first fell and
    reached 0 (ms, epoch); the rate is the whole count over the first to the last."""
    series = [(t, c[shard] if shard is not None else sum(c)) for t, c in samples]
    whole = series[0][1]
    full = max((t for t, c in series if c == whole), default=series[0][0])
    moved = [t for t, c in series if c < whole]
    empty = next((t for t, c in series if c == 0), None)
    out: dict[str, Any] = {"jobs": whole, "last_whole_ms": full, "emptied_ms": empty}
    out["first_moved_ms"] = moved[0] if moved else None
    out["seconds"] = None if empty is None else (empty - full) / 1000
    out["jobs_per_s"] = None if not out["seconds"] else whole / out["seconds"]
    return out


def bucket_start(now_ms: float, put_s: float, plan: Plan) -> int:
    """The first bucket start S whose promotion (S − horizon) comes after the puts."""
    ready = now_ms + put_s * 1000 + plan.horizon_ms
    return math.ceil(ready / plan.width_ms) * plan.width_ms


class LatePut(RuntimeError):
    """The puts ended after the promotion was due: the round is void."""


def one_round(
    url: str, shards: int, rnd: int, plan: Plan, put_s: float, workdir: Path, say: Console
) -> dict[str, Any]:
    """One round; ``put_s``: the seconds the puts are planned to take at most."""
    topic = f"scale.promo.s{shards}.r{rnd}"
    options = f"?horizon_ms={plan.horizon_ms}&far_bucket_ms={plan.width_ms}"
    store = url + options + (f"&shards={shards}" if shards > 1 else "")
    farn = [shard_keys("chronoq", topic, s, shards=shards, spread=False)[14] for s in range(shards)]
    with redis.Redis.from_url(url) as client:
        client.flushall(asynchronous=False)
    consumers = Consumers(store, topic, plan.consumers, plan.count, plan.wait_s, workdir)
    try:
        start = bucket_start(time.time() * 1000, put_s, plan)
        spread = Spread(start / 1000, 0.999, seed=rnd)
        label = f"round {rnd + 1}, shards={shards}: put {plan.bucket:,}"
        putting = put_all(store, topic, plan.bucket, spread, plan.producers, label, say)
        put_end = time.time() * 1000
        with redis.Redis.from_url(url) as client:
            far_after_put = sum(int(client.hget(key, "all") or 0) for key in farn)
            record(client, 0)
        if far_after_put < plan.bucket or put_end > start - plan.horizon_ms - POLL_S * 1000:
            raise LatePut(f"the puts took {putting.seconds:.1f} s, {put_s:.1f} s planned")
        deadline = start / 1000 + 60 + plan.bucket / 5000
        poller = Poller(url, farn, deadline)
        poller.start()
        _follow(consumers, plan.bucket, deadline, f"round {rnd + 1}, shards={shards}", say)
        delivered = consumers.finish()
        poller.join(max(0.0, deadline - time.time()) + 5)
        if poller.error is not None:
            raise RuntimeError("the far-count poller failed") from poller.error
        with redis.Redis.from_url(url) as client:
            calls = read_calls(client)
            client.config_set("slowlog-log-slower-than", 10_000)  # Redis's default
            client.config_set("slowlog-max-len", 128)
    finally:
        consumers.kill()
    promotion_at = start - plan.horizon_ms
    whole = promoted(poller.samples, None)
    out: dict[str, Any] = {
        "shards": shards,
        "round": rnd,
        "jobs": plan.bucket,
        "bucket_start_ms": start,
        "promotion_due_ms": promotion_at,
        "put": {
            "jobs_per_s": putting.rate,
            "seconds": putting.seconds,
            "ended_before_promotion_ms": promotion_at - put_end,
            "far_after_put": far_after_put,
        },
        "promotion": _timing(whole, promotion_at, start),
        "promotion_per_shard": [
            _timing(promoted(poller.samples, s), promotion_at, start) for s in range(shards)
        ],
        "slowlog_overflowed": len(calls) >= MAX_LEN,  # then the oldest calls are missing
        "calls_during_promotion": summary([c for c in calls if c.id <= poller.mark]),
        "calls_during_delivery": summary([c for c in calls if c.id > poller.mark]),
        "delivery": delivered.figures(shards),
    }
    first = out["delivery"].get("first_lag_ms", math.nan)
    say.log(
        f"round {rnd + 1}, shards={shards}: promoted {whole['jobs_per_s'] or 0:,.0f} jobs/s, "
        f"first job {first:.2f} ms late"
    )
    return out


def _timing(p: dict[str, Any], promotion_at: float, start: float) -> dict[str, Any]:
    """A shard's (or all shards') promotion against its due time and the bucket's start."""
    moved = p["first_moved_ms"]
    return {
        "jobs": p["jobs"],
        "jobs_per_s": p["jobs_per_s"],
        "seconds": p["seconds"],
        "started_late_ms": None if moved is None else moved - promotion_at,
        "done_before_bucket_ms": None if p["emptied_ms"] is None else start - p["emptied_ms"],
    }


def _follow(consumers: Consumers, n: int, deadline: float, label: str, say: Console) -> None:
    """Until every job is delivered (or ``deadline``, epoch s), with a progress bar."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=say,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{label}: promoted, then delivered", total=n)
        while consumers.delivered < n and time.time() < deadline:
            consumers.check()
            bar.update(task, completed=consumers.delivered)
            time.sleep(0.1)


def promotion_rounds(
    url: str, plan: Plan, put_rate: float, workdir: Path, say: Console
) -> dict[str, Any]:
    """Every round of every shard count, the shard counts taking turns. A round whose
    puts ran late (a busy moment of the machine) is run again with more room. The puts
    are planned at ``put_rate`` (jobs/s) at first, then at the slowest of this phase's
    rounds (a bucket's puts go to its 16 pages: faster than a fill over 30 days), with
    room for twice as slow."""
    say.log(WHY_SHORT.format(h=plan.horizon_ms, s=plan.horizon_ms / 1000))
    rounds: list[dict[str, Any]] = []
    seen: list[float] = []
    for rnd in range(plan.rounds):
        for shards in plan.shards:
            room = 2.0
            for attempt in range(1, 4):
                put_s = plan.bucket / min(seen, default=put_rate) * room + 5
                try:
                    found = one_round(url, shards, rnd, plan, put_s, workdir, say)
                except LatePut as late:
                    if attempt == 3:
                        raise
                    say.log(f"round {rnd + 1}, shards={shards}: {late}; once more")
                    room *= 2
                    continue
                found["attempts"] = attempt
                seen.append(found["put"]["jobs_per_s"])
                rounds.append(found)
                break
    return {
        "why_short_horizon": WHY_SHORT.format(h=plan.horizon_ms, s=plan.horizon_ms / 1000),
        "rounds": rounds,
    }
