"""Phase 1 of the scale benchmark: Redis memory per delayed job measured as the peer
harness does (bench/peers/run.py ``enqueue_figures``), for the near tier
(``?horizon_ms=off``) and the far tier (the default URL).

5,000 jobs due an hour ahead (one per ms), each put with its own ``put`` call,
payload ``{"i": "enq-<k>", "due": <due>}``, ``run_at`` = due, generated ids, into
an emptied server (FLUSHALL; the function library stays loaded, as in the harness's
second and later rounds); ``INFO memory used_memory`` after, less before, divided by
the jobs: the topic's keys and its event stream included. The rounds alternate the
tiers' order."""

from __future__ import annotations

import statistics
import time
from typing import Any, cast

import redis
from rich.console import Console

import chronoq

__all__ = ["NEAR_TARGET", "harness_memory"]

QUEUE = "bench"  # the harness's topic (bench/peers/systems/peer_chronoq.py)
NEAR_TARGET = 200.0  # bytes per job, issue 27
TIERS = {"near": "?horizon_ms=off", "far": ""}


def used_memory(client: redis.Redis) -> int:
    return int(cast(dict[str, Any], client.info("memory"))["used_memory"])


def one_tier(client: redis.Redis, url: str, n: int) -> tuple[float, float]:
    """(bytes per job, puts/s) of ``n`` jobs put one by one into an emptied server."""
    client.flushall(asynchronous=False)
    with chronoq.connect(url) as q:
        before = used_memory(client)
        far = time.time() + 3600
        started = time.perf_counter()
        for k in range(n):
            due = round(far + k / 1000, 3)
            q.put(QUEUE, {"i": f"enq-{k}", "due": due}, run_at=due)
        seconds = time.perf_counter() - started
        return (used_memory(client) - before) / n, n / seconds


def harness_memory(url: str, n: int, rounds: int, say: Console) -> dict[str, Any]:
    """Both tiers, ``rounds`` times each; the median bytes per job of each."""
    runs: dict[str, list[tuple[float, float]]] = {tier: [] for tier in TIERS}
    with redis.Redis.from_url(url) as client, chronoq.connect(url) as q:
        q.get(QUEUE, "warm-up")  # the function library loaded before any round
        for rnd in range(rounds):
            order = list(TIERS) if rnd % 2 == 0 else list(reversed(TIERS))
            for tier in order:
                runs[tier].append(one_tier(client, url + TIERS[tier], n))
                say.log(f"harness {tier}, round {rnd + 1}: {runs[tier][-1][0]:,.1f} B/job")
        client.flushall(asynchronous=False)
    out: dict[str, Any] = {"jobs": n, "rounds": rounds}
    for tier, figures in runs.items():
        per_job = [b for b, _ in figures]
        out[tier] = {
            "url_options": TIERS[tier] or "(default)",
            "bytes_per_job": statistics.median(per_job),
            "runs": per_job,
            "puts_per_s": statistics.median(r for _, r in figures),
        }
    out["near"]["target_max"] = NEAR_TARGET
    out["near"]["met"] = out["near"]["bytes_per_job"] <= NEAR_TARGET
    out["far_to_near"] = out["far"]["bytes_per_job"] / out["near"]["bytes_per_job"]
    return out
