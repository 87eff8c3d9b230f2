"""``chronoq.testing``: the reads for assertions (``delayed``, ``ready``,
``reserved``, ``dead``) on every backend, ``run_due`` on a sharded Redis, and
the pytest example of docs/testing.md, run by pytest as a user would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chronoq
from chronoq.job import Reservation
from chronoq.states import State
from chronoq.testing import dead, delayed, ready, reserved, run_due

from .conftest import BACKENDS
from .redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
H = 3600.0


def test_each_read_lists_the_jobs_in_its_state_in_order(queue: chronoq.Queue, topic: str) -> None:
    at = time.time() + H
    late = queue.put(topic, "late", delay=2 * H)
    soon_low = queue.put(topic, "soon, low", run_at=at)
    soon_high = queue.put(topic, "soon, high", run_at=at, priority=3)
    ready_low = queue.put(topic, "ready, low")
    ready_high = queue.put(topic, "ready, high", priority=7)
    ready_low_2 = queue.put(topic, "ready, low, 2nd")
    queue.put(topic, "to lease", priority=9)
    queue.put(topic, "to bury", priority=8)
    [leased] = queue.reserve(topic)
    [to_bury] = queue.reserve(topic)
    queue.bury(to_bury, error="gone")

    assert [j.id for j in delayed(queue, topic)] == [soon_high.id, soon_low.id, late.id]
    assert [j.id for j in ready(queue, topic)] == [ready_high.id, ready_low.id, ready_low_2.id]
    assert [(j.id, j.state) for j in reserved(queue, topic)] == [(leased.id, State.RESERVED)]
    assert [(j.id, j.last_error) for j in dead(queue, topic)] == [(to_bury.id, "gone")]


def test_reads_of_a_topic_without_jobs_are_empty(queue: chronoq.Queue, topic: str) -> None:
    assert delayed(queue, topic) == ready(queue, topic) == reserved(queue, topic) == []
    assert dead(queue, topic) == []


@pytest.mark.skipif("redis" not in BACKENDS, reason="needs redis-server")
def test_run_due_on_a_sharded_redis_runs_each_job_once_in_due_order(
    redis_server: RedisServer, topic: str
) -> None:
    with chronoq.connect(f"{redis_server.url}?shards=4&prefix={topic}") as q:
        assert q.shards == 4
        put = [q.put(topic, n, delay=(n + 1) * 60) for n in range(40)]
        assert len({q.shard_of(p.id) for p in put}) > 1  # spread over shards
        ran: list[int] = []

        def handler(job: Reservation) -> None:
            ran.append(job.payload)
            if job.payload % 10 == 0:
                q.put(topic, job.payload + 0.5, delay=30)  # between it and the next

        report = run_due(q, {topic: handler}, until=20.5 * 60)
        assert ran == sorted([*range(20), 0.5, 10.5])  # due by 20.5 min, in due order
        assert [p.payload for p in delayed(q, topic)] == list(range(20, 40))
        assert report.outcomes == ["ack"] * len(ran)


def _pytest_example() -> str:
    text = (ROOT / "docs" / "testing.md").read_text()
    examples = re.findall(r"```python\n(.*?)```", text, re.S)
    blocks = [code for code in examples if "def test_" in code]
    assert len(blocks) == 1, "docs/testing.md should hold one pytest example"
    return blocks[0]


@pytest.mark.timeout(120)
def test_the_pytest_example_of_the_docs_passes_under_pytest(tmp_path: Path) -> None:
    example = _pytest_example()
    (tmp_path / "test_example.py").write_text(example)
    tests = re.findall(r"^def (test_\w+)", example, re.M)
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("CHRONOQ_STORE", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-W", "error", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(tests)} passed" in result.stdout, result.stdout
    assert len(tests) >= 2
