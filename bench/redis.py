"""Benchmark of the Redis backend: throughput of put, put_many and reserve+ack,
the hand-over lag of waiting consumers, memory per delayed job, and per-call
latency as one shard grows to 1M (10M with --big) jobs; each next to a baseline
measured in the same run (raw redis-py PING, pipelined ZADD + HSET, a minimal
Lua pop, the timer floor).

    .venv/bin/python bench/redis.py [--quick] [--big] [--pin split|same|none] [--out FILE]
                                    [--store URL]

Without --store it starts a private redis-server on a free loopback port (never
6379) with ``--save "" --appendonly no`` in a temporary directory, and stops it
at the end. Results go to stdout as tables and, with ``--out``, to a JSON file.
See docs/benchmarks.md for how to read them.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path, where ``import redis`` would
# find this file instead of redis-py: move bench/ to the end.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.append(sys.path.pop(0))

import argparse
import gc
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis
from common import (
    BATCH,
    PAYLOAD,
    REPEATS,
    RESERVE_COUNT,
    RUN,
    Lag,
    Rate,
    batches,
    bench_drain,
    bench_put_many,
    bench_put_one,
    bench_timer_floor,
    command,
    console,
    consume,
    lag_table,
    machine,
    percentile,
    produce_on,
    rate_table,
    render_header,
    repeat_rate,
    status,
)
from redis.exceptions import ResponseError
from redis.utils import HIREDIS_AVAILABLE
from rich.console import Console
from rich.table import Table
from servers import placement, private_server

import chronoq

SLOW_RATE, FAST_RATE = 50.0, 5000.0  # jobs/s whose due times the lag runs spread
FAST_COUNT = 100  # reserve count of the consumers at FAST_RATE
FAST_CONSUMERS = (1, 2)  # consumer threads tried at FAST_RATE
CALL_TARGET_US = 1000.0  # no single call over 1 ms at 1M jobs
SINGLE_CALLS = ("put", "reserve", "get", "ack")
SCALE_RATIO_TARGET = 1.5  # p99 at 10M within 1.5x of 10k
BIG_POINT = 10_000_000
RAW_RECORD = b"\x00" * 24  # about the size of the head of chronoq's job record
RAW_POP = """
local m = redis.call('ZPOPMIN', KEYS[2], ARGV[1])
local ids, out = {}, {}
for i = 1, #m, 2 do
  ids[#ids + 1] = m[i]
  out[#out + 1] = redis.call('HGET', KEYS[1], m[i])
end
if #ids > 0 then redis.call('HDEL', KEYS[1], unpack(ids)) end
return out
"""
say = Console(stderr=True).log


@dataclass(frozen=True)
class Sizes:
    put_one: int
    put_many: int
    drain: int
    lag_slow: int  # jobs put live at SLOW_RATE
    lag_max_delay: float  # seconds; their delays are uniform in [0.05, this]
    lag_fast: int  # jobs put ahead, due at FAST_RATE
    memory: int  # delayed jobs for the memory figure
    points: tuple[int, ...]  # delayed jobs in the shard where calls are timed
    calls: int  # timed calls of each kind at each point
    timer_samples: int

    @classmethod
    def for_run(cls, quick: bool, big: bool) -> Sizes:
        if quick:
            sizes = cls(2_000, 20_000, 10_000, 100, 0.5, 5_000, 20_000, (10_000, 100_000), 300, 50)
        else:
            sizes = cls(
                20_000, 200_000, 100_000, 500, 2.0, 25_000, 200_000, (10_000, 1_000_000), 3000, 300
            )
        if big:
            sizes = cls(**{**asdict(sizes), "points": (*sizes.points, BIG_POINT)})
        return sizes


@dataclass
class Calls:
    """Latencies in µs of one kind of call at one shard size: client side
    (perf_counter around each Queue call) and server side (the server's own
    histogram of the phase's FCALL calls, see ServerStats)."""

    op: str
    jobs: int
    client: list[float]
    server: dict[str, Any] | None  # None: the server refused CONFIG

    def stat(self, side: str, p: float | None) -> float | None:
        if side == "client":
            return max(self.client) if p is None else percentile(self.client, p)
        if self.server is None:
            return None
        return float(self.server["max" if p is None else f"p{p:g}"])

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "jobs_in_shard": self.jobs, "unit": "µs"}
        for name, p in (("p50", 50.0), ("p99", 99.0), ("max", None)):
            out[f"client_{name}"] = self.stat("client", p)
        out["client_calls"] = len(self.client)
        out["server"] = self.server
        return out


# -- the store ---------------------------------------------------------------------------


def driver_url(url: str) -> str:
    """The URL without chronoq's own options, for a raw redis-py client."""
    return url.split("?", 1)[0]


def drop(q: chronoq.Queue, raw: redis.Redis, topic: str) -> None:
    """Remove a topic at once (UNLINK of its keys, not a job-by-job purge)."""
    keys = list(raw.scan_iter(match=f"*{{{topic}:*", count=1000))
    if keys:
        raw.unlink(*keys)
    q.purge(topic)  # finds nothing left; forgets the topic name


def settle(raw: redis.Redis) -> int:
    """used_memory once the lazy-free thread has freed what UNLINK left it."""
    deadline = time.monotonic() + 60
    while int(raw.info("memory").get("lazyfree_pending_objects", 0)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    return int(raw.info("memory")["used_memory"])


def payload_size(i: int) -> int:
    return len(json.dumps({**PAYLOAD, "n": i}, separators=(",", ":")).encode())


# -- baselines --------------------------------------------------------------------------------


def bench_ping(raw: redis.Redis, n: int) -> list[float]:
    def once(rep: int) -> float:
        ping = raw.ping
        start = time.perf_counter()
        for _ in range(n):
            ping()
        return time.perf_counter() - start

    return repeat_rate(n, once)


def raw_rows(n: int) -> list[tuple[str, bytes, float]]:
    """(id, record, score) shaped like chronoq's: a 26-character id, a 24-byte
    head + the same JSON payloads."""
    now = time.time() * 1000
    return [
        (f"{i:026d}", RAW_RECORD + json.dumps({**PAYLOAD, "n": i}).encode(), now + i)
        for i in range(n)
    ]


def raw_keys(tag: str) -> list[str]:
    return [f"bench:{{{tag}}}:jobs", f"bench:{{{tag}}}:index"]


def raw_fill(raw: redis.Redis, tag: str, rows: list[Any], variadic: bool) -> float:
    """HSET id record + ZADD score id for every row, 1,000 rows per round trip:
    two commands per row, or (``variadic``) two commands per 1,000 rows."""
    jobs, index = raw_keys(tag)
    start = time.perf_counter()
    for chunk in batches(rows, BATCH):
        pipe = raw.pipeline(transaction=False)
        if variadic:
            pipe.hset(jobs, mapping={job_id: record for job_id, record, _ in chunk})
            pipe.zadd(index, {job_id: score for job_id, _, score in chunk})
        else:
            for job_id, record, score in chunk:
                pipe.hset(jobs, job_id, record)
                pipe.zadd(index, {job_id: score})
        pipe.execute()
    return time.perf_counter() - start


def bench_raw_put_many(raw: redis.Redis, n: int, variadic: bool) -> list[float]:
    def once(rep: int) -> float:
        tag = f"{RUN}.raw.put.{rep}"
        elapsed = raw_fill(raw, tag, raw_rows(n), variadic)
        raw.unlink(*raw_keys(tag))
        return elapsed

    return repeat_rate(n, once)


def bench_raw_drain(raw: redis.Redis, n: int) -> list[float]:
    """The least a pop needs: one script call takes the best 100 ids, their records,
    and deletes them."""
    pop = raw.register_script(RAW_POP)

    def once(rep: int) -> float:
        tag = f"{RUN}.raw.drain.{rep}"
        keys = raw_keys(tag)
        raw_fill(raw, tag, raw_rows(n), variadic=True)
        done = 0
        start = time.perf_counter()
        while records := pop(keys, [RESERVE_COUNT]):
            done += len(records)
        elapsed = time.perf_counter() - start
        if done != n:
            raise RuntimeError(f"raw drain popped {done} jobs of {n}")
        return elapsed

    return repeat_rate(n, once)


# -- throughput ---------------------------------------------------------------------------


def run_throughput(q: chronoq.Queue, raw: redis.Redis, sizes: Sizes) -> list[Rate]:
    one, many, drain = sizes.put_one, sizes.put_many, sizes.drain
    say(f"baselines: {one:,} PINGs, {many:,} pipelined HSET+ZADD, raw drain of {drain:,}")
    ping = Rate("raw_ping", "raw PING, 1 round trip each", one, bench_ping(raw, one))
    raw_many = Rate(
        "raw_put_many",
        f"raw HSET + ZADD per job, {BATCH:,} jobs/trip",
        many,
        bench_raw_put_many(raw, many, variadic=False),
    )
    raw_variadic = Rate(
        "raw_put_variadic",
        f"raw HSET + ZADD of {BATCH:,} jobs each",
        many,
        bench_raw_put_many(raw, many, variadic=True),
    )
    raw_drain = Rate(
        "raw_drain",
        f"raw Lua ZPOPMIN {RESERVE_COUNT} + HGET + HDEL",
        drain,
        bench_raw_drain(raw, drain),
    )
    say(f"chronoq: put x{one:,}, put_many {many:,}, reserve+ack {drain:,}; {REPEATS} runs each")
    put_one = bench_put_one(q, one)
    put_many = bench_put_many(q, many)
    drained, from_put = bench_drain(q, drain)
    for rep in range(REPEATS):
        for name in ("put1", "putmany", "drain"):
            drop(q, raw, f"bench.{RUN}.{name}.{rep}")
    return [
        Rate("put_one", "put, one at a time", one, put_one, 12_000, ping),
        Rate("put_many", f"put_many, batches of {BATCH:,}", many, put_many, 150_000, raw_many),
        Rate(
            "reserve_ack",
            f"reserve(count={RESERVE_COUNT}) + ack_many",
            drain,
            drained,
            50_000,
            raw_drain,
        ),
        Rate("drain_from_put", f"drain of {drain:,} due jobs, from put to empty", drain, from_put),
        ping,
        raw_many,
        raw_variadic,
        raw_drain,
    ]


# -- hand-over lag ------------------------------------------------------------------------


def bench_lag_slow(url: str, sizes: Sizes) -> list[float]:
    """A consumer thread blocked in reserve(wait=0.5); this thread puts jobs one at
    a time at SLOW_RATE on the same Queue, each with a random delay."""
    topic = f"bench.{RUN}.lag.slow"
    q = chronoq.connect(url)
    lags: list[float] = []
    give_up = time.monotonic() + sizes.lag_slow / SLOW_RATE + sizes.lag_max_delay + 10
    failed = threading.Event()

    def run() -> None:
        lags.extend(consume(q, topic, sizes.lag_slow, give_up, failed.is_set))

    thread = threading.Thread(target=run, name="bench-consumer")
    thread.start()
    time.sleep(0.2)  # let the consumer block in reserve(wait=...)
    try:
        produce_on(q, topic, sizes.lag_slow, SLOW_RATE, sizes.lag_max_delay, seed=1)
    except BaseException:
        failed.set()
        raise
    finally:
        thread.join()
        q.close()
    return lags


def bench_lag_fast(url: str, n: int, consumers: int) -> list[float]:
    """``consumers`` threads blocked in reserve(count=FAST_COUNT, wait=0.5); this
    thread puts ``n`` jobs ahead of time with put_many, due at FAST_RATE from 1 s on."""
    topic = f"bench.{RUN}.lag.fast{consumers}"
    q = chronoq.connect(url)
    lags: list[float] = []
    first_due = time.time() + 1.0 + n / 100_000
    give_up = time.monotonic() + (first_due - time.time()) + n / FAST_RATE + 10
    failed = threading.Event()

    def run() -> None:
        while len(lags) < n and time.monotonic() < give_up and not failed.is_set():
            jobs = q.reserve(topic, count=FAST_COUNT, wait=0.5)
            delivered = time.time() * 1000
            lags.extend(delivered - job.due_at for job in jobs)
            if jobs:
                q.ack_many(jobs)

    threads = [threading.Thread(target=run, name=f"bench-consumer-{i}") for i in range(consumers)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    try:
        jobs = [chronoq.Job({"i": i}, run_at=first_due + i / FAST_RATE) for i in range(n)]
        for chunk in batches(jobs, BATCH):
            q.put_many(topic, chunk)
        if time.time() > first_due:
            say(f"[red]the producer was late: the first jobs were due before all {n:,} were put")
    except BaseException:
        failed.set()
        raise
    finally:
        for thread in threads:
            thread.join()
        q.close()
    return lags


def run_lag(q: chronoq.Queue, raw: redis.Redis, url: str, sizes: Sizes) -> list[Lag]:
    say(
        f"lag: {sizes.lag_slow} jobs put live at {SLOW_RATE:g}/s; {sizes.lag_fast:,} put "
        f"ahead, due at {FAST_RATE:g}/s, with {' and '.join(map(str, FAST_CONSUMERS))} "
        "consumer threads; then the timer floor"
    )
    slow = bench_lag_slow(url, sizes)
    figures = [Lag("lag_50", "due at 50/s, 1 consumer thread", slow, sizes.lag_slow, 5)]
    for consumers in FAST_CONSUMERS:
        threads = f"{consumers} consumer thread{'s' if consumers > 1 else ''}"
        figures.append(
            Lag(
                f"lag_5000_{consumers}",
                f"due at 5,000/s, {threads}",
                bench_lag_fast(url, sizes.lag_fast, consumers),
                sizes.lag_fast,
                20,
            )
        )
    for name in ("slow", *(f"fast{consumers}" for consumers in FAST_CONSUMERS)):
        drop(q, raw, f"bench.{RUN}.lag.{name}")
    floor = bench_timer_floor(sizes.timer_samples)
    figures.append(Lag("timer_floor", "floor: Event().wait(t) oversleep", floor, None))
    return figures


# -- memory -------------------------------------------------------------------------------


def fill_delayed(q: chronoq.Queue, topic: str, n: int, seed: int) -> list[float]:
    """Put ``n`` jobs due in 1-2 h with put_many; returns µs per put_many call."""
    rng = random.Random(seed)
    spent = []
    for start in range(0, n, BATCH):
        jobs = [
            chronoq.Job({**PAYLOAD, "n": i}, delay=3600 + rng.random() * 3600)
            for i in range(start, min(start + BATCH, n))
        ]
        began = time.perf_counter()
        q.put_many(topic, jobs)
        spent.append((time.perf_counter() - began) * 1e6)
    return spent


def shard_memory(raw: redis.Redis, topic: str) -> dict[str, int]:
    """MEMORY USAGE (every element sampled) of each key of the topic's shard 0."""
    usage = {}
    for key in raw.scan_iter(match=f"*{{{topic}:0}}:*", count=1000):
        part = key.decode().rsplit(":", 1)[1]
        usage[part] = int(raw.memory_usage(key, samples=0) or 0)
    return usage


def run_memory(url: str, raw: redis.Redis, n: int) -> dict[str, Any]:
    say(f"memory: {n:,} jobs due in 1-2 h, every put event kept")
    topic = f"bench.{RUN}.memory"
    # events_max above n: the stream holds every job's event, none trimmed away
    q = chronoq.connect(url + ("&" if "?" in url else "?") + f"events_max={2 * n}")
    gc.collect()
    before = settle(raw)
    fill_delayed(q, topic, n, seed=5)
    after = settle(raw)
    parts = shard_memory(raw, topic)
    events = int(raw.get(next(raw.scan_iter(match=f"*{{{topic}:0}}:evseq"))) or 0)
    payload = sum(payload_size(i) for i in range(n)) / n
    drop(q, raw, topic)
    q.close()
    per_job = (after - before) / n
    return {
        "n": n,
        "used_memory_delta": after - before,
        "per_job": per_job,
        "payload_bytes": payload,
        "per_job_minus_payload": per_job - payload,
        "target_max": 250,
        "met": per_job - payload <= 250,
        "keys": parts,
        "events_in_stream": events,
    }


def memory_table(mem: dict[str, Any]) -> Table:
    n = mem["n"]
    table = Table(title=f"Memory per delayed job, bytes ({n:,} jobs due in 1-2 h, one shard)")
    for name in ("figure", "bytes", "per job", "target", ""):
        table.add_column(name, justify="left" if name in ("figure", "target") else "right")
    table.add_row(
        "INFO used_memory delta", f"{mem['used_memory_delta']:,}", f"{mem['per_job']:.0f}", "", ""
    )
    table.add_row(
        f"  minus the payload ({mem['payload_bytes']:.1f} bytes of JSON)",
        "",
        f"{mem['per_job_minus_payload']:.0f}",
        f"≤ {mem['target_max']}",
        status(mem["met"]),
    )
    labels = {
        "jobs": "MEMORY USAGE jobs hash",
        "delayed": "MEMORY USAGE delayed zset",
        "events": f"MEMORY USAGE events stream ({mem['events_in_stream']:,} events)",
    }
    rest = sum(v for k, v in mem["keys"].items() if k not in labels)
    for part, label in labels.items():
        size = mem["keys"].get(part, 0)
        table.add_row(f"  {label}", f"{size:,}", f"{size / n:.0f}", "", "")
    table.add_row("  other keys of the shard", f"{rest:,}", f"{rest / n:.1f}", "", "")
    return table


# -- per-call latency as the shard grows ------------------------------------------------------


class ServerStats:
    """Server-side duration of every call of a phase, from the server's own
    HdrHistogram (INFO latencystats: p50, p99 and p100 = max; Redis 7+) and INFO
    commandstats, both reset by CONFIG RESETSTAT before each phase. (SLOWLOG with
    a 0 µs threshold would log every command run inside the scripts too, and
    slow them down.) Settings are restored on close; ``ok`` is False where CONFIG
    is refused (a managed Redis): then only client-side times are reported."""

    def __init__(self, raw: redis.Redis) -> None:
        self.raw = raw
        try:
            self.saved = raw.config_get("latency-tracking*")
            raw.config_set("latency-tracking", "yes")
            raw.config_set("latency-tracking-info-percentiles", "50 99 100")
            self.ok = True
        except ResponseError:
            self.ok = False

    def reset(self) -> None:
        if self.ok:
            self.raw.config_resetstat()

    def read(self, command: str, calls: int) -> dict[str, Any] | None:
        """The phase's ``command`` calls, and what the commands run inside them
        cost per call (µs, from commandstats)."""
        if not self.ok:
            return None
        latency = self.raw.info("latencystats")[f"latency_percentiles_usec_{command}"]
        stats = self.raw.info("commandstats")
        inner = {
            name.removeprefix("cmdstat_"): round(v["usec"] / calls, 2)
            for name, v in stats.items()
            if name not in (f"cmdstat_{command}", "cmdstat_config|resetstat")
        }
        return {
            "p50": latency["p50"],
            "p99": latency["p99"],
            "max": latency["p100"],
            "mean": stats[f"cmdstat_{command}"]["usec_per_call"],
            "calls": stats[f"cmdstat_{command}"]["calls"],
            "inner_usec_per_call": inner,
        }

    def close(self) -> None:
        if self.ok:
            for key, value in self.saved.items():
                self.raw.config_set(key, value)


def time_phase(run: Callable[[int], object], calls: int) -> list[float]:
    clock = time.perf_counter
    times = []
    gc.collect()
    for i in range(calls):
        began = clock()
        run(i)
        times.append((clock() - began) * 1e6)
    return times


def time_calls(
    q: chronoq.Queue, raw: redis.Redis, topic: str, calls: int, server: ServerStats, jobs: int
) -> list[Calls]:
    """``calls`` calls of each kind, one kind after the other: put a job due in 1-2 h;
    reserve(count=1) one of ``calls`` jobs put due beforehand; get a job just put;
    ack a job just reserved; PING."""
    rng = random.Random(jobs)
    for chunk in batches([chronoq.Job(PAYLOAD) for _ in range(calls)], BATCH):
        q.put_many(topic, chunk)
    ids: list[str] = []
    leased: list[chronoq.Reservation] = []
    phases: list[tuple[str, Callable[[int], object]]] = [
        ("put", lambda i: ids.append(q.put(topic, PAYLOAD, delay=3600 + rng.random() * 3600).id)),
        ("reserve", lambda i: leased.extend(q.reserve(topic))),
        ("get", lambda i: q.get(topic, ids[i])),
        ("ack", lambda i: q.ack(leased[i])),
        ("ping", lambda i: raw.ping()),
    ]
    out = []
    for op, run in phases:
        server.reset()
        client = time_phase(run, calls)
        out.append(Calls(op, jobs, client, server.read(op if op == "ping" else "fcall", calls)))
    return out


def time_backlog(q: chronoq.Queue, topic: str, server: ServerStats, jobs: int) -> list[Calls]:
    """Two single reserve calls that do bulk upkeep: the first after 5,000 jobs
    fell due in the same ms (it promotes as many as its batch limit allows), the
    first after 1,000 leases expired at once (it reclaims them, up to its limit)."""
    due = time.time() + 1.0
    for chunk in batches([chronoq.Job(PAYLOAD, run_at=due) for _ in range(5 * BATCH)], BATCH):
        q.put_many(topic, chunk)
    time.sleep(max(due - time.time(), 0) + 0.05)
    out = []
    for op in ("reserve after 5,000 fell due", "reserve after 1,000 leases expired"):
        server.reset()
        began = time.perf_counter()
        q.reserve(topic)
        client = [(time.perf_counter() - began) * 1e6]
        out.append(Calls(op, jobs, client, server.read("fcall", 1)))
        q.reserve(topic, count=BATCH, ttr=0.05)
        time.sleep(0.1)
    return out


def run_scale(q: chronoq.Queue, raw: redis.Redis, sizes: Sizes) -> dict[str, Any]:
    topic = f"bench.{RUN}.scale"
    server = ServerStats(raw)
    results: list[Calls] = []
    fills: list[dict[str, Any]] = []
    filled = 0
    try:
        for point in sizes.points:
            say(f"scale: filling the shard to {point:,} delayed jobs, then {sizes.calls:,} calls")
            server.reset()
            spent = fill_delayed(q, topic, point - filled, seed=point)
            fills.append(
                {
                    "from": filled,
                    "to": point,
                    "jobs_per_s": (point - filled) / sum(spent) * 1e6,
                    "used_memory": int(raw.info("memory")["used_memory"]),
                }
            )
            fill = Calls(
                f"put_many({BATCH:,}) fill", point, spent, server.read("fcall", len(spent))
            )
            results += [*time_calls(q, raw, topic, sizes.calls, server, point), fill]
            filled = point + sizes.calls  # the delayed puts of time_calls stay
        results += time_backlog(q, topic, server, sizes.points[-1])
    finally:
        server.close()
        drop(q, raw, topic)
    return {"calls": results, "fills": fills, "server_side": server.ok}


def calls_table(calls: list[Calls], target_point: int) -> Table:
    table = Table(
        title="Per-call latency, µs: client = around the Queue call; server = INFO latencystats "
        f"(target: no call over {CALL_TARGET_US:,.0f} µs at {target_point:,} jobs, server side)"
    )
    names = ["jobs in shard", "call", "client p50", "p99", "max"]
    names += ["server p50", "p99 ", "max ", "target", ""]
    for name in names:
        table.add_column(name, justify="left" if name in ("call", "target") else "right")
    for c in calls:
        row = [f"{c.jobs:,}", "PING (floor)" if c.op == "ping" else c.op]
        for side in ("client", "server"):
            for p in (50.0, 99.0, None):
                value = c.stat(side, p)
                row.append("" if value is None else f"{value:,.0f}")
        judged = c.jobs == target_point and c.op in SINGLE_CALLS and c.server is not None
        ok = None if not judged else (c.stat("server", None) or 0) <= CALL_TARGET_US
        row += [f"max ≤ {CALL_TARGET_US:,.0f}" if judged else "", status(ok)]
        table.add_row(*row)
    return table


def scaling(calls: list[Calls], points: tuple[int, ...]) -> list[dict[str, Any]]:
    """p99 of put and reserve at each point against the first (10k) point."""
    rows = []
    for op in ("put", "reserve"):
        mine = {c.jobs: c for c in calls if c.op == op}
        base = mine[points[0]]
        for point in points[1:]:
            row: dict[str, Any] = {"op": op, "from": points[0], "to": point}
            for side in ("client", "server"):
                low, high = base.stat(side, 99.0), mine[point].stat(side, 99.0)
                row[f"{side}_p99_ratio"] = None if not low or high is None else high / low
            if point == BIG_POINT:
                row["target_max"] = SCALE_RATIO_TARGET
                row["met"] = row["client_p99_ratio"] <= SCALE_RATIO_TARGET
            rows.append(row)
    return rows


def scaling_table(rows: list[dict[str, Any]], big: bool) -> Table:
    note = "" if big else "; 10M skipped: run with --big"
    table = Table(title=f"p99 as the shard grows, ratio to the 10k point{note}")
    for name in ("call", "jobs in shard", "client p99 ratio", "server p99 ratio", "target", ""):
        table.add_column(name, justify="left" if name in ("call", "target") else "right")
    for row in rows:
        judged = "target_max" in row
        table.add_row(
            row["op"],
            f"{row['from']:,} → {row['to']:,}",
            "" if row["client_p99_ratio"] is None else f"{row['client_p99_ratio']:.2f}x",
            "" if row["server_p99_ratio"] is None else f"{row['server_p99_ratio']:.2f}x",
            f"≤ {SCALE_RATIO_TARGET:g}x (client)" if judged else "",
            status(row.get("met")),
        )
    return table


# -- the run ------------------------------------------------------------------------------


def render(
    report: dict[str, Any], rates: list[Rate], lags: list[Lag], scale: dict[str, Any]
) -> None:
    out = console()
    info = report["machine"]
    hiredis = "with hiredis" if HIREDIS_AVAILABLE else "no hiredis"
    versions = f"redis-server {info['redis_server']}, redis-py {info['redis_py']} ({hiredis})"
    render_header(out, report, versions)
    out.print(rate_table(rates))
    out.print(lag_table(lags))
    out.print(memory_table(report["figures"]["memory"]))
    out.print(calls_table(scale["calls"], report["sizes"]["points"][1]))
    out.print(scaling_table(report["figures"]["scaling"], report["big"]))
    fills = ", ".join(
        f"{f['from']:,}→{f['to']:,} at {f['jobs_per_s']:,.0f} jobs/s "
        f"(used_memory {f['used_memory'] / 2**20:,.0f} MiB)"
        for f in scale["fills"]
    )
    out.print(f"[bold]fills[/]     put_many of jobs due in 1-2 h: {fills}")
    if not scale["server_side"]:
        out.print("[bold]note[/]      the server refused CONFIG SET: no server-side times")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N: a ~20 s smoke run")
    parser.add_argument(
        "--big", action="store_true", help="also time calls at 10M jobs (a few GB of Redis memory)"
    )
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--pin",
        choices=("split", "same", "none"),
        default="split",
        help="put the private redis-server on another CPU than this process (split, the "
        "default), on the same one, or leave it to the scheduler",
    )
    parser.add_argument(
        "--store", help="redis:// URL (default: a private redis-server on a free port)"
    )
    return parser.parse_args(argv)


def measure(url: str, sizes: Sizes, report: dict[str, Any]) -> tuple[list[Rate], list[Lag], Any]:
    q = chronoq.connect(url)
    raw = redis.Redis.from_url(driver_url(url))
    try:
        report["machine"]["redis_server"] = raw.info("server")["redis_version"]
        rates = run_throughput(q, raw, sizes)
        lags = run_lag(q, raw, url, sizes)
        memory = run_memory(url, raw, sizes.memory)
        scale = run_scale(q, raw, sizes)
    finally:
        q.close()
        raw.close()
    report["figures"] = {f.key: f.as_json() for f in [*rates, *lags]}
    report["figures"]["memory"] = memory
    report["figures"]["calls"] = [c.as_json() for c in scale["calls"]]
    report["figures"]["scaling"] = scaling(scale["calls"], sizes.points)
    report["figures"]["fills"] = scale["fills"]
    return rates, lags, scale


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = Sizes.for_run(args.quick, args.big)
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(redis_py=redis.__version__, hiredis=str(HIREDIS_AVAILABLE)),
        "sizes": asdict(sizes),
        "big": args.big,
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-") as tmp:
        if args.store:
            report["store"] = args.store.split("@")[-1] + "; not pinned"
            rates, lags, scale = measure(args.store, sizes, report)
        else:
            server_cpu, my_cpu, pinned = placement(args.pin)
            with private_server(Path(tmp), server_cpu) as url:
                if my_cpu is not None:
                    os.sched_setaffinity(0, {my_cpu})
                report["store"] = (
                    f"{url}: a private redis-server (--save '' --appendonly no, hz 10); {pinned}"
                )
                rates, lags, scale = measure(url, sizes, report)
    report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    render(report, rates, lags, scale)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
