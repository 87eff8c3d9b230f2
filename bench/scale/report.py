"""The scale benchmark's derived figures (the promotion rounds summed up per shard
count, the model of 100 million jobs) and its tables."""

from __future__ import annotations

import statistics
from typing import Any

from common import percentile, status
from promotion import FIRST_LAG_TARGET
from rich.table import Table
from slowlog import longest_fcall

__all__ = ["model", "promotion_summary", "tables"]

MODEL_JOBS = 100_000_000
PRIMARIES = 3


def _spread(values: list[float]) -> dict[str, Any]:
    median = statistics.median(values)
    return {"runs": values, "median": median, "min": min(values), "max": max(values)}


def promotion_summary(rounds: list[dict[str, Any]], shards: int) -> dict[str, Any]:
    """The rounds of one shard count: the first job's lag per shard pooled over rounds."""
    mine = [r for r in rounds if r["shards"] == shards]
    firsts = [
        lag for r in mine for lag in r["delivery"]["first_lag_ms_per_shard"] if lag is not None
    ]
    p99 = percentile(firsts, 99)
    promo = [r["promotion"] for r in mine]
    during = [longest_fcall(r["calls_during_promotion"]) for r in mine]
    delivery = [longest_fcall(r["calls_during_delivery"]) for r in mine]
    return {
        "shards": shards,
        "rounds": len(mine),
        "jobs_per_round": mine[0]["jobs"],
        "first_lag_ms": {
            "samples": firsts,
            "p50": percentile(firsts, 50),
            "p99": p99,
            "max": max(firsts),
            "target_p99_max": FIRST_LAG_TARGET,
            "met": p99 <= FIRST_LAG_TARGET,
        },
        "last_lag_ms": _spread([r["delivery"]["last_lag_ms"] for r in mine]),
        "promotion_jobs_per_s": _spread([p["jobs_per_s"] or 0.0 for p in promo]),
        "promotion_seconds": _spread([p["seconds"] or 0.0 for p in promo]),
        "promotion_started_late_ms": _spread([p["started_late_ms"] or 0.0 for p in promo]),
        "promotion_done_before_bucket_ms": _spread(
            [p["done_before_bucket_ms"] or 0.0 for p in promo]
        ),
        "put_ended_before_promotion_ms": min(r["put"]["ended_before_promotion_ms"] for r in mine),
        "early": sum(
            r["delivery"]["early_store_clock"] + r["delivery"]["early_client_clock"] for r in mine
        ),
        "delivered": sum(r["delivery"]["delivered"] for r in mine),
        "expected": sum(r["jobs"] for r in mine),
        "leases_lost": sum(r["delivery"]["leases_lost"] for r in mine),
        "longest_fcall_during_promotion": _longest(during),
        "longest_fcall_during_delivery": _longest(delivery),
    }


def _longest(calls: list[tuple[float, str]]) -> dict[str, Any]:
    ms, name = max(calls)
    return {"ms": ms, "function": name, "per_round_ms": [c[0] for c in calls]}


def model(volume: dict[str, Any]) -> dict[str, Any]:
    """100 million jobs, linearly from the far fill: on one node, and per primary of a
    3-primary cluster (a third each)."""
    far, kept = volume["far"], volume["persistence"]
    n = far["jobs"]
    per_job = {
        "memory_far": far["bytes_per_job"],
        "memory_far_after_restart": (
            kept["memory_after_restart"]["used_memory"] - far["memory_before"]["used_memory"]
        )
        / n,
        "memory_near": volume["near"]["bytes_per_job"],
        "aof": kept["aof_bytes_per_job"],
        "restart_s": kept["restart"]["start_s"] / n,
    }
    out: dict[str, Any] = {"from_jobs": n, "jobs": MODEL_JOBS, "per_job": per_job}
    for place, share in (("one_node", 1), ("per_primary_of_3", PRIMARIES)):
        jobs = MODEL_JOBS / share
        out[place] = {
            "jobs": jobs,
            "memory_far_gb": per_job["memory_far"] * jobs / 1e9,
            "memory_near_gb": per_job["memory_near"] * jobs / 1e9,
            "aof_gb": per_job["aof"] * jobs / 1e9,
            "restart_s": per_job["restart_s"] * jobs,
        }
    return out


def tables(report: dict[str, Any]) -> list[Table]:
    out = []
    if "harness" in report or "volume" in report:
        out.append(memory_table(report))
    if "volume" in report:
        out.append(persistence_table(report["volume"]["persistence"], report["volume"]["far"]))
        if "forecast" in report["volume"]["far"]:
            out.append(forecast_table(report["volume"]["far"]))
        out.append(model_table(report["model"]))
    if "promotion" in report:
        out.append(promotion_table(report["promotion"]["summary"]))
    if "sqlite" in report:
        out.append(sqlite_table(report["sqlite"]))
    return out


def memory_table(report: dict[str, Any]) -> Table:
    table = Table(
        title="Memory per job (used_memory after − before, ÷ jobs; event stream included)"
    )
    for name in ("tier", "how", "jobs", "bytes/job", "target", "", "put jobs/s"):
        table.add_column(name, justify="left" if name in ("tier", "how", "target") else "right")
    harness = report.get("harness")
    if harness:
        for tier in ("near", "far"):
            h = harness[tier]
            target = "≤ 200" if tier == "near" else ""
            table.add_row(
                f"{tier} ({h['url_options']})",
                f"harness: put one by one, due in 1 h, median of {harness['rounds']}",
                f"{harness['jobs']:,}",
                f"{h['bytes_per_job']:,.1f}",
                target,
                status(h.get("met")),
                f"{h['puts_per_s']:,.0f}",
            )
    volume = report.get("volume")
    if volume:
        for tier in ("near", "far"):
            f = volume[tier]
            p = f["put"]
            table.add_row(
                f"{tier} ({f['url_options']})",
                f"put_many(1,000) × {p['producers']} processes, due over 30 days",
                f"{f['jobs']:,}",
                f"{f['bytes_per_job']:,.1f}",
                "≤ 100" if tier == "far" else "",
                status(f.get("met")),
                f"{p['jobs_per_s']:,.0f}",
            )
    return table


def persistence_table(kept: dict[str, Any], far: dict[str, Any]) -> Table:
    table = Table(title=f"AOF and restart, {far['jobs']:,} far jobs")
    for name in ("AOF after rewrite", "AOF bytes/job", "rewrite", "restart", "memory reloaded"):
        table.add_column(name, justify="right")
    reloaded = kept["memory_after_restart"]["used_memory"] - far["memory_before"]["used_memory"]
    table.add_row(
        f"{kept['aof_bytes'] / 1e6:,.1f} MB",
        f"{kept['aof_bytes_per_job']:,.1f}",
        f"{kept['rewrite_seconds']:,.1f} s",
        f"{kept['restart']['start_s']:,.2f} s",
        f"{reloaded / far['jobs']:,.1f} B/job",
    )
    return table


def forecast_table(far: dict[str, Any]) -> Table:
    f = far["forecast"]
    table = Table(title=f"Forecast of {far['jobs']:,} far jobs, 30 days by the hour (end to end)")
    for name in ("steps", "calls, ms", "median", "target", ""):
        table.add_column(name, justify="right")
    table.add_row(
        f"{f['steps']:,}",
        " · ".join(f"{t:.1f}" for t in f["calls_ms"]),
        f"{f['median_ms']:.1f} ms",
        f"≤ {f['target_max_ms']:.0f} ms",
        "met" if f["met"] else "MISSED",
    )
    return table


def model_table(m: dict[str, Any]) -> Table:
    table = Table(title=f"Model: {m['jobs']:,} jobs, linear from {m['from_jobs']:,}")
    for name in ("where", "jobs", "memory (far)", "memory if near", "AOF", "restart"):
        table.add_column(name, justify="left" if name == "where" else "right")
    for place, label in (("one_node", "one node"), ("per_primary_of_3", "each of 3 primaries")):
        row = m[place]
        table.add_row(
            label,
            f"{row['jobs']:,.0f}",
            f"{row['memory_far_gb']:,.1f} GB",
            f"{row['memory_near_gb']:,.1f} GB",
            f"{row['aof_gb']:,.1f} GB",
            f"{row['restart_s']:,.0f} s",
        )
    return table


def promotion_table(summaries: list[dict[str, Any]]) -> Table:
    table = Table(title="Promotion of a bucket due within 1 s, then its delivery (lags in ms)")
    heads = (
        "shards",
        "jobs × rounds",
        "promoted/s",
        "took",
        "done before due",
        "first job: p50 / p99 / max",
        "",
        "last job",
        "early",
        "longest FCALL: promotion",
        "delivery",
    )
    for name in heads:
        table.add_column(name, justify="right")
    for s in summaries:
        first = s["first_lag_ms"]
        during, after = s["longest_fcall_during_promotion"], s["longest_fcall_during_delivery"]
        table.add_row(
            str(s["shards"]),
            f"{s['jobs_per_round']:,} × {s['rounds']}",
            f"{s['promotion_jobs_per_s']['median']:,.0f}",
            f"{s['promotion_seconds']['median']:,.2f} s",
            f"{s['promotion_done_before_bucket_ms']['min'] / 1000:,.1f} s",
            f"{first['p50']:.2f} / {first['p99']:.2f} / {first['max']:.2f}",
            status(first["met"]),
            f"{s['last_lag_ms']['median']:,.0f}",
            f"{s['early']}" if not s["early"] else f"[red bold]{s['early']} EARLY[/]",
            f"{during['ms']:.2f} ({during['function']})",
            f"{after['ms']:.2f} ({after['function']})",
        )
    return table


def sqlite_table(sq: dict[str, Any]) -> Table:
    table = Table(title="SQLite: bytes on disk per job (file + WAL after a checkpoint)")
    for name in ("jobs", "bytes/job", "file", "WAL", "put jobs/s", "largest parts"):
        table.add_column(name, justify="left" if name == "largest parts" else "right")
    parts = list(sq["bytes_by_table_or_index"].items())[:4]
    table.add_row(
        f"{sq['jobs']:,}",
        f"{sq['bytes_per_job']:,.1f}",
        f"{sq['file_bytes'] / 1e6:,.1f} MB",
        f"{sq['wal_bytes'] / 1e6:,.1f} MB",
        f"{sq['put']['jobs_per_s']:,.0f}",
        ", ".join(f"{name} {size / sq['jobs']:,.0f}" for name, size in parts) + " B/job",
    )
    return table
