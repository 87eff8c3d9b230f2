"""Phase 5 of the scale benchmark: SQLite's bytes per job on disk for the same jobs
(the harness's shape, due uniformly over 30 days, generated ids, ``put_many`` of
1,000), in a new database file: its size and its WAL's after
``PRAGMA wal_checkpoint(TRUNCATE)``, divided by the jobs. SQLite keeps one tier:
a row of ``jobs`` with its indexes, and a row of ``events`` per put (the store keeps
``events_keep``, 1,000,000 by default); the dbstat table splits the bytes by table
and index."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from producers import BATCH, DAY_S, Spread, jobs_of
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import chronoq

__all__ = ["sqlite_disk"]

TOPIC = "scale.sqlite"
DAYS = 30


def _put(path: Path, n: int, say: Console) -> tuple[float, float]:
    """(wall seconds, of which building Job values) of ``n`` jobs put in batches."""
    spread = Spread(time.time(), DAYS * DAY_S, seed=n)
    rng = random.Random(n)
    building = 0.0
    with (
        chronoq.connect(f"sqlite:///{path}") as q,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=say,
            transient=True,
        ) as bar,
    ):
        task = bar.add_task(f"SQLite: put {n:,}", total=n)
        started = time.perf_counter()
        for first in range(0, n, BATCH):
            built = time.perf_counter()
            jobs = jobs_of(first, min(n, first + BATCH), spread, rng)
            building += time.perf_counter() - built
            q.put_many(TOPIC, jobs)
            bar.update(task, completed=min(n, first + BATCH))
        return time.perf_counter() - started, building


def sqlite_disk(workdir: Path, n: int, say: Console) -> dict[str, Any]:
    path = workdir / "scale.db"
    seconds, building = _put(path, n, say)
    with sqlite3.connect(path) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise RuntimeError("the WAL checkpoint could not finish (a reader held it)")
        by_object = dict(
            conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        )
        rows = {
            t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("jobs", "events")
        }
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        freelist = conn.execute("PRAGMA freelist_count").fetchone()[0]
    conn.close()
    sizes = {s: _size(Path(f"{path}{s}")) for s in ("", "-wal", "-shm")}
    on_disk = sizes[""] + sizes["-wal"]
    say.log(f"SQLite: {on_disk / n:,.1f} B/job on disk")
    return {
        "jobs": n,
        "due": f"uniform over {DAYS} days from the start of the puts",
        "put": {
            "producers": 1,
            "batch": BATCH,
            "seconds": seconds,
            "jobs_per_s": n / seconds,
            "build_seconds": building,
        },
        "file_bytes": sizes[""],
        "wal_bytes": sizes["-wal"],
        "bytes_per_job": on_disk / n,
        "rows": rows,
        "bytes_by_table_or_index": by_object,
        "page_size": page_size,
        "free_pages": freelist,
    }


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
