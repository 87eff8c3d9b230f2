"""Phases 2 and 4 of the scale benchmark, on the AOF node (node.py).

2. Jobs due uniformly over 30 days (from now), the harness's job shape, put with
   ``put_many`` by producer processes: first the near tier at a smaller N
   (``?horizon_ms=off``), then, the server emptied, the far tier at the full N (the
   default URL). For each: ``used_memory`` per job (after, less before, with the
   topic's event stream, which the store caps at ``events_max`` events), the put
   rate, and the longest put call (SLOWLOG, calls over 1 ms).
4. After the far fill: BGREWRITEAOF, waited for; the AOF directory's size; then the
   server stopped and started again on its directory, timed until PING answers and
   INFO persistence says loading:0; its memory once loaded, and its jobs counted
   against the fill."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from node import Node, info
from producers import DAY_S, Putting, Spread, put_all
from rich.console import Console
from slowlog import MAX_LEN, read_calls, record, summary

import chronoq
from chronoq.backends.redis.keys import shard_keys

__all__ = ["FAR_TARGET", "FORECAST_TARGET_MS", "Volume", "measure_volume"]

FAR_TARGET = 100.0  # bytes per job at 10M, issue 27
FORECAST_TARGET_MS = 50.0  # a forecast of the 10M jobs, 30 days by the hour, issue 27
FORECAST_CALLS = 5
DAYS = 30
PUT_SLOW_US = 1000  # SLOWLOG threshold while filling (a put of 1,000 takes several ms)


@dataclass(frozen=True)
class Volume:
    jobs: int  # far tier
    near_jobs: int
    producers: int


def memory(client: redis.Redis) -> dict[str, int]:
    raw = info(client, "memory")
    return {k: int(raw[k]) for k in ("used_memory", "used_memory_rss", "used_memory_dataset")}


def tiers(client: redis.Redis, topic: str) -> dict[str, int]:
    """How many of the topic's jobs each structure holds (shard 0: one shard)."""
    jobs, delayed, ready, far, farn = _keys(topic)
    pipe = client.pipeline(transaction=False)
    pipe.hget(farn, "all")
    pipe.zcard(far)
    pipe.zcard(delayed)
    pipe.zcard(ready)
    pipe.hlen(jobs)
    names = ("far", "far_buckets", "near_delayed", "near_ready", "jobs_hash")
    return {name: int(reply or 0) for name, reply in zip(names, pipe.execute(), strict=True)}


def _keys(topic: str) -> list[str]:
    keys = shard_keys("chronoq", topic, 0, shards=1, spread=False)
    return [keys[0], keys[1], keys[2], keys[13], keys[14]]


def fill(node: Node, topic: str, n: int, options: str, producers: int, say: Console) -> Any:
    """``n`` jobs into ``topic``: memory, keys, put rate, the longest put call."""
    url = node.url + options
    with node.client() as client:
        client.flushall(asynchronous=False)
        rewrites = int(info(client, "persistence")["aof_rewrites"])
        record(client, PUT_SLOW_US)
        before, keys_before = memory(client), int(client.dbsize())
        spread = Spread(time.time(), DAYS * DAY_S, seed=n)
        putting = put_all(url, topic, n, spread, producers, f"put {n:,} ({topic})", say)
        found = read_calls(client)  # read and emptied before memory is read
        calls = summary(found) | {"slowlog_overflowed": len(found) >= MAX_LEN}
        client.config_set("slowlog-log-slower-than", 10_000)  # Redis's default
        after = memory(client)
        out = {
            "jobs": n,
            "url_options": options or "(default)",
            "due": f"uniform over {DAYS} days from the start of the fill",
            "put": _putting(putting),
            "bytes_per_job": (after["used_memory"] - before["used_memory"]) / n,
            "memory_before": before,
            "memory_after": after,
            "keys_added": int(client.dbsize()) - keys_before,
            "tiers": tiers(client, topic),
            "aof_rewrites_during_fill": int(info(client, "persistence")["aof_rewrites"]) - rewrites,
            "put_calls": calls,
        }
    say.log(f"{topic}: {out['bytes_per_job']:,.1f} B/job, {putting.rate:,.0f} jobs/s")
    return out


def _putting(putting: Putting) -> dict[str, Any]:
    return {
        "producers": putting.producers,
        "batch": 1000,
        "seconds": putting.seconds,
        "jobs_per_s": putting.rate,
        "build_seconds": putting.build_seconds,
    }


def forecast(node: Node, topic: str, jobs: int, say: Console) -> dict[str, Any]:
    """``q.forecast`` of the filled topic over its 30 days by the hour, end to end
    (the client's call, the server's script, the reply read): each call timed."""
    with chronoq.connect(node.url) as q:
        before = q.stats(topic)["delayed"]  # and the connection made before timing
        times, counted = [], 0
        for _ in range(FORECAST_CALLS):
            start = time.perf_counter()
            answer = q.forecast(topic, until=time.time() + (DAYS + 1) * DAY_S, step=3600)
            times.append((time.perf_counter() - start) * 1000)
            counted = sum(answer.counts) + answer.later
        after = q.stats(topic)["delayed"]
    # every delayed job, as stats counts them (those due since the fill began are not)
    if not after <= counted <= before:
        raise RuntimeError(f"the forecast counts {counted:,} jobs; stats {before:,}, {after:,}")
    times.sort()
    out = {
        "calls_ms": times,
        "median_ms": times[len(times) // 2],
        "max_ms": times[-1],
        "steps": len(answer.counts),
        "target_max_ms": FORECAST_TARGET_MS,
        "met": times[len(times) // 2] <= FORECAST_TARGET_MS,
    }
    say.log(f"forecast of {jobs:,} jobs by the hour: median {out['median_ms']:.1f} ms")
    return out


def persistence(node: Node, topic: str, jobs: int, say: Console) -> dict[str, Any]:
    """The AOF rewritten and measured, then the server restarted and checked."""
    with node.client() as client:
        held = tiers(client, topic)
    rewrite_s = node.rewrite_aof()
    files = node.aof_files()
    total = sum(files.values())
    say.log(f"AOF rewritten in {rewrite_s:.1f} s: {total / 1e6:,.1f} MB")
    with node.client() as client:
        aof_info = info(client, "persistence")
    restart = node.restart()
    say.log(f"restarted: {restart['start_s']:.1f} s to load")
    with node.client() as client:
        loaded = tiers(client, topic)
        after = memory(client)
        keys_loaded = int(client.dbsize())
    if loaded != held:
        raise RuntimeError(f"the restarted server holds {loaded}, not {held}")
    return {
        "rewrite_seconds": rewrite_s,
        "aof_files": files,
        "aof_bytes": total,
        "aof_bytes_per_job": total / jobs,
        "aof_base_size": int(aof_info["aof_base_size"]),
        "restart": restart,
        "restart_seconds_per_million_jobs": restart["start_s"] / jobs * 1e6,
        "keys_loaded": keys_loaded,
        "memory_after_restart": after,
        "jobs_after_restart": loaded,
    }


def measure_volume(workdir: Path, sizes: Volume, cpu: int | None, say: Console) -> dict[str, Any]:
    node = Node(workdir, cpu)
    try:
        with node.client() as client:
            server = info(client, "server")["redis_version"]
        near = fill(node, "scale.near", sizes.near_jobs, "?horizon_ms=off", sizes.producers, say)
        far = fill(node, "scale.far", sizes.jobs, "", sizes.producers, say)
        far["target_max"] = FAR_TARGET
        far["met"] = far["bytes_per_job"] <= FAR_TARGET
        far["forecast"] = forecast(node, "scale.far", sizes.jobs, say)
        kept = persistence(node, "scale.far", sizes.jobs, say)
    finally:
        node.stop()
    return {
        "server": f"redis-server {server}, appendonly yes, appendfsync everysec "
        "(auto-aof-rewrite at its defaults), no RDB snapshots",
        "near": near,
        "far": far,
        "persistence": kept,
    }
