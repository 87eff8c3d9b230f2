"""Flow control's state in a SQLite store (sqlite/flow.py, flow_triggers.sql): a store
made anew under a path a process used before, and groups that came and went."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import chronoq
from chronoq import Job


def test_a_store_made_anew_at_a_used_path_serves_its_grouped_jobs(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with chronoq.connect(f"sqlite:///{path}") as q:
        q.put("t", 1, group="g")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with chronoq.connect(f"sqlite:///{path}") as q:
        q.put("t", 2, group="g")
        assert [job.payload for job in q.reserve("t")] == [2]


def test_groups_that_came_and_went_leave_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with chronoq.connect(f"sqlite:///{path}") as q:
        q.put_many("t", [Job(i, group=f"g{i}") for i in range(500)])
        q.set_limits("t", group_rate=1000, group_per=0.001)  # buckets full again at once
        while jobs := q.reserve("t", 50):
            q.ack_many(jobs)
        for _ in range(40):  # a few forgotten a call
            q.reserve("t")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM flow_groups").fetchone()[0] == 0
