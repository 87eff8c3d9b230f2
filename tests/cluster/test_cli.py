"""The CLI on a Redis Cluster and on a Sentinel-managed primary: the store
URL is all it takes (``--store`` or ``CHRONOQ_STORE``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest


def chronoq(store: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "chronoq.cli.main", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CHRONOQ_STORE": store},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("topology", ["redis_cluster", "redis_sentinel"])
def test_put_stats_reserve_ack_through_the_cli(
    topology: str, request: pytest.FixtureRequest
) -> None:
    store = f"{request.getfixturevalue(topology).url}?prefix=cq-{uuid.uuid4().hex[:12]}"
    chronoq(store, "put", "cli", '{"n": 1}', "--id", "a")
    assert chronoq(store, "stats", "cli")["ready"] == 1
    reserved = chronoq(store, "reserve", "cli")
    [job] = reserved if isinstance(reserved, list) else reserved["jobs"]
    assert job["id"] == "a"
    chronoq(store, "ack", "cli", "a", job["lease"])
    assert chronoq(store, "stats", "cli")["total"] == 0
