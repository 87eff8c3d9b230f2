"""asyncio waiters on SQLite: futures on the loop, not a thread each, so any
number of topics can wait at once; a commit by another process wakes them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import chronoq.aio
from chronoq.backends.sqlite import aio_watcher


def test_waiters_on_many_topics_are_all_woken(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'many.db'}"
    topics = [f"t{i}" for i in range(200)]  # past any thread pool's size

    async def run() -> list[float]:
        async with chronoq.aio.connect(url) as q:
            waits = [asyncio.ensure_future(q.reserve(t, wait=20)) for t in topics]
            await asyncio.sleep(0.5)
            assert threading.active_count() < 50  # no thread per waiting topic
            started = time.monotonic()
            for topic in topics:
                await q.put(topic, 1)
            got = await asyncio.gather(*waits)
            assert all(len(jobs) == 1 for jobs in got)
            return [time.monotonic() - started]

    assert asyncio.run(run())[0] < 15  # woken by the puts, not by the end of the waits


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "polling"])
def test_a_put_by_another_process_wakes_a_waiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inotify: bool
) -> None:
    """On Linux the loop hears of the write from inotify; without it (other
    systems) the files are looked at every few ms while someone waits."""
    if not inotify:
        monkeypatch.setattr(aio_watcher.DirectoryWatch, "open", lambda *args: None)
    url = f"sqlite:///{tmp_path / 'other.db'}"

    async def run() -> float:
        async with chronoq.aio.connect(url) as q:
            await q.put("warm", 1)  # the file and its WAL exist
            wait = asyncio.ensure_future(q.reserve("t", wait=30))
            await asyncio.sleep(0.3)
            put = f"import chronoq; chronoq.connect({url!r}).put('t', 1)"
            await asyncio.to_thread(subprocess.run, [sys.executable, "-c", put], check=True)
            done = time.monotonic()
            jobs = await wait
            assert len(jobs) == 1
            return time.monotonic() - done

    assert asyncio.run(run()) < 5  # not the 30 s of the wait


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "polling"])
def test_a_commit_seen_only_after_its_write_event_still_wakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inotify: bool
) -> None:
    """The write to the WAL is seen (an inotify event, or the file's new size
    and time); the commit becomes visible a moment later, in the mmap'd WAL
    index, which neither shows. Here the one write the loop sees comes before
    the commit (a rewrite of the WAL's first bytes, unchanged) and the
    commit's own writes are not seen: the rereads that follow a write must
    still find it (once, this waited out its whole wait)."""
    path = tmp_path / "late.db"
    url = f"sqlite:///{path}"
    heard = 0
    if inotify:
        hear = aio_watcher.LoopWake._files_written

        def first_event_only(self: aio_watcher.LoopWake, loop: asyncio.AbstractEventLoop) -> None:
            nonlocal heard
            heard += 1
            if heard == 1:
                hear(self, loop)
            elif self._inotify is not None:
                self._inotify.drain()  # the commit's events: not heard

        monkeypatch.setattr(aio_watcher.LoopWake, "_files_written", first_event_only)
    else:
        monkeypatch.setattr(aio_watcher.DirectoryWatch, "open", lambda *args: None)
        moved = aio_watcher.LoopWake._files_moved

        def first_move_only(self: aio_watcher.LoopWake) -> bool:
            nonlocal heard
            if not moved(self):
                return False
            heard += 1
            return heard <= 2  # the first look sets the stamp; then the one write

        monkeypatch.setattr(aio_watcher.LoopWake, "_files_moved", first_move_only)

    writer = (
        "import sys, chronoq; q = chronoq.connect(sys.argv[1]); q.stats('t')\n"
        "print('ready', flush=True); sys.stdin.readline(); q.put('t', 1)\n"
    )

    async def run() -> float:
        async with chronoq.aio.connect(url) as q:
            await q.put("warm", 1)  # the file and its WAL exist
            other = await asyncio.create_subprocess_exec(
                sys.executable, "-c", writer, url,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert other.stdin is not None and other.stdout is not None
            assert await other.stdout.readline() == b"ready\n"  # started, connected
            wait = asyncio.ensure_future(q.reserve("t", wait=20))
            await asyncio.sleep(0.3)
            wal = Path(f"{path}-wal")
            with wal.open("r+b") as f:  # an event, and no commit
                head = f.read(32)
                f.seek(0)
                f.write(head)
            await asyncio.sleep(0.05)
            other.stdin.write(b"put\n")  # the commit, whose events are not heard
            await other.stdin.drain()
            assert await other.wait() == 0
            done = time.monotonic()
            jobs = await wait
            assert len(jobs) == 1
            assert heard >= 2  # the commit did write (and was not heard)
            return time.monotonic() - done

    assert asyncio.run(run()) < aio_watcher.SETTLE_S  # not the 20 s of the wait
