"""The handlers of a fault run's ``chronoq worker`` processes:
``chronoq worker tests.faults.handler:handlers`` with ``CHRONOQ_FAULTS_TOPIC`` and
``CHRONOQ_FAULTS_HISTORY`` (a directory) in the environment. Each run of a job records ``start``
(with the reservation's attempt, lease token, lease deadline, due time and group) before any
work and ``end`` after a 1–20 ms sleep, in a history file of its own process."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import chronoq

from .history import Recorder

TOPIC = os.environ.get("CHRONOQ_FAULTS_TOPIC", "faults")
_recorder = Recorder(
    Path(os.environ.get("CHRONOQ_FAULTS_HISTORY", ".")) / f"worker-{os.getpid()}.jsonl"
)


def work(job: chronoq.Reservation) -> None:
    fields = {"attempt": job.attempts, "lease": job.lease}
    _recorder.record(
        "start", job.id, deadline=job.deadline, due_at=job.due_at, group=job.group, **fields
    )
    time.sleep(random.uniform(0.001, 0.02))
    _recorder.record("end", job.id, **fields)


handlers = {TOPIC: work}
