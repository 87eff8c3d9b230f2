"""Review findings on recurring jobs: a store clock that differs from the
local one (Redis ``TIME`` on another machine)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import chronoq
from chronoq import Worker
from chronoq.backends.sqlite import schedules as sqlite_schedules

SKEW_MS = 3_600_000  # the store's clock is an hour behind this machine's


def test_run_recurring_says_how_long_to_wait_by_the_stores_clock(
    sqlite_url: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite_schedules.now_ms
    monkeypatch.setattr(sqlite_schedules, "now_ms", lambda: real() - SKEW_MS)
    with chronoq.connect(sqlite_url) as q:
        q.recurring(topic, name="tick", every=60)
        run = q.run_recurring(topic)
        assert run.next_at is not None and run.next_in is not None
        assert 0 < run.next_in <= 60  # not next_at minus the local clock: an hour ago


@pytest.mark.timeout(60)
def test_a_worker_ahead_of_the_stores_clock_does_not_spin(
    sqlite_url: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite_schedules.now_ms
    monkeypatch.setattr(sqlite_schedules, "now_ms", lambda: real() - SKEW_MS)
    with chronoq.connect(sqlite_url) as q:
        q.recurring(topic, name="tick", every=60)
        calls = 0
        listing = q.backend.schedules_list

        def counted(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return listing(*args)

        monkeypatch.setattr(q.backend, "schedules_list", counted)
        worker = Worker(q, {topic: lambda job: None})
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        time.sleep(1.5)  # the worker refreshes every second when nothing is due sooner
        worker.stop(now=True)
        thread.join(20)
        assert not thread.is_alive()
        # the next occurrence is a minute away by the store's clock: a worker
        # that compared it with its own clock (an hour ahead) called again at once
        assert calls <= 5, f"run_recurring called {calls} times in 1.5 s"
