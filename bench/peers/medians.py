"""The medians of several runs of bench/peers/run.py, as one table (the
figures of docs/benchmarks.md), with each run's ratios to its own best peer.

    .venv/bin/python bench/peers/medians.py OUT_DIR [OUT_DIR ...]

Each figure of each system is the median of that figure over the runs
(early, lost and duplicate starts: their sum); the ratio rows under the
table are those of the median table. Then, per column, chronoq on Redis's
ratio to the best peer of each run, as each run printed it.
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import markdown_table

FIGURES = ("enqueue_single", "enqueue_bulk", "drain_per_s", "bytes_per_job")
LAG = ("p50", "p95", "p99", "max")
COUNTS = ("early", "lost", "duplicates")


def median_results(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for first in runs[0]:
        same = [r for run in runs for r in run if r["name"] == first["name"] and "error" not in r]
        if not same:
            out.append(first)
            continue
        merged = copy.deepcopy(same[0])
        for key in FIGURES:
            values = [r[key] for r in same if r.get(key) is not None]
            merged[key] = statistics.median(values) if values else None
        for key in COUNTS:
            merged[key] = sum(r[key] for r in same)
        for phase in merged.get("phases", {}):
            for key in LAG:
                values = [r["phases"][phase][key] for r in same if phase in r.get("phases", {})]
                merged["phases"][phase][key] = statistics.median(values)
        out.append(merged)
    return out


def main(argv: list[str]) -> int:
    runs = [json.loads((Path(d) / "results.json").read_text())["results"] for d in argv]
    print(f"medians of {len(runs)} runs: {', '.join(argv)}\n")
    print(markdown_table(median_results(runs)))
    for d in argv:
        rows = [line for line in (Path(d) / "table.md").read_text().splitlines() if "÷" in line]
        print(f"{d}: {rows[0] if rows else '(no ratio row)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
