"""``chronoq export`` as a process: killed with SIGKILL at random moments,
then run again, every event of the store's log is in the files exactly once;
``--follow`` until SIGTERM; the progress bar on a terminal."""

from __future__ import annotations

import os
import pty
import random
import signal
import subprocess
import sys
import time
from contextlib import suppress
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


@pytest.mark.timeout(60)
def test_follow_keeps_up_and_stops_on_sigterm_after_committing_what_it_read(
    sqlite_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    q = chronoq.connect(sqlite_url)
    follow = _export(sqlite_url, out, "--follow", "--flush-interval", "0.2")
    try:
        for n in range(10):
            make_events(q, "t", 20, start=n * 20)
            time.sleep(0.1)
        deadline = time.monotonic() + 20
        while len(exported(out)) < 600:  # flushed while it runs, not only at the end
            assert time.monotonic() < deadline, (tmp_path / "export.stderr").read_text()
            time.sleep(0.05)
        make_events(q, "t", 5, start=1000)
        follow.send_signal(signal.SIGTERM)
        assert follow.wait(20) == 0, (tmp_path / "export.stderr").read_text()
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    # what came after its last read is exported by the next run, once
    assert _export(sqlite_url, out).wait(30) == 0
    assert sorted(row["seq"] for row in exported(out)) == list(range(1, 616))
    q.close()


def test_a_terminal_gets_a_progress_bar(sqlite_url: str, tmp_path: Path) -> None:
    with chronoq.connect(sqlite_url) as q:
        make_events(q, "t", 300)
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "chronoq.cli.main", "export", "--store", sqlite_url]
    proc = subprocess.Popen(
        [*command, "--to", str(tmp_path / "out"), "--flush-events", "100"],
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**os.environ, "COLUMNS": "100"},
    )
    os.close(follower)
    shown = b""
    with suppress(OSError):  # the pty ends with EIO once the process is gone
        while chunk := os.read(leader, 4096):
            shown += chunk
    os.close(leader)
    stdout, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, shown
    assert b"exporting" in shown and b"900/900" in shown
    assert b"Traceback" not in shown
    assert b"exported 900 event(s)" in stdout
