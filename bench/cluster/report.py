"""Figures of the cluster benchmark from its samples (medians and ranges over the rounds,
ratios taken round by round), the model, and the rich tables."""

from __future__ import annotations

import math
import statistics
from typing import Any

from common import percentile
from phases import LAG_MAX_DELAY, LAG_RATE, PHASES, Sample
from rich.table import Table

CPU_RATIO_TARGET = 1.2  # cluster server CPU per job within 1.2x of one node
SPREAD_TARGET = 0.15  # every primary within ±15% of the mean
MODEL_PRIMARIES = (1, 3, 6, 12)
MODEL_PHASES = ("put_many_1000", "reserve_100", "put_one")
STORES = ("node1", "node16", "cluster0", "cluster")
CLUSTERS = ("cluster0", "cluster")
BASES = ("node16", "node1")
LABELS = ("1 node, shards=1", "1 node, shards=16", "cluster, no replicas", "cluster + replicas")


def spread_of(values: list[float]) -> dict[str, Any]:
    return {
        "runs": values,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def of_store(samples: list[Sample]) -> dict[str, Any]:
    return {
        "jobs_per_s": spread_of([s.rate for s in samples]),
        "server_cpu_us_per_job": spread_of([s.cpu_us_per_job for s in samples]),
        "replica_cpu_us_per_job": spread_of([s.usage.replica_cpu / s.jobs * 1e6 for s in samples]),
        "fcalls_per_job": spread_of([s.calls_per_job for s in samples]),
        "jobs": samples[0].jobs,
    }


def ratios(mine: list[Sample], base: list[Sample]) -> dict[str, Any]:
    """Cluster / base, round by round (each pair measured minutes apart at most)."""
    pairs = list(
        zip(sorted(mine, key=lambda s: s.round), sorted(base, key=lambda s: s.round), strict=True)
    )
    cpu = spread_of([a.cpu_us_per_job / b.cpu_us_per_job for a, b in pairs])
    cpu["met"] = cpu["median"] <= CPU_RATIO_TARGET
    cpu["target_max"] = CPU_RATIO_TARGET
    return {"server_cpu_per_job": cpu, "jobs_per_s": spread_of([a.rate / b.rate for a, b in pairs])}


def of_lag(samples: list[Sample], expected: int) -> dict[str, Any]:
    pooled = [lag for s in samples for lag in s.lags]
    return {
        "p50": percentile(pooled, 50) if pooled else math.nan,
        "p99": percentile(pooled, 99) if pooled else math.nan,
        "max": max(pooled, default=math.nan),
        "p99_per_round": [percentile(list(s.lags), 99) if s.lags else math.nan for s in samples],
        "early": sum(1 for lag in pooled if lag < 0),
        "delivered": len(pooled),
        "expected": expected * len(samples),
        "rate": LAG_RATE,
        "max_delay_s": LAG_MAX_DELAY,
    }


def figures(samples: list[Sample], lag_n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in [p.key for p in PHASES] + ["lag"]:
        by_store = {s: [x for x in samples if x.phase == key and x.store == s] for s in STORES}
        entry: dict[str, Any] = {s: of_store(by_store[s]) for s in STORES}
        entry["ratios"] = {
            f"{c}_vs_{b}": ratios(by_store[c], by_store[b]) for c in CLUSTERS for b in BASES
        }
        if key == "lag":
            for s in STORES:
                entry[s]["lag_ms"] = of_lag(by_store[s], lag_n)
        out[key] = entry
    return out


def model(figs: dict[str, Any], evenness: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Predicted jobs/s against the number of primaries: each primary on a core of its own and
    busy only with chronoq, the clients never the limit; a primary does at most 1 s of work a
    second, the busiest primary sets the pace. P=1 uses one node's CPU per job (shards=16),
    P>1 the cluster's (summed over its primaries)."""
    rows: dict[str, Any] = {}
    for phase in MODEL_PHASES:
        one = figs[phase]["node16"]["server_cpu_us_per_job"]["median"]
        many = figs[phase]["cluster"]["server_cpu_us_per_job"]["median"]
        rows[phase] = {}
        for p in MODEL_PRIMARIES:
            cost = one if p == 1 else many
            rows[phase][str(p)] = {
                shards: p * 1e6 / cost / (1.0 if p == 1 else even[str(p)]["mean"])
                for shards, even in evenness.items()
            }
    return {"jobs_per_s": rows, "busiest_share": evenness}


# -- tables -------------------------------------------------------------------------------------


def fmt_range(fig: dict[str, Any], form: str = ",.0f", suffix: str = "") -> str:
    return (
        f"{fig['median']:{form}}{suffix} ({fig['min']:{form}}–{fig['max']:{form}})"
        if len(fig["runs"]) > 1
        else f"{fig['median']:{form}}{suffix}"
    )


def labels() -> dict[str, str]:
    return {p.key: p.label for p in PHASES} | {"lag": f"lag run, {LAG_RATE:g} jobs/s"}


def throughput_table(figs: dict[str, Any]) -> Table:
    table = Table(title="Throughput, jobs/s: median (range over the rounds)")
    for name in ("figure", *LABELS, "no replicas / node16", "+ replicas / node16"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    for key, label in labels().items():
        if key == "lag":
            continue
        f = figs[key]
        row = [fmt_range(f[s]["jobs_per_s"]) for s in STORES]
        row += [
            fmt_range(f["ratios"][f"{c}_vs_node16"]["jobs_per_s"], ".2f", "x") for c in CLUSTERS
        ]
        table.add_row(label, *row)
    return table


def cpu_table(figs: dict[str, Any]) -> Table:
    table = Table(
        title="Server CPU per job, µs (primaries' user+sys; target: cluster ≤ "
        f"{CPU_RATIO_TARGET:g}x one node)"
    )
    names = ["figure", *LABELS, "its replicas"]
    names += [f"{c} / {b}" for c in CLUSTERS for b in BASES]
    for name in names:
        table.add_column(name, justify="left" if name == "figure" else "right")
    for key, label in labels().items():
        f = figs[key]
        row = [fmt_range(f[s]["server_cpu_us_per_job"], ".1f") for s in STORES]
        row.append(fmt_range(f["cluster"]["replica_cpu_us_per_job"], ".1f"))
        for c in CLUSTERS:
            for base in BASES:
                r = f["ratios"][f"{c}_vs_{base}"]["server_cpu_per_job"]
                mark = "[green]✓[/]" if r["met"] else "[red]✗[/]"
                row.append(f"{fmt_range(r, '.2f', 'x')} {mark}")
        table.add_row(label, *row)
    return table


def lag_table(figs: dict[str, Any]) -> Table:
    table = Table(
        title=f"Hand-over lag, ms (delivery - due_at; {LAG_RATE:g} jobs/s, delays 0.05–"
        f"{LAG_MAX_DELAY:g} s, all rounds pooled)"
    )
    for name in ("store", "p50", "p99", "p99 per round", "max", "early", "delivered"):
        table.add_column(name, justify="left" if name == "store" else "right")
    for s, label in zip(STORES, LABELS, strict=True):
        lag = figs["lag"][s]["lag_ms"]
        rounds = " ".join(f"{v:.1f}" for v in lag["p99_per_round"])
        table.add_row(
            label,
            f"{lag['p50']:.2f}",
            f"{lag['p99']:.2f}",
            rounds,
            f"{lag['max']:.1f}",
            str(lag["early"]),
            f"{lag['delivered']}/{lag['expected']}",
        )
    return table


def calls_table(figs: dict[str, Any]) -> Table:
    table = Table(title="FCALL calls per job (all primaries), median")
    for name in ("figure", *LABELS):
        table.add_column(name, justify="left" if name == "figure" else "right")
    for key, label in labels().items():
        table.add_row(label, *(f"{figs[key][s]['fcalls_per_job']['median']:.3f}" for s in STORES))
    return table


def spread_table(spreads: list[dict[str, Any]]) -> Table:
    table = Table(
        title=f"Spread over the primaries (deviation from the mean; target ±{SPREAD_TARGET:.0%})"
    )
    names = ["shards", "primary", "its shards", "records", "dev", "put FCALLs", "dev"]
    names += ["drain FCALLs", "dev", "drain CPU dev"]
    for name in names:
        table.add_column(name, justify="right")
    for sp in spreads:
        for port in sp["records"]:
            table.add_row(
                str(sp["shards"]),
                port,
                str(sp["shards_per_primary"][port]),
                f"{sp['records'][port]:,}",
                f"{sp['records_deviation'][port]:+.0%}",
                f"{sp['put']['calls'][port]:,}",
                f"{sp['put']['calls_deviation'][port]:+.0%}",
                f"{sp['drain']['calls'][port]:,}",
                f"{sp['drain']['calls_deviation'][port]:+.0%}",
                f"{sp['drain']['cpu_deviation'][port]:+.0%}",
            )
    return table


def model_table(mod: dict[str, Any]) -> Table:
    shard_counts = list(mod["busiest_share"])
    table = Table(
        title="Model: jobs/s the servers could carry, from the CPU per job above (one core per "
        "primary, clients never the limit, the busiest primary sets the pace)"
    )
    table.add_column("primaries", justify="right")
    for phase in MODEL_PHASES:
        for shards in shard_counts:
            table.add_column(f"{labels()[phase]}, shards={shards}", justify="right")
    for p in MODEL_PRIMARIES:
        cells = [
            f"{mod['jobs_per_s'][phase][str(p)][shards]:,.0f}"
            for phase in MODEL_PHASES
            for shards in shard_counts
        ]
        table.add_row(str(p), *cells)
    return table
