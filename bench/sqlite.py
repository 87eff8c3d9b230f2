"""Benchmark of the SQLite backend: throughput of put, put_many and
reserve+ack, and the hand-over lag of a waiting consumer, each next to a
baseline measured in the same run (raw ``sqlite3`` inserts, the timer floor).

    .venv/bin/python bench/sqlite.py [--quick] [--out FILE] [--store URL]

Results go to stdout as a table and, with ``--out``, to a JSON file. See
docs/benchmarks.md for how to read them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common import (
    BATCH,
    PAYLOAD,
    REPEATS,
    RESERVE_COUNT,
    RUN,
    Lag,
    Rate,
    batches,
    bench_drain,
    bench_put_many,
    bench_put_one,
    bench_timer_floor,
    command,
    console,
    consume,
    lag_table,
    machine,
    produce_on,
    rate_table,
    render_header,
    repeat_rate,
)
from rich.console import Console

import chronoq

# A table shaped like chronoq's jobs table (schema v1: same columns, same three
# indexes), kept fixed here so the baseline measures the machine, not the code.
BASELINE_DDL = """
CREATE TABLE jobs (
    topic TEXT NOT NULL, id TEXT NOT NULL, state INTEGER NOT NULL, at INTEGER NOT NULL,
    due_at INTEGER NOT NULL, priority INTEGER NOT NULL, payload BLOB NOT NULL,
    ttr_ms INTEGER NOT NULL, max_attempts INTEGER NOT NULL, attempts INTEGER NOT NULL,
    created_at INTEGER NOT NULL, unique_for_ms INTEGER NOT NULL, lease TEXT, last_error TEXT
);
CREATE UNIQUE INDEX jobs_key ON jobs (topic, id);
CREATE INDEX jobs_timed ON jobs (topic, state, at);
CREATE INDEX jobs_ready ON jobs (topic, priority DESC, due_at) WHERE state = 1;
"""
BASELINE_INSERT = (
    "INSERT INTO jobs (topic, id, state, at, due_at, priority, payload, ttr_ms, max_attempts, "
    "attempts, created_at, unique_for_ms) VALUES (?, ?, 1, ?, ?, 0, ?, 30000, 5, 0, ?, 0)"
)


@dataclass(frozen=True)
class Sizes:
    put_one: int
    put_many: int
    drain: int
    lag_jobs: int
    lag_rate: float  # jobs per second put by the lag producer
    lag_max_delay: float  # seconds; delays are uniform in [0.05, this]
    timer_samples: int

    @classmethod
    def for_run(cls, quick: bool) -> Sizes:
        if quick:
            return cls(2_000, 20_000, 10_000, 100, 100.0, 0.5, 50)
        return cls(20_000, 200_000, 100_000, 500, 100.0, 2.0, 300)


# -- raw sqlite3 baselines ----------------------------------------------------------------


def raw_connection(path: Path) -> sqlite3.Connection:
    """The same kind of file chronoq opens by default: WAL, synchronous=NORMAL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(BASELINE_DDL)
    return conn


def raw_rows(topic: str, n: int) -> list[tuple[Any, ...]]:
    now = time.time_ns() // 1_000_000
    return [
        (topic, f"{i:026d}", now, now, json.dumps({**PAYLOAD, "n": i}).encode(), now)
        for i in range(n)
    ]


def bench_raw_insert_one(conn: sqlite3.Connection, n: int) -> list[float]:
    def once(rep: int) -> float:
        rows = raw_rows(f"raw.one.{rep}", n)
        start = time.perf_counter()
        for row in rows:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(BASELINE_INSERT, row)
            conn.execute("COMMIT")
        return time.perf_counter() - start

    return repeat_rate(n, once)


def bench_raw_insert_many(conn: sqlite3.Connection, n: int) -> list[float]:
    def once(rep: int) -> float:
        chunks = list(batches(raw_rows(f"raw.many.{rep}", n), BATCH))
        start = time.perf_counter()
        for chunk in chunks:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(BASELINE_INSERT, chunk)
            conn.execute("COMMIT")
        return time.perf_counter() - start

    return repeat_rate(n, once)


def bench_raw_drain(conn: sqlite3.Connection, n: int) -> list[float]:
    """The least SQL a pop-and-delete needs: select the best 100, delete them."""

    def once(rep: int) -> float:
        topic = f"raw.drain.{rep}"
        for chunk in batches(raw_rows(topic, n), BATCH):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(BASELINE_INSERT, chunk)
            conn.execute("COMMIT")
        done = 0
        start = time.perf_counter()
        while True:
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(
                "SELECT rowid, id, payload FROM jobs WHERE topic = ? AND state = 1 "
                "ORDER BY priority DESC, due_at, rowid LIMIT ?",
                (topic, RESERVE_COUNT),
            ).fetchall()
            conn.executemany("DELETE FROM jobs WHERE rowid = ?", [(r[0],) for r in rows])
            conn.execute("COMMIT")
            if not rows:
                break
            done += len(rows)
        elapsed = time.perf_counter() - start
        if done != n:
            raise RuntimeError(f"raw drain removed {done} rows of {n}")
        return elapsed

    return repeat_rate(n, once)


# -- hand-over lag ----------------------------------------------------------------------


def produce(url: str, topic: str, sizes: Sizes, seed: int) -> None:
    """The producer on its own connection; top level so that a spawned process can run it."""
    q = chronoq.connect(url)
    try:
        produce_sized(q, topic, sizes, seed)
    finally:
        q.close()


def produce_sized(q: chronoq.Queue, topic: str, sizes: Sizes, seed: int) -> None:
    produce_on(q, topic, sizes.lag_jobs, sizes.lag_rate, sizes.lag_max_delay, seed)


def bench_lag_thread(url: str, sizes: Sizes, shared: bool) -> list[float]:
    """Consumer thread in this process; the producer is this thread, on the same
    Queue (``shared``) or on a second connection to the same file."""
    topic = f"bench.{RUN}.lag.{'shared' if shared else 'two'}"
    consumer_q = chronoq.connect(url)
    lags: list[float] = []
    give_up = time.monotonic() + sizes.lag_jobs / sizes.lag_rate + sizes.lag_max_delay + 10
    failed = threading.Event()

    def run() -> None:
        lags.extend(consume(consumer_q, topic, sizes.lag_jobs, give_up, failed.is_set))

    thread = threading.Thread(target=run, name="bench-consumer")
    thread.start()
    time.sleep(0.2)  # let the consumer block in reserve(wait=...)
    try:
        try:
            if shared:
                produce_sized(consumer_q, topic, sizes, seed=1)
            else:
                produce(url, topic, sizes, seed=1)
        except BaseException:
            failed.set()
            raise
        finally:
            thread.join()
    finally:
        consumer_q.close()
    return lags


def bench_lag_process(url: str, sizes: Sizes) -> list[float]:
    """Consumer in this process, producer in a spawned one: wake-ups come from
    ``PRAGMA data_version`` and the consumer's own due-time timer."""
    topic = f"bench.{RUN}.lag.process"
    q = chronoq.connect(url)
    producer = multiprocessing.get_context("spawn").Process(
        target=produce, args=(url, topic, sizes, 2), name="bench-producer"
    )
    try:
        give_up = time.monotonic() + sizes.lag_jobs / sizes.lag_rate + sizes.lag_max_delay + 15
        producer.start()
        lags = consume(
            q, topic, sizes.lag_jobs, give_up, lambda: producer.exitcode not in (None, 0)
        )
        producer.join(10)
        if producer.exitcode != 0:
            raise RuntimeError(f"the producer process failed (exit code {producer.exitcode})")
    finally:
        if producer.is_alive():
            producer.terminate()
        q.close()
    return lags


# -- the run ------------------------------------------------------------------------------


def run_throughput(q: chronoq.Queue, raw: sqlite3.Connection, sizes: Sizes) -> list[Rate]:
    say = Console(stderr=True).log
    one, many, drain = sizes.put_one, sizes.put_many, sizes.drain
    say(f"raw sqlite3 baselines: {one:,} single inserts, {many:,} batched, drain {drain:,}")
    raw_one = Rate("raw_insert_one", "raw INSERT, 1 row/txn", one, bench_raw_insert_one(raw, one))
    raw_many = Rate(
        "raw_insert_many",
        f"raw executemany, {BATCH:,} rows/txn",
        many,
        bench_raw_insert_many(raw, many),
    )
    raw_drain = Rate(
        "raw_drain",
        f"raw SELECT {RESERVE_COUNT} + DELETE, 1 txn",
        drain,
        bench_raw_drain(raw, drain),
    )
    say(f"chronoq: put x{one:,}, put_many {many:,}, reserve+ack {drain:,}; {REPEATS} runs each")
    return [
        Rate("put_one", "put, one at a time", one, bench_put_one(q, one), None, raw_one),
        Rate(
            "put_many",
            f"put_many, batches of {BATCH:,}",
            many,
            bench_put_many(q, many),
            100_000,
            raw_many,
        ),
        Rate(
            "reserve_ack",
            f"reserve(count={RESERVE_COUNT}) + ack_many",
            drain,
            bench_drain(q, drain)[0],
            20_000,
            raw_drain,
        ),
        raw_one,
        raw_many,
        raw_drain,
    ]


def run_lag(url: str, sizes: Sizes, one_file: bool) -> list[Lag]:
    """``one_file``: every connection to ``url`` opens the same database (not :memory:)."""
    say = Console(stderr=True).log
    n = sizes.lag_jobs
    say(f"lag runs of {n} jobs each, then the timer floor ({sizes.timer_samples} waits)")
    figures = [
        Lag("lag_thread", "consumer thread, same Queue", bench_lag_thread(url, sizes, True), n, 5)
    ]
    if one_file:
        figures.append(
            Lag(
                "lag_thread_two_conns",
                "consumer thread, 2nd connection",
                bench_lag_thread(url, sizes, False),
                n,
                5,
            )
        )
        figures.append(
            Lag("lag_process", "producer in another process", bench_lag_process(url, sizes), n)
        )
    floor = bench_timer_floor(sizes.timer_samples)
    figures.append(Lag("timer_floor", "floor: Event().wait(t) oversleep", floor, None))
    return figures


# -- output ---------------------------------------------------------------------------------


def render(report: dict[str, Any], rates: list[Rate], lags: list[Lag]) -> None:
    out = console()
    render_header(out, report, f"SQLite {report['machine']['sqlite']}")
    out.print(rate_table(rates))
    out.print(lag_table(lags))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N: a ~10 s smoke run")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--store", help="store URL (default: a fresh SQLite file in a temporary directory)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = Sizes.for_run(args.quick)
    report: dict[str, Any] = {
        "command": command(),
        "machine": machine(sqlite=sqlite3.sqlite_version),
        "sizes": asdict(sizes),
    }
    with tempfile.TemporaryDirectory(prefix="chronoq-bench-") as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'chronoq.db'}"
        report["store"] = url
        started = time.perf_counter()
        q = chronoq.connect(url)
        raw = raw_connection(Path(tmp) / "raw.db")
        try:
            rates = run_throughput(q, raw, sizes)
        finally:
            q.close()
            raw.close()
        lags = run_lag(url, sizes, one_file=":memory:" not in url)
        report["seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["figures"] = {f.key: f.as_json() for f in [*rates, *lags]}
    render(report, rates, lags)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
