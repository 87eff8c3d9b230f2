"""Scenario f: producers and workers reach redis-server through a proxy that drops every
connection and refuses new ones for a few seconds. Producers get BackendUnavailable naming the
store (and retry the same ids), workers wait with backoff and resume; nothing is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from .conftest import RunFactory, ServerFactory, assert_clean, assert_few_duplicates
from .history import read_history
from .proxy import Proxy


@pytest.fixture
def proxy(redis_servers: ServerFactory) -> Iterator[Proxy]:
    with Proxy(redis_servers().port) as p:
        yield p


def test_clients_cut_from_the_store_for_seconds(proxy: Proxy, fault_run: RunFactory) -> None:
    run = fault_run(f"{proxy.url}?prefix=faults")
    run.start()
    run.wait_started()
    time.sleep(1.0)
    proxy.cut(3.0)
    time.sleep(1.0)
    proxy.cut(1.0)
    report = run.finish()
    assert_clean(run, report)
    assert_few_duplicates(run, report, faults=2)
    errors = {r["error"] for r in read_history(run.history_dir).of("info")}
    assert errors, "the cut reached no producer"
    store = f"127.0.0.1:{proxy.port}"
    unclear = [e for e in errors if not e.startswith("BackendUnavailable") or store not in e]
    assert unclear == [], f"errors that do not say BackendUnavailable and name {store}"
