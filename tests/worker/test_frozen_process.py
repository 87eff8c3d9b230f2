"""The fault of the SIGSTOP test, on a real ``chronoq worker`` process: frozen
while it holds a job waiting for its busy slot, it must not start that job
after SIGCONT once the lease ran out and another consumer took the job."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from chronoq import State

from .procs import wait_until
from .test_processes import Setup, _setup


def test_a_frozen_worker_does_not_start_a_held_job_another_consumer_took(
    tmp_path: Path, store_url: str
) -> None:
    for setup in _setup(tmp_path, store_url):  # the fixture of test_processes, inline
        _frozen(setup)


def _frozen(setup: Setup) -> None:
    q, topic = setup.q, setup.topic
    w = setup.worker("--concurrency", "1", "--prefetch", "1")
    q.put(topic, {"sleep": 1.0}, id="busy", ttr=30)  # the slot, through the freeze
    q.put(topic, {}, id="held", ttr=0.5)
    wait_until(lambda: setup.records.of("start", "busy"), what="the busy job started")
    wait_until(lambda: setup.state("held") is State.RESERVED, what="the second job held")
    w.send(signal.SIGSTOP)
    try:
        # the other consumer: the store hands the job over once its lease ran out
        taken = q.reserve(topic, wait=10, ttr=30)
    finally:
        w.send(signal.SIGCONT)
    assert [(job.id, job.attempts) for job in taken] == [("held", 2)]
    wait_until(lambda: setup.records.of("end", "busy"), what="the busy job ended")

    def settled() -> Any:
        return setup.records.of("start", "held") or "not started" in w.log()

    wait_until(settled, what="the held job started or refused")
    assert setup.records.of("start", "held") == []  # never two handlers at once
    (line,) = [x for x in w.json_lines() if x.get("outcome") == "not started"]
    assert (line["level"], line["id"], line["attempt"]) == ("warning", "held", 1)
    assert line["late_ms"] > 0 and "ms ago" in line["message"]
    q.ack(taken[0])  # the other consumer's lease was never in doubt
    assert q.get(topic, "held") is None
    w.send(signal.SIGTERM)
    assert w.wait() == 0
