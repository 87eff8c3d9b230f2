"""The SQLite connection: opening, pragmas, schema, and transactions that turn
sqlite3 failures into chronoq errors."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.resources import files
from typing import TypeVar

from chronoq.errors import BackendUnavailable, InvalidInput

__all__ = ["ADDED_COLUMNS", "SCHEMA_VERSION", "SYNCHRONOUS", "Store", "add_flow_triggers"]

SCHEMA_VERSION = "1"
#: columns that stores made before them lack: (table, name, type)
ADDED_COLUMNS = (
    ("jobs", "traceparent", "TEXT"),
    ("jobs", "job_group", "TEXT"),
    ("events", "job_group", "TEXT"),
)
#: tables added to schema.sql after version 1 (a store without one gets them)
ADDED_TABLES = ("schedules", "flow_topics", "flow_groups")
SYNCHRONOUS = frozenset({"off", "normal", "full", "extra"})

# While another process holds the write lock, try again after a short random
# pause. SQLite's own busy handler backs off to 100 ms sleeps, so a process
# that commits and begins again at once keeps the lock for seconds while the
# others sleep; short jittered retries catch the gaps between its transactions.
RETRY_PAUSE_S = (0.0001, 0.001)
SQLITE_BUSY, SQLITE_LOCKED = 5, 6
T = TypeVar("T")


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)


def add_flow_triggers(conn: sqlite3.Connection) -> None:
    """The TEMP triggers of flow_triggers.sql, on ``conn`` (in its transaction:
    executescript would commit it first)."""
    script = files("chronoq.backends.sqlite").joinpath("flow_triggers.sql").read_text()
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""


class Store:
    """One connection shared by the threads of a backend instance, behind a lock.

    Writes use ``BEGIN IMMEDIATE`` so that two processes never interleave a
    read-then-write on the same job; a writer waits up to ``busy_timeout_ms``
    for another process's transaction instead of failing, retrying with short
    random pauses so that no process starves (see ``RETRY_PAUSE_S``).
    """

    def __init__(self, path: str, url: str, synchronous: str, busy_timeout_ms: int) -> None:
        if synchronous not in SYNCHRONOUS:  # checked before the file is created
            raise InvalidInput(
                f"{url}: synchronous={synchronous!r} is not one of {sorted(SYNCHRONOUS)}"
            )
        self.url = url
        self.busy_timeout_s = busy_timeout_ms / 1000
        self.lock = threading.RLock()
        # whether this connection has flow control's counting triggers
        self.flow_counted = False
        try:
            self.conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None
        try:
            # several processes may create the file and its schema at once: setup
            # is idempotent, so it is simply run again if one of them got busy
            self._retry_busy(lambda: self._setup(synchronous, busy_timeout_ms))
            # from here on chronoq waits for locks itself (_retry_busy)
            self.conn.execute("PRAGMA busy_timeout = 0")
        except BaseException:
            self.conn.close()
            raise

    def _setup(self, synchronous: str, busy_timeout_ms: int) -> None:
        conn = self.conn
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode not in ("wal", "memory"):
            raise sqlite3.OperationalError(f"cannot switch the journal to WAL (got {mode!r})")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        version = self._schema_version()
        if version is not None and version != SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {version} is not the {SCHEMA_VERSION} this chronoq knows"
            )
        # a store made before a table was added to schema.sql gets it now
        # (its columns first: the schema's indexes and triggers name them)
        if version is None or not all(self._has_table(name) for name in ADDED_TABLES):
            if self._has_table("jobs"):
                self._add_columns()
            schema = files("chronoq.backends.sqlite").joinpath("schema.sql").read_text()
            try:
                conn.executescript(
                    f"BEGIN IMMEDIATE;\n{schema}\nINSERT OR IGNORE INTO meta (key, value) "
                    f"VALUES ('schema_version', '{SCHEMA_VERSION}');\nCOMMIT;"
                )
            except sqlite3.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        self._add_columns()

    def _add_columns(self) -> None:
        """Columns added to schema.sql after stores were made with it: a store
        without them gets them now (nullable, so its rows need no change and
        the code that made it goes on reading and writing it)."""
        missing = self._missing_columns()
        if not missing:
            return
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table, name, kind in self._missing_columns():  # again: another process may have
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        """The added columns of the store's tables that it lacks (a table it
        lacks comes whole from schema.sql)."""
        present: dict[str, set[str]] = {}
        for table in dict.fromkeys(table for table, _, _ in ADDED_COLUMNS):
            names = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            if names:
                present[table] = names
        return [
            (table, name, kind)
            for table, name, kind in ADDED_COLUMNS
            if table in present and name not in present[table]
        ]

    def _has_table(self, name: str) -> bool:
        return bool(
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
            ).fetchone()
        )

    def _schema_version(self) -> str | None:
        if not self._has_table("meta"):
            return None
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return None if row is None else str(row[0])

    def _unavailable(self, exc: sqlite3.Error) -> BackendUnavailable:
        text = str(exc)
        if "not a database" in text or "malformed" in text:
            hint = (
                "the file is not a chronoq SQLite store or is corrupt; "
                "move it away or use another path"
            )
        elif "unable to open" in text:
            hint = "check that the directory exists and is writable"
        elif "readonly" in text or "read-only" in text:
            hint = "the file or its directory is read-only; chronoq needs to write there"
        elif "locked" in text or "busy" in text:
            hint = "another process held the store longer than busy_timeout_ms; retry or raise it"
        else:
            hint = "the SQLite store failed"
        return BackendUnavailable(f"{self.url}: {text}: {hint}")

    def _retry_busy(self, begin: Callable[[], T]) -> T:
        """Run ``begin`` until it gets past another process's lock, or give up
        after ``busy_timeout_s``; its result."""
        deadline = None
        while True:
            try:
                return begin()
            except sqlite3.Error as exc:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if not _is_busy(exc):
                    raise self._unavailable(exc) from None
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.busy_timeout_s
                if now >= deadline:
                    raise self._unavailable(exc) from None
                time.sleep(min(random.uniform(*RETRY_PAUSE_S), deadline - now))

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; rolls back on any error."""
        with self.lock:
            self._retry_busy(lambda: self.conn.execute("BEGIN IMMEDIATE"))
            try:
                if not self.flow_counted:
                    self._count_flow()
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException as exc:
                self.flow_counted = False  # triggers made in the transaction are gone: look again
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._unavailable(exc) from None
                raise

    def _count_flow(self) -> None:
        """Once the store has a flow topic, this connection's triggers that
        count its jobs by group (flow_triggers.sql): made inside the write
        lock, so no write of a flow topic goes uncounted."""
        if self.conn.execute("SELECT 1 FROM flow_topics LIMIT 1").fetchone() is not None:
            add_flow_triggers(self.conn)
            self.flow_counted = True

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent read (one implicit transaction per statement is not enough
        for multi-statement reads such as stats)."""
        with self.lock:
            self._retry_busy(self._begin_read)
            try:
                yield self.conn
            except sqlite3.Error as exc:
                raise self._unavailable(exc) from None
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")

    def _begin_read(self) -> None:
        # A deferred BEGIN takes no lock; the first statement that reads a
        # table takes the WAL snapshot, and only it can meet a busy database
        # (while another connection recovers the WAL after a crash).
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT 1 FROM meta LIMIT 0").fetchall()

    def data_version(self) -> int:
        with self.lock:
            return self._retry_busy(
                lambda: int(self.conn.execute("PRAGMA data_version").fetchone()[0])
            )

    def close(self) -> None:
        with self.lock:
            self.conn.close()
