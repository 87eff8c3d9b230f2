"""Scenario b: single-node Redis, a worker frozen (SIGSTOP) for longer than its jobs' 1 s lease,
then thawed (SIGCONT). Its leases ran out while it was frozen and other workers took the jobs:
its late acks must be fenced (LeaseLost), and it must not start a held job whose lease ran out."""

from __future__ import annotations

import signal
import time

from .conftest import RunFactory, ServerFactory, assert_clean
from .run import Setup

FENCED = "finished after their lease was lost"  # an ack answered LeaseLost
REFUSED = "not started: its lease"  # a held job whose lease ran out while frozen


def test_sigstop_of_a_worker_longer_than_the_lease(
    redis_servers: ServerFactory, fault_run: RunFactory
) -> None:
    server = redis_servers()
    run = fault_run(f"{server.url}?prefix=faults", Setup(ttr=1.0, workers=3))
    run.start()
    run.wait_started()
    time.sleep(1.0)
    for frozen in run.workers[:2]:
        frozen.signal(signal.SIGSTOP)
        time.sleep(2.5)
        frozen.signal(signal.SIGCONT)
        time.sleep(0.5)
    report = run.finish()
    assert_clean(run, report)
    assert report.duplicated, "the frozen workers' jobs ran again elsewhere"
    fenced = [w.log().count(FENCED) + w.log().count(REFUSED) for w in run.workers[:2]]
    print(f"lease-lost acks and refused starts in the thawed workers' logs: {fenced}")
    assert sum(fenced) > 0, "no late ack was fenced and no held job refused"
