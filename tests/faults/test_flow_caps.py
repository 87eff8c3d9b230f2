"""Flow control under faults (docs/contract.md §10): the topic's and each group's limit on
live leases hold across every worker process while workers are killed (``kill -9``) and
replaced, and a killed worker's slots come back when its leases run out; checked by the
total-queue checker (nothing lost, early or run under two leases) and from the history (the
most runs live at once, in all and per group)."""

from __future__ import annotations

import time

import pytest

from .checker import most_live
from .conftest import RunFactory, ServerFactory, assert_clean
from .history import read_history
from .run import Setup

CAPS = Setup(
    producers=2,
    jobs=400,
    rate=150.0,
    workers=3,
    concurrency=4,
    prefetch=2,
    ttr=1.0,
    groups=6,
    limits=(("concurrency", 5), ("group_concurrency", 1)),
)


@pytest.mark.parametrize("store", ["redis", "sqlite"])
def test_caps_hold_while_workers_are_killed(
    store: str, redis_servers: ServerFactory, fault_run: RunFactory, tmp_path: object
) -> None:
    if store == "redis":
        url = f"{redis_servers().url}?prefix=faults"
    else:
        url = f"sqlite:///{tmp_path}/faults.db"
    run = fault_run(url, CAPS)
    run.start()
    run.wait_started()
    time.sleep(1.0)
    run.workers[0].kill()
    run.start_worker()
    time.sleep(1.0)
    run.workers[1].kill()
    run.start_worker()
    report = run.finish(drain_timeout=60)
    assert_clean(run, report)
    assert report.acknowledged == 800
    total, per_group = most_live(read_history(run.history_dir))
    assert 1 < total <= 5, (total, per_group)
    assert len(per_group) == 6 and max(per_group.values()) == 1, per_group
