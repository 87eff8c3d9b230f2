"""A store made before a column was added to ``jobs`` or ``events``
(schema.sql) gets it when it is opened, with no step by hand, and keeps its
jobs and events; the code that made it goes on writing and reading it."""

from __future__ import annotations

import re
import sqlite3
import threading
from importlib.resources import files
from pathlib import Path

import chronoq
from chronoq.backends.sqlite.store import ADDED_COLUMNS

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# the put of the code before the column (backends/sqlite/backend.py, _JOB_SQL)
OLD_INSERT = (
    "INSERT INTO jobs (topic, id, state, at, due_at, priority, payload, ttr_ms, max_attempts, "
    "attempts, created_at, unique_for_ms) VALUES (?, ?, 1, 0, 0, 0, ?, 30000, 5, 0, 0, 0)"
)
# an event of the code before the column (backends/sqlite/eventlog.py, _INSERT)
OLD_EVENT = (
    "INSERT INTO events (ts_ms, topic, id, event, attempt, due_at, priority, lag_ms, error) "
    "VALUES (0, ?, ?, 'put', 0, 0, 0, NULL, NULL)"
)


def _old_schema() -> str:
    """schema.sql as it was before the added columns: their lines (and comments)
    left out, and what names them (flow control, the ready index by group) as
    it was then."""
    schema = files("chronoq.backends.sqlite").joinpath("schema.sql").read_text()
    schema = schema.split("\n-- Flow control")[0]
    schema = re.sub(
        r"DROP INDEX IF EXISTS jobs_ready;.*?WHERE state = 1;",
        "CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (topic, priority DESC, due_at) "
        "WHERE state = 1;",
        schema,
        flags=re.S,
    )
    for _, name, _ in ADDED_COLUMNS:
        schema = re.sub(rf"(?:\n *--[^\n]*)*\n *{name} +\w+,?", "", schema)
    return re.sub(r",(\s*)\)", r"\1)", schema)  # the comma before each table's last one


def _old_store(path: Path) -> None:
    schema = _old_schema()
    assert not any(name in schema for _, name, _ in ADDED_COLUMNS)
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.execute("INSERT INTO topics (name) VALUES ('t')")
    db.execute(OLD_INSERT, ("t", "old", b'{"made":"before"}'))
    db.execute(OLD_EVENT, ("t", "old"))
    db.commit()
    db.close()


def _columns(path: Path, table: str = "jobs") -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def test_an_old_store_gets_the_new_columns_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    assert "traceparent" not in _columns(path)
    with chronoq.connect(f"sqlite:///{path}") as q:
        info = q.get("t", "old")
        assert info is not None
        assert (info.payload, info.traceparent) == ({"made": "before"}, None)
        q.put("t", 2, id="new", traceparent=TRACE, group="g")
        jobs = {job.id: job for job in q.reserve("t", 2)}
        assert {i: (j.traceparent, j.group) for i, j in jobs.items()} == {
            "old": (None, None),
            "new": (TRACE, "g"),
        }
    assert _columns(path)[-2:] == ["traceparent", "job_group"]
    # the code of before goes on: its put names its columns, the new one is NULL
    with sqlite3.connect(path) as db:
        db.execute(OLD_INSERT, ("t", "older", b"3"))
    with chronoq.connect(f"sqlite:///{path}") as q:
        info = q.get("t", "older")
        assert info is not None and info.traceparent is None and info.group is None


def test_processes_opening_an_old_store_at_once_add_the_column_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    failures: list[BaseException] = []

    def open_it() -> None:
        try:
            chronoq.connect(f"sqlite:///{path}").close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert _columns(path).count("traceparent") == _columns(path).count("job_group") == 1
    assert _columns(path, "events").count("job_group") == 1


def test_an_old_store_gets_the_events_group_and_keeps_its_events(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    assert "job_group" not in _columns(path, "events")
    with chronoq.connect(f"sqlite:///{path}") as q:
        q.put("t", 2, id="new", group="g")
        [job] = q.reserve("t", 1)  # "old": put first, no group
        q.ack(job)
        seen = [(e.id, e.event.value, e.group) for e in q.events("t").events]
    assert _columns(path, "events")[-1] == "job_group"
    assert seen == [
        ("old", "put", None),
        ("new", "put", "g"),
        ("old", "reserve", None),
        ("old", "ack", None),
    ]
    # the code of before goes on logging: its events have no group
    with sqlite3.connect(path) as db:
        db.execute(OLD_EVENT, ("t", "older"))
    with chronoq.connect(f"sqlite:///{path}") as q:
        assert [(e.id, e.group) for e in q.events("t").events][-1] == ("older", None)
