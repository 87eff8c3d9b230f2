"""chronoq.pipeline.export and ``chronoq export``: the schema of the files,
incremental runs, gaps, trimming, and what a directory refuses."""

from __future__ import annotations

import fcntl
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import chronoq
from chronoq.cli.main import cli
from chronoq.errors import InvalidInput
from chronoq.pipeline.export import Exporter, ExportGap, partition_path
from chronoq.pipeline.schema import FILE_SCHEMA

from .helpers import exported, log_cap, log_events, make_events

CLEAN_ENV = {"CHRONOQ_STORE": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


def _key(row: dict[str, object]) -> tuple[object, object, object]:
    return row["topic"], row["shard"], row["seq"]


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner(env=CLEAN_ENV).invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_files_hold_every_event_once_with_the_documented_schema(
    queue: chronoq.Queue, topic: str, tmp_path: Path
) -> None:
    make_events(queue, topic, 300)
    make_events(queue, topic + ":b", 50, group="tenant-42")  # a colon: escaped, as Spark does
    summary = Exporter(queue, tmp_path / "out").run()
    assert summary.events == 3 * 350 and summary.lost == 0
    rows = exported(tmp_path / "out")
    logged = log_events(queue)
    assert sorted(map(_key, rows)) == sorted(logged)
    for row in rows:
        event = logged[_key(row)]
        assert row["id"] == event.id and row["event"] == event.event.value
        assert row["ts"] == datetime.fromtimestamp(event.ts_ms / 1000, UTC)
        assert row["due_at"] == datetime.fromtimestamp(event.due_at / 1000, UTC)
        assert (row["attempt"], row["priority"], row["error"]) == (
            event.attempt,
            event.priority,
            event.error,
        )
        assert row["lag_ms"] == event.lag_ms
        assert (row["lag_ms"] is None) == (event.event.value != "reserve")
        assert row["group"] == event.group == ("tenant-42" if event.topic != topic else None)
        assert str(row["date"]) == row["ts"].strftime("%Y-%m-%d")
    files = sorted((tmp_path / "out").glob("topic=*/date=*/part-*.parquet"))
    assert {f.parent.parent.name for f in files} == {f"topic={topic}", f"topic={topic}%3Ab"}
    assert pq.read_schema(files[0]).remove_metadata() == FILE_SCHEMA


def test_a_second_run_exports_only_what_came_since(
    queue: chronoq.Queue, topic: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    make_events(queue, topic, 100)
    assert Exporter(queue, out).run().events == 300
    assert Exporter(queue, out).run().events == 0
    make_events(queue, topic, 40, start=100)
    assert Exporter(queue, out, flush_events=7).run().events == 120
    rows = exported(out)
    assert len(rows) == len({_key(row) for row in rows}) == 420


def test_a_gap_stops_the_export_unless_allowed(store_url: str, topic: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    q = chronoq.connect(log_cap(store_url, 3000))
    make_events(q, topic, 100)
    Exporter(q, out).run()
    # the SQLite store trims every 10,000 events it writes, Redis on each write
    make_events(q, topic, 5000, start=100)
    with pytest.raises(ExportGap) as gap:
        Exporter(q, out).run()
    [lost] = gap.value.gaps
    assert lost["lost"] > 0 and lost["after"] == 300
    assert "trimmed from the store before they were exported" in str(gap.value)
    assert len(exported(out)) == 300  # nothing past the gap, nothing twice
    summary = Exporter(q, out, allow_gaps=True).run()
    assert summary.lost == lost["lost"]
    assert len(exported(out)) == 300 + summary.events
    assert 300 + summary.events + summary.lost == 3 * 5100
    state = json.loads((out / "_chronoq" / "export.json").read_text())
    assert [g["lost"] for g in state["gaps"]] == [lost["lost"]]
    q.close()


def test_trim_drops_only_what_is_exported(queue: chronoq.Queue, topic: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_events(queue, topic, 200)
    Exporter(queue, out, trim=True).run()
    left = log_events(queue, topic)
    assert len(left) < 600  # Redis keeps a packed entry that holds a later event
    make_events(queue, topic, 10, start=200)
    Exporter(queue, out, trim=True).run()  # trimmed events are not a gap
    rows = exported(out)
    assert len(rows) == len({_key(row) for row in rows}) == 630
    for shard in queue.log_shards(topic):
        page = queue.log_read(shard, 0)
        assert all(event.seq >= page.head for event in page.events)


def test_cli_exports_with_a_json_summary(sqlite_url: str, topic: str, tmp_path: Path) -> None:
    with chronoq.connect(sqlite_url) as q:
        make_events(q, topic, 20)
    out = tmp_path / "out"
    code, stdout, _ = run_cli("export", "--store", sqlite_url, "--to", str(out), "--json")
    assert code == 0
    doc = json.loads(stdout)
    assert (doc["events"], doc["lost"], doc["gaps"], doc["to"]) == (60, 0, [], str(out))
    code, stdout, _ = run_cli("export", "--store", sqlite_url, "--to", str(out))
    assert code == 0 and "exported 0 event(s)" in stdout


def test_cli_gap_exits_4_and_allow_gaps_goes_on(sqlite_url: str, tmp_path: Path) -> None:
    url, out = log_cap(sqlite_url, 100), tmp_path / "out"
    with chronoq.connect(url) as q:
        make_events(q, "t", 10)
        Exporter(q, out).run()
        make_events(q, "t", 4000, start=10)
    code, _, stderr = run_cli("export", "--store", url, "--to", str(out))
    assert code == 4
    assert "were trimmed from the store before they were exported" in stderr
    assert "--allow-gaps" in stderr
    code, stdout, stderr = run_cli(
        "export", "--store", url, "--to", str(out), "--allow-gaps", "--json"
    )
    assert code == 0 and json.loads(stdout)["lost"] > 0
    assert "Warning:" in stderr


def test_a_directory_belongs_to_one_store_and_selection(sqlite_url: str, tmp_path: Path) -> None:
    with chronoq.connect(sqlite_url) as q:
        make_events(q, "t", 5)
        Exporter(q, tmp_path / "d", topic="t").run()
        with pytest.raises(InvalidInput, match="export of topic t"):
            Exporter(q, tmp_path / "d").run()
        with pytest.raises(InvalidInput, match="one sequence for every topic"):
            Exporter(q, tmp_path / "e", topic="t", trim=True).run()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    code, _, stderr = run_cli(
        "export", "--store", other, "--to", str(tmp_path / "d"), "--topic", "t"
    )
    assert code == 2 and "holds an export of" in stderr


def test_one_export_at_a_time_per_directory(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "_chronoq").mkdir()
    with open(tmp_path / "_chronoq" / "lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, _, stderr = run_cli("export", "--store", sqlite_url, "--to", str(tmp_path))
    assert code == 2 and "another chronoq export is writing" in stderr


def test_a_lost_log_is_reported_as_a_reset(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with chronoq.connect(url) as q:
        make_events(q, "t", 10)
        Exporter(q, tmp_path / "out").run()
    (tmp_path / "a.db").unlink()  # the store starts over: seqs from 1 again
    with chronoq.connect(url) as q:
        make_events(q, "t", 3)
        with pytest.raises(ExportGap, match="lost or replaced its log"):
            Exporter(q, tmp_path / "out").run()
        assert Exporter(q, tmp_path / "out", allow_gaps=True).run().events == 9


def test_partition_paths_escape_as_spark_does() -> None:
    assert partition_path("a:b.c", 0) == "topic=a%3Ab.c/date=1970-01-01"
    assert partition_path("x", 20_000) == "topic=x/date=2024-10-04"


class Crash(BaseException):
    """Stands for the process dying at that point (not an Exception: nothing catches it)."""


def test_a_crash_after_the_commit_is_finished_by_the_next_run(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chronoq.pipeline.exportstate as exportstate

    out = tmp_path / "out"
    with chronoq.connect(sqlite_url) as q:
        make_events(q, "t", 30)

        def crash(renames: object) -> None:
            raise Crash

        with monkeypatch.context() as patch:
            patch.setattr(exportstate, "rename_durably", crash)
            with pytest.raises(Crash):
                Exporter(q, out).run()
        assert exported(out) == [] and list(out.rglob(".part-*.parquet.tmp"))
        assert Exporter(q, out).run().events == 0  # committed: finished, not read again
        assert sorted(r["seq"] for r in exported(out)) == list(range(1, 91))


def test_a_crash_before_the_commit_reads_the_events_again(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chronoq.pipeline.exportstate import ExportState

    out = tmp_path / "out"
    with chronoq.connect(sqlite_url) as q:
        make_events(q, "t", 30)

        def crash(self: ExportState) -> None:
            raise Crash

        with monkeypatch.context() as patch:
            patch.setattr(ExportState, "save", crash)
            with pytest.raises(Crash):
                Exporter(q, out).run()
        assert list(out.rglob(".part-*.parquet.tmp"))  # written, never committed
        assert Exporter(q, out).run().events == 90
        assert not list(out.rglob(".part-*"))
        assert sorted(r["seq"] for r in exported(out)) == list(range(1, 91))


def test_trim_never_touches_a_log_the_store_replaced(tmp_path: Path) -> None:
    url, out = f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "out"
    with chronoq.connect(url) as q:
        make_events(q, "t", 40)
        Exporter(q, out, trim=True).run()
    (tmp_path / "a.db").unlink()
    with chronoq.connect(url) as q:
        make_events(q, "t", 10)  # 30 new events, numbered from 1 again
        with pytest.raises(ExportGap, match="lost or replaced its log"):
            Exporter(q, out, trim=True).run()
        assert len(log_events(q)) == 30  # not one trimmed
        assert Exporter(q, out, trim=True, allow_gaps=True).run().events == 30


def test_a_topic_export_that_keeps_up_is_not_stopped_by_other_topics(tmp_path: Path) -> None:
    # SQLite keeps one log for every topic: a quiet topic's offset moves with
    # the log, not with its own last event, or trimming the busy topic's
    # events would look like a gap in the quiet one
    url, out = log_cap(f"sqlite:///{tmp_path / 'a.db'}", 6000), tmp_path / "out"
    with chronoq.connect(url) as q:
        make_events(q, "quiet", 1)
        for n in range(6):
            Exporter(q, out, topic="quiet").run()
            make_events(q, "busy", 1000, start=1000 * n)  # trimmed after 10,000 writes
        make_events(q, "quiet", 1, start=1)
        summary = Exporter(q, out, topic="quiet").run()
        assert q.log_read(q.log_shards()[0], 0, limit=1).lost > 0  # the store did trim
    assert (summary.events, summary.lost) == (3, 0)
    assert len(exported(out)) == 6
    with chronoq.connect(url) as q:  # one that does not keep up is told what it cannot know
        make_events(q, "busy", 8000, start=10_000)  # 24,000 events: trimmed past it
        with pytest.raises(ExportGap, match="of every topic: quiet's may be among them"):
            Exporter(q, out, topic="quiet").run()


def test_a_hole_in_the_log_is_reported_after_what_came_before_it(tmp_path: Path) -> None:
    url, out = f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "out"
    with chronoq.connect(url) as q:
        make_events(q, "t", 10)  # seqs 1..30
    with sqlite3.connect(tmp_path / "a.db") as db:
        db.execute("DELETE FROM events WHERE seq BETWEEN 11 AND 15")  # by hand
    with chronoq.connect(url) as q:
        with pytest.raises(ExportGap) as gap:
            Exporter(q, out, read_events=4).run()
        assert gap.value.gaps[0]["after"] == 10 and gap.value.gaps[0]["lost"] == 5
        assert sorted(row["seq"] for row in exported(out)) == list(range(1, 11))
        summary = Exporter(q, out, read_events=4, allow_gaps=True).run()
    assert (summary.events, summary.lost) == (15, 5)
    assert sorted(row["seq"] for row in exported(out)) == [*range(1, 11), *range(16, 31)]
