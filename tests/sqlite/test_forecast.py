"""The forecast on SQLite reads the delayed jobs' index and not one job row:
SQLite's own plan and program for the query say so."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import chronoq
from chronoq.backends.sqlite.reads import _FORECAST_SQL

ARGS = (1_700_000_000_000, 3_600_000, 24, "mail")  # start, step, steps, topic


def test_the_query_reads_the_delayed_index_only(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with chronoq.connect(f"sqlite:///{path}") as q:
        q.put_many("mail", [chronoq.Job(n, delay=60 * n) for n in range(200)])
        assert sum(q.forecast("mail", until=time.time() + 4 * 3600).counts) == 199
    db = sqlite3.connect(path)
    try:
        plans = db.execute("EXPLAIN QUERY PLAN " + _FORECAST_SQL, ARGS).fetchall()
        [plan] = [row[3] for row in plans if row[3].startswith(("SEARCH", "SCAN"))]
        assert plan.startswith("SEARCH jobs USING")
        assert plan.endswith("INDEX jobs_delayed (topic=? AND at>?)")
        roots = dict(db.execute("SELECT name, rootpage FROM sqlite_master"))
        program = db.execute("EXPLAIN " + _FORECAST_SQL, ARGS).fetchall()
        cursors = {row[2]: row[3] for row in program if row[1] == "OpenRead"}  # cursor -> root
        index = next(c for c, root in cursors.items() if root == roots["jobs_delayed"])
        table = next(c for c, root in cursors.items() if root == roots["jobs"])
        reads = [row[2] for row in program if row[1] in ("Column", "Rowid", "SeekRowid")]
        # the values come from the index; the table's cursor is opened (its
        # seek deferred) but never read, so no row of a job is loaded
        assert index in reads and table not in reads
    finally:
        db.close()
