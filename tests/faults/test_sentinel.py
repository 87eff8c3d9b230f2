"""Scenario e: a Sentinel-managed primary and its replica (every write waits for the replica):
``SENTINEL FAILOVER`` mid-run. The clients find the new primary through the Sentinel; nothing
acknowledged is lost, nothing is early, no job has two live leases."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..topologies import SentinelSetup
from .conftest import RunFactory, assert_clean


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[SentinelSetup]:
    with SentinelSetup(tmp_path / "sentinel") as s:
        yield s


@pytest.mark.timeout(120)
def test_sentinel_failover_mid_run(sentinel: SentinelSetup, fault_run: RunFactory) -> None:
    run = fault_run(f"{sentinel.url}?prefix=faults&replicas=1")
    run.start()
    run.wait_started()
    time.sleep(1.0)
    started = time.monotonic()
    old = sentinel.primary()
    new = sentinel.failover()
    print(f"failover {old} -> {new} in {time.monotonic() - started:.1f} s")
    report = run.finish(drain_timeout=40)
    assert_clean(run, report)
