"""``chronoq export`` killed with SIGKILL at random moments, then run again:
every event of the store's log is in the files exactly once."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chronoq

from .helpers import exported, log_events, make_events


def _export(url: str, directory: Path, *extra: str) -> subprocess.Popen[bytes]:
    with open(directory.parent / "export.stderr", "ab") as stderr:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chronoq.cli.main",
                "export",
                "--store",
                url,
                "--to",
                str(directory),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


@pytest.mark.timeout(240)
def test_kill_9_at_random_moments_loses_and_repeats_nothing(
    store_url: str, topic: str, tmp_path: Path
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    out = tmp_path / "out"
    q = chronoq.connect(store_url)
    killed = 0
    state = out / "_chronoq" / "export.json"
    for round_ in range(6):
        make_events(q, f"{topic}-{round_ % 2}", 4000, start=round_ * 4000)
        before = state.stat().st_mtime_ns if state.exists() else 0
        proc = _export(store_url, out, "--flush-events", "300")
        # after its first commit, while it has many more flushes to go
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            if state.exists() and state.stat().st_mtime_ns != before:
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        if proc.poll() is None:
            proc.kill()
            killed += 1
        assert proc.wait(30) in (0, -9), (tmp_path / "export.stderr").read_text()
    final = _export(store_url, out)
    assert final.wait(120) == 0, (tmp_path / "export.stderr").read_text()
    rows = exported(out)
    keys = [(row["topic"], row["shard"], row["seq"]) for row in rows]
    logged = log_events(q)
    q.close()
    assert killed >= 3, f"seed {seed}: the exports finished before they could be killed"
    assert len(keys) == len(set(keys)), f"seed {seed}: an event was exported twice"
    assert set(keys) == set(logged), f"seed {seed}: events missing or unexpected"
    assert len(keys) == 6 * 4000 * 3
    assert not list(out.rglob(".part-*")), "temporary files are left"
