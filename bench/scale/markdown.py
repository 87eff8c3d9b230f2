"""The scale benchmark's results as the Markdown tables of docs/benchmarks.md ("Scale:
the far tier"): every table of the first run given, then the headline figures of every
run side by side.

    .venv/bin/python bench/scale/markdown.py RUN.json [RUN.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["document"]


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(heads: list[str], rows: list[list[object]], right_from: int = 1) -> list[str]:
    rule = ["---" if k < right_from else "---:" for k in range(len(heads))]
    return [_row(*heads), _row(*rule), *(_row(*r) for r in rows), ""]


def _tier(tier: str, options: str) -> str:
    return f"{tier} (default URL)" if options.startswith("(") else f"{tier} (`{options}`)"


def _mark(met: bool | None) -> str:
    return "" if met is None else (" ✓" if met else " ✗")


def header(r: dict[str, Any]) -> list[str]:
    m = r["machine"]
    loads = ", ".join(f"{p} {v[0]:.2f}" for p, v in r["loadavg_at_phase"].items())
    return [
        "```text",
        f"command   {r['command']}",
        f"machine   {m['cpu']}, {m['cores']} cores, {m['platform']}",
        f"versions  Python {m['python']}, redis-server {m['redis_server']}, redis-py "
        f"{m['redis_py']}, chronoq {m['chronoq']} at {m['source']}",
        f"load avg  at the start of each phase (1 min): {loads}; at the end "
        f"{m['loadavg_end'][0]:.2f}",
        f"took      {r['seconds'] / 60:.0f} min",
        "```",
        "",
    ]


def memory(r: dict[str, Any]) -> list[str]:
    rows: list[list[object]] = []
    h = r["harness"]
    for tier in ("near", "far"):
        t = h[tier]
        rows.append(
            [
                _tier(tier, t["url_options"]),
                f"one `put` each, due in 1 h (harness), median of {h['rounds']}",
                f"{h['jobs']:,}",
                f"{t['bytes_per_job']:,.1f}{_mark(t.get('met'))}",
                f"{t['puts_per_s']:,.0f}",
            ]
        )
    for tier in ("near", "far"):
        f = r["volume"][tier]
        rows.append(
            [
                _tier(tier, f["url_options"]),
                f"`put_many(1,000)` × {f['put']['producers']} processes, due over 30 days",
                f"{f['jobs']:,}",
                f"{f['bytes_per_job']:,.1f}{_mark(f.get('met'))}",
                f"{f['put']['jobs_per_s']:,.0f}",
            ]
        )
    heads = ["tier", "jobs put", "N", "bytes per job", "jobs/s put"]
    return _table(heads, rows, right_from=2)


def persistence(r: dict[str, Any]) -> list[str]:
    far, kept = r["volume"]["far"], r["volume"]["persistence"]
    n = far["jobs"]
    reloaded = kept["memory_after_restart"]["used_memory"] - far["memory_before"]["used_memory"]
    row = [
        f"{n:,}",
        f"{far['memory_after']['used_memory'] / 1e6:,.0f} MB",
        f"{kept['aof_bytes'] / 1e6:,.1f} MB ({kept['aof_bytes_per_job']:,.1f} B/job)",
        f"{kept['rewrite_seconds']:,.1f} s",
        f"{kept['restart']['start_s']:,.2f} s",
        f"{reloaded / n:,.1f} B/job",
        f"{far['keys_added']:,}",
    ]
    heads = [
        "far jobs",
        "used_memory",
        "AOF after BGREWRITEAOF",
        "rewrite",
        "restart to loading:0",
        "memory once reloaded",
        "keys",
    ]
    return _table(heads, [row], right_from=0)


def promotion(r: dict[str, Any]) -> list[str]:
    rows = []
    for s in r["promotion"]["summary"]:
        first = s["first_lag_ms"]
        rows.append(
            [
                s["shards"],
                f"{s['jobs_per_round']:,} × {s['rounds']}",
                f"{s['promotion_jobs_per_s']['median']:,.0f} "
                f"({s['promotion_jobs_per_s']['min']:,.0f}–{s['promotion_jobs_per_s']['max']:,.0f})",
                f"{s['promotion_seconds']['median']:,.1f} s",
                f"{s['promotion_done_before_bucket_ms']['min'] / 1000:,.1f} s",
                f"{first['p50']:.1f} / {first['p99']:.1f}{_mark(first['met'])} "
                f"({len(first['samples'])})",
                f"{s['last_lag_ms']['median'] / 1000:,.1f} s",
                f"{s['early']} / {s['delivered']:,} of {s['expected']:,}",
                f"{s['longest_fcall_during_promotion']['ms']:.1f} "
                f"({s['longest_fcall_during_promotion']['function']})",
                f"{s['longest_fcall_during_delivery']['ms']:.1f} "
                f"({s['longest_fcall_during_delivery']['function']})",
            ]
        )
    heads = [
        "shards",
        "jobs × rounds",
        "promoted jobs/s, median (range)",
        "promotion took",
        "done before the bucket's start, least",
        "first job's lag, ms: p50 / p99 (samples)",
        "last job's lag, median",
        "early / delivered",
        "longest FCALL in promotion, ms",
        "in delivery, ms",
    ]
    return _table(heads, rows)


def rounds(r: dict[str, Any]) -> list[str]:
    rows = []
    for rnd in r["promotion"]["rounds"]:
        p, d = rnd["promotion"], rnd["delivery"]
        reserve = rnd["calls_during_promotion"]["by_function"].get("reserve", {})
        firsts = " / ".join(f"{lag:.1f}" for lag in d["first_lag_ms_per_shard"])
        drain_s = max((d["last_delivery_ms"] - rnd["bucket_start_ms"]) / 1000, 1e-3)
        rows.append(
            [
                rnd["round"] + 1,
                rnd["shards"],
                f"{rnd['put']['jobs_per_s']:,.0f}",
                f"{p['started_late_ms']:.0f}",
                f"{p['jobs_per_s'] or 0:,.0f}",
                f"{reserve.get('calls', 0):,}",
                f"{reserve.get('p50_ms', 0):.2f} / {reserve.get('p99_ms', 0):.2f} / "
                f"{reserve.get('max_ms', 0):.2f}",
                firsts,
                f"{d['last_lag_ms'] / 1000:,.1f} s",
                f"{d['delivered'] / drain_s:,.0f}",
            ]
        )
    heads = [
        "round",
        "shards",
        "put jobs/s",
        "promotion began, ms after due",
        "promoted jobs/s",
        "reserve calls in promotion",
        "their ms: p50 / p99 / max",
        "first job's lag per shard, ms",
        "last job's lag",
        "delivered jobs/s from the bucket's start",
    ]
    return _table(heads, rows)


def model(r: dict[str, Any]) -> list[str]:
    m = r["model"]
    rows = []
    for place, label in (("one_node", "one node"), ("per_primary_of_3", "each of 3 primaries")):
        row = m[place]
        rows.append(
            [
                label,
                f"{row['jobs']:,.0f}",
                f"{row['memory_far_gb']:,.1f} GB",
                f"{row['memory_near_gb']:,.1f} GB",
                f"{row['aof_gb']:,.1f} GB",
                f"{row['restart_s']:,.0f} s",
            ]
        )
    heads = ["100 M jobs on", "jobs", "memory, far tier", "if all near", "AOF", "restart"]
    return _table(heads, rows)


def sqlite(r: dict[str, Any]) -> list[str]:
    sq = r["sqlite"]
    parts = ", ".join(
        f"{name} {size / sq['jobs']:,.0f}"
        for name, size in sq["bytes_by_table_or_index"].items()
        if size >= sq["jobs"]  # a byte per job or more
    )
    row = [
        f"{sq['jobs']:,}",
        f"{sq['bytes_per_job']:,.1f}",
        f"{sq['file_bytes'] / 1e6:,.1f} MB + {sq['wal_bytes'] / 1e6:,.1f} MB",
        f"{sq['put']['jobs_per_s']:,.0f}",
        parts,
    ]
    heads = ["jobs", "bytes per job", "file + WAL", "put jobs/s", "bytes per job by table or index"]
    return _table(heads, [row], right_from=0)


def headline(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    rows = []
    for name, r in runs:
        v, s = r["volume"], {x["shards"]: x for x in r["promotion"]["summary"]}
        h = r["harness"]
        longest = max(s[k]["longest_fcall_during_promotion"]["ms"] for k in (1, 4))
        rows.append(
            [
                name,
                f"{r['machine']['loadavg_start'][0]:.2f}",
                f"{h['near']['bytes_per_job']:,.0f} / {h['far']['bytes_per_job']:,.0f}",
                f"{v['near']['bytes_per_job']:,.0f}",
                f"{v['far']['bytes_per_job']:,.1f}",
                f"{v['near']['put']['jobs_per_s']:,.0f} / {v['far']['put']['jobs_per_s']:,.0f}",
                f"{s[1]['promotion_jobs_per_s']['median']:,.0f} / "
                f"{s[4]['promotion_jobs_per_s']['median']:,.0f}",
                f"{s[1]['first_lag_ms']['p99']:.1f} / {s[4]['first_lag_ms']['p99']:.1f}",
                f"{longest:.1f}",
                f"{s[1]['early'] + s[4]['early']}",
                f"{v['persistence']['aof_bytes_per_job']:,.1f}",
                f"{v['persistence']['restart']['start_s']:,.1f} s",
                f"{r['sqlite']['bytes_per_job']:,.0f}",
            ]
        )
    heads = [
        "run",
        "load at start",
        "harness B/job near / far",
        "near B/job, put_many",
        "far B/job, put_many",
        "put jobs/s near / far",
        "promoted jobs/s shards 1 / 4",
        "first-job lag p99 ms, shards 1 / 4",
        "longest FCALL in promotion, ms",
        "early",
        "AOF B/job",
        "restart",
        "SQLite B/job",
    ]
    return _table(heads, rows)


def document(paths: list[Path]) -> str:
    runs = [(p.stem, json.loads(p.read_text())) for p in paths]
    first = runs[0][1]
    parts = header(first)
    for part in (memory, persistence, model, promotion, rounds, sqlite):
        parts += part(first)
    if len(runs) > 1:
        parts += headline(runs)
    return "\n".join(parts)


if __name__ == "__main__":
    print(document([Path(a) for a in sys.argv[1:]]))
