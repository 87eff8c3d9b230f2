"""Scenario c: single-node Redis with AOF, ``kill -9`` of redis-server mid-run and a restart on
the same port and directory. Producers record ``info`` for the puts the outage cut and retry
them (same id); workers wait for the store and resume. With ``appendfsync always`` nothing
acknowledged may be lost; with ``everysec`` up to a second of writes may be, by Redis's own
contract: that run measures and prints the figure instead of asserting it."""

from __future__ import annotations

import time

from .checker import Report
from .conftest import RunFactory, ServerFactory, assert_clean
from .run import Run

DOWN_S = 1.0


def _run_with_a_redis_crash(
    redis_servers: ServerFactory, fault_run: RunFactory, fsync: str
) -> tuple[Run, Report]:
    server = redis_servers("--appendonly", "yes", "--appendfsync", fsync)
    run = fault_run(f"{server.url}?prefix=faults")
    run.start()
    run.wait_started()
    for _ in range(2):
        time.sleep(1.5)
        server.stop(kill=True)
        time.sleep(DOWN_S)
        server.start()
    return run, run.finish()


def test_kill_9_of_redis_with_appendfsync_always_loses_nothing(
    redis_servers: ServerFactory, fault_run: RunFactory
) -> None:
    run, report = _run_with_a_redis_crash(redis_servers, fault_run, "always")
    assert_clean(run, report)
    assert report.info_records > 0, "the outage reached no producer"


def test_kill_9_of_redis_with_appendfsync_everysec_measured(
    redis_servers: ServerFactory, fault_run: RunFactory
) -> None:
    run, report = _run_with_a_redis_crash(redis_servers, fault_run, "everysec")
    print(
        f"appendfsync everysec, 2 kill -9 of redis-server: {len(report.lost)} acknowledged "
        f"put(s) lost of {report.acknowledged}; early={len(report.early)} "
        f"two_live_leases={len(report.two_live_leases)} unexpected={len(report.unexpected)}"
    )
    assert report.starts > 0
    assert run.tracebacks() == []
