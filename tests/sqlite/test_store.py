"""The SQLite store: where connect() puts the file, how it is opened, how a
broken or unwritable store is reported, sharing one file, trimming the log."""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

import chronoq
from chronoq import Job, State
from chronoq.errors import BackendUnavailable, InvalidInput


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def journal_mode(path: Path) -> str:
    with closing(raw(path)) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Work in tmp_path with no $CHRONOQ_STORE set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHRONOQ_STORE", raising=False)
    return tmp_path


def put_and_close(q: chronoq.Queue, topic: str = "t", job_id: str = "j") -> None:
    with q:
        q.put(topic, {"job": job_id}, id=job_id)


def has_job(path: Path, topic: str = "t", job_id: str = "j") -> bool:
    with chronoq.connect(f"sqlite:///{path.resolve()}") as q:
        return q.get(topic, job_id) is not None


# -- where the file is ----------------------------------------------------------------


def test_connect_without_url_uses_chronoq_db_in_working_directory(clean_env: Path) -> None:
    q = chronoq.connect()
    assert q.url == "sqlite:///chronoq.db"
    put_and_close(q)
    assert (clean_env / "chronoq.db").is_file()
    assert has_job(clean_env / "chronoq.db")
    assert journal_mode(clean_env / "chronoq.db") == "wal"


def test_connect_without_url_uses_env_var(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = clean_env / "from-env.db"
    monkeypatch.setenv("CHRONOQ_STORE", f"sqlite:///{target}")
    put_and_close(chronoq.connect())
    assert has_job(target)
    assert not (clean_env / "chronoq.db").exists()


def test_env_var_may_be_a_bare_path(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONOQ_STORE", "env-bare.db")
    put_and_close(chronoq.connect())
    assert has_job(clean_env / "env-bare.db")
    assert not (clean_env / "chronoq.db").exists()


def test_explicit_url_wins_over_env_var(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONOQ_STORE", f"sqlite:///{clean_env / 'from-env.db'}")
    put_and_close(chronoq.connect("sqlite:///explicit.db"))
    assert has_job(clean_env / "explicit.db")
    assert not (clean_env / "from-env.db").exists()


@pytest.mark.parametrize(
    ("url", "relative_path"),
    [
        pytest.param("sqlite:///relative.db", "relative.db", id="relative-url"),
        pytest.param("sqlite:///sub/nested.db", "sub/nested.db", id="relative-url-subdir"),
        pytest.param("bare.db", "bare.db", id="bare-relative"),
        pytest.param("sub/bare.db", "sub/bare.db", id="bare-relative-subdir"),
        pytest.param("sqlite:///jobs.db?events_keep=5", "jobs.db", id="relative-with-option"),
    ],
)
def test_relative_paths_are_in_working_directory(
    clean_env: Path, url: str, relative_path: str
) -> None:
    (clean_env / "sub").mkdir()
    put_and_close(chronoq.connect(url))
    assert has_job(clean_env / relative_path)
    assert journal_mode(clean_env / relative_path) == "wal"


@pytest.mark.parametrize("form", ["url", "bare"])
def test_absolute_paths(
    clean_env: Path, tmp_path_factory: pytest.TempPathFactory, form: str
) -> None:
    target = tmp_path_factory.mktemp("elsewhere") / "abs.db"
    url = f"sqlite:///{target}" if form == "url" else str(target)
    if form == "url":
        assert url.startswith("sqlite:////")
    put_and_close(chronoq.connect(url))
    assert has_job(target)
    assert journal_mode(target) == "wal"
    assert not list(clean_env.iterdir())


def test_in_memory_store_works_and_is_private(clean_env: Path) -> None:
    with chronoq.connect("sqlite://:memory:") as one, chronoq.connect("sqlite://:memory:") as two:
        one.put("t", {"x": 1}, id="j", delay=0)
        assert two.get("t", "j") is None
        [job] = one.reserve("t", wait=1)
        assert job.payload == {"x": 1}
        one.ack(job)
        assert one.stats("t")["total"] == 0
        one.put("t", 2, delay=0.05)
        assert len(one.reserve("t", wait=2)) == 1
    assert not list(clean_env.iterdir())


def test_store_survives_reopening(sqlite_url: str) -> None:
    with chronoq.connect(sqlite_url) as q:
        q.put("t", {"keep": True}, id="j", delay=600, priority=7)
    with chronoq.connect(sqlite_url) as q:
        info = q.get("t", "j")
        assert info is not None
        assert info.payload == {"keep": True} and info.priority == 7
        assert info.state == State.DELAYED


# -- bad URLs and options ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["sqlite://host/x.db", "sqlite://", "sqlite:///"],
)
def test_malformed_sqlite_url_is_invalid_input(url: str, clean_env: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        chronoq.connect(url)
    assert "sqlite:///relative/path.db" in str(info.value)
    assert not list(clean_env.iterdir())


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("events_keep=0", "events_keep"),
        ("events_keep=many", "events_keep"),
        ("busy_timeout_ms=-5", "busy_timeout_ms"),
        ("busy_timeout_ms=1.5", "busy_timeout_ms"),
        ("synchronous=sometimes", "synchronous"),
    ],
)
def test_bad_sqlite_option_value_is_invalid_input(tmp_path: Path, option: str, name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        chronoq.connect(f"sqlite:///{tmp_path / 'x.db'}?{option}")
    assert name in str(info.value)


@pytest.mark.parametrize("option", ["synchronous=full", "synchronous=OFF", "busy_timeout_ms=0"])
def test_good_sqlite_options_are_accepted(sqlite_url: str, option: str) -> None:
    with chronoq.connect(f"{sqlite_url}?{option}") as q:
        q.put("t", 1)
        assert q.stats("t")["ready"] == 1


@pytest.mark.parametrize(
    "option", ["colour=blue", "max_payload=abc", "events_keep=0", "busy_timeout_ms=x"]
)
def test_rejected_url_creates_no_file(tmp_path: Path, option: str) -> None:
    """InvalidInput promises that nothing was written: a typo in the URL
    must not leave a new, empty store behind."""
    target = tmp_path / "typo.db"
    with pytest.raises(InvalidInput):
        chronoq.connect(f"sqlite:///{target}?{option}")
    assert not target.exists()


# -- broken and unwritable stores ------------------------------------------------------------


def assert_unavailable(exc: BaseException, url: str, *hints: str) -> None:
    assert isinstance(exc, BackendUnavailable)
    assert not isinstance(exc, sqlite3.Error)
    assert exc.__cause__ is None or not isinstance(exc.__cause__, sqlite3.Error)
    text = str(exc)
    assert url.split("?", 1)[0] in text, text
    for hint in hints:
        assert hint in text, text


def test_random_bytes_file_is_unavailable(tmp_path: Path) -> None:
    target = tmp_path / "noise.db"
    target.write_bytes(random.Random(7).randbytes(64 * 1024))
    url = f"sqlite:///{target}"
    with pytest.raises(BackendUnavailable) as info:
        chronoq.connect(url)
    assert_unavailable(info.value, url, "not a chronoq SQLite store or is corrupt")
    assert target.read_bytes() == random.Random(7).randbytes(64 * 1024)  # left alone


def test_text_file_is_unavailable(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("these are my notes, not a database\n" * 200)
    with pytest.raises(BackendUnavailable) as info:
        chronoq.connect(str(target))
    assert_unavailable(info.value, str(target), "corrupt")
    assert target.read_text().startswith("these are my notes")


def test_foreign_sqlite_database_is_unavailable(tmp_path: Path) -> None:
    target = tmp_path / "other-app.db"
    with closing(raw(target)) as conn:
        conn.execute("CREATE TABLE jobs (name TEXT, salary INTEGER)")
        conn.execute("INSERT INTO jobs VALUES ('x', 1)")
        conn.commit()
    url = f"sqlite:///{target}"
    with pytest.raises(BackendUnavailable) as info:
        chronoq.connect(url)
    assert_unavailable(info.value, url)


def test_newer_schema_version_is_unavailable(sqlite_url: str, tmp_path: Path) -> None:
    chronoq.connect(sqlite_url).close()
    with closing(raw(tmp_path / "chronoq.db")) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        conn.commit()
    with pytest.raises(BackendUnavailable) as info:
        chronoq.connect(sqlite_url)
    assert_unavailable(info.value, sqlite_url, "99")


def test_corrupt_pages_surface_as_unavailable(sqlite_url: str, tmp_path: Path) -> None:
    """A store whose header survives but whose pages are garbage: whatever
    call first touches the damage raises BackendUnavailable, not sqlite3.Error."""
    with chronoq.connect(sqlite_url) as q:
        q.put_many("t", [Job(payload={"n": n, "pad": "p" * 200}, id=f"j{n}") for n in range(500)])
    target = tmp_path / "chronoq.db"
    data = bytearray(target.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = random.Random(3).randbytes(len(data) - page)
    target.write_bytes(bytes(data))
    with pytest.raises(BackendUnavailable) as info:
        q = chronoq.connect(sqlite_url)
        try:
            q.get("t", "j1")
            q.stats("t")
            q.put("t", 1)
            q.reserve("t", 5)
            q.events(limit=1000)
        finally:
            q.close()
    assert_unavailable(info.value, sqlite_url)


@pytest.mark.parametrize("where", ["missing-dir", "nested-missing-dir", "path-is-a-directory"])
def test_unwritable_location_is_unavailable(tmp_path: Path, where: str) -> None:
    target = {
        "missing-dir": tmp_path / "nope" / "x.db",
        "nested-missing-dir": tmp_path / "a" / "b" / "c" / "x.db",
        "path-is-a-directory": tmp_path,
    }[where]
    url = f"sqlite:///{target}"
    with pytest.raises(BackendUnavailable) as info:
        chronoq.connect(url)
    assert_unavailable(info.value, url, "directory")
    assert not (tmp_path / "nope").exists()


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() == 0:
        pytest.skip("root writes through chmod 0o555")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def test_read_only_directory_is_unavailable(read_only_dir: Path) -> None:
    url = f"sqlite:///{read_only_dir / 'x.db'}"
    with pytest.raises(BackendUnavailable) as info:
        chronoq.connect(url)
    assert_unavailable(info.value, url)


def test_read_only_file_is_unavailable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through chmod 0o444")
    url = f"sqlite:///{tmp_path / 'chronoq.db'}"
    chronoq.connect(url).close()
    (tmp_path / "chronoq.db").chmod(0o444)
    with pytest.raises(BackendUnavailable) as info:
        q = chronoq.connect(url)
        try:
            q.put("t", 1)
        finally:
            q.close()
    assert_unavailable(info.value, url)


# -- sharing one file ---------------------------------------------------------------------


def test_two_queues_on_one_file_see_each_other(sqlite_url: str, tmp_path: Path) -> None:
    with (
        chronoq.connect(sqlite_url) as one,
        chronoq.connect(f"sqlite:///{tmp_path}/./chronoq.db") as two,
    ):
        one.put("t", {"from": "one"}, id="a")
        info = two.get("t", "a")
        assert info is not None and info.payload == {"from": "one"}
        assert two.stats("t")["ready"] == 1
        assert two.topics() == ["t"]
        [job] = two.reserve("t")
        assert one.reserve("t") == []
        ours = one.get("t", "a")
        assert ours is not None and ours.state == State.RESERVED
        one.ack(job)  # a lease taken through one queue is valid through another
        assert two.get("t", "a") is None
        two.put("t", 2, id="b", delay=600)
        assert one.reschedule("t", "b", delay=0)
        assert [j.id for j in one.reserve("t")] == ["b"]
        kinds = [e.event for e in two.events("t").events]
        assert kinds == ["put", "reserve", "ack", "put", "reschedule", "reserve"]


# -- event log trimming -------------------------------------------------------------------


def event_count(q: chronoq.Queue) -> int:
    return len(q.events(limit=100_000).events)


def test_event_log_trims_to_events_keep(sqlite_url: str) -> None:
    """Trimming keeps a contiguous tail of at least ``events_keep`` events and
    lets the log exceed it by at most one trim interval (10,000 events)."""
    with chronoq.connect(f"{sqlite_url}?events_keep=100") as q:
        written = [f"a{n}" for n in range(25_000)]
        for start in range(0, len(written), 5_000):
            q.put_many("t", [Job(id=job_id) for job_id in written[start : start + 5_000]])
        page = q.events(limit=100_000)
        kept = [e.id for e in page.events]
        assert 100 <= len(kept) <= 100 + 10_000
        assert kept == written[-len(kept) :]  # the newest, in order, no gaps
        assert q.stats("t")["total"] == 25_000  # jobs are not trimmed, only events
        q.put("t", 1, id="after")
        tail = q.events(cursor=page.cursor)
        assert [e.id for e in tail.events] == ["after"]
        assert tail.events[0].seq > page.events[-1].seq


def test_event_log_trims_across_reserve_and_ack(sqlite_url: str) -> None:
    with chronoq.connect(f"{sqlite_url}?events_keep=10") as q:
        q.put_many("t", [Job(id=f"j{n}") for n in range(4_000)])
        while jobs := q.reserve("t", 1000):
            assert q.ack_many(jobs) == []
        # 12,000 events written
        assert 10 <= event_count(q) <= 10 + 10_000
        assert q.events(limit=100_000).events[-1].event == "ack"


def test_event_log_stays_bounded_with_short_lived_producers(sqlite_url: str) -> None:
    """A store written by many short-lived processes (CLI puts, cron jobs)
    must not grow its log without bound: the trim count has to survive a
    reopen. Three sessions of 9,000 events each, keep=100: 27,000 events
    written, so the log must have been trimmed at least once."""
    url = f"{sqlite_url}?events_keep=100"
    for session in range(3):
        with chronoq.connect(url) as q:
            q.put_many("t", [Job(id=f"s{session}-{n}") for n in range(9_000)])
    with chronoq.connect(url) as q:
        assert event_count(q) <= 100 + 10_000
