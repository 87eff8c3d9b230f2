"""Scenario a: single-node Redis, ``kill -9`` of a worker (a new one replaces it) and of a
producer mid-run. The dead worker's leases run out and its jobs go to the others; the dead
producer's last put is indeterminate at most."""

from __future__ import annotations

import time

from .conftest import RunFactory, ServerFactory, assert_clean


def test_kill_9_of_a_worker_and_a_producer(
    redis_servers: ServerFactory, fault_run: RunFactory
) -> None:
    server = redis_servers()
    run = fault_run(f"{server.url}?prefix=faults")
    run.start()
    run.wait_started()
    time.sleep(1.0)
    run.workers[0].kill()
    run.start_worker()
    time.sleep(1.0)
    run.producers[1].kill()
    time.sleep(0.5)
    run.workers[1].kill()
    run.start_worker()
    report = run.finish()
    assert_clean(run, report)
    assert report.acknowledged > 1500
