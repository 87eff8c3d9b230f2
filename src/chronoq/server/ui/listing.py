"""Pages of the long lists: topics, dead letters and delayed jobs.

Dead letters come oldest death first from ``dead``, paged by offset. No
call lists the jobs of one state, so delayed jobs are found by scanning the
topic's jobs shard by shard (``Queue.jobs``, blocking: run it in a thread)
and keeping the delayed ones; a page stops after ``SCAN_BUDGET`` jobs even
when it found fewer than it wanted, so a topic of ten million ready jobs
costs a click a bounded read, and "more" goes on from there."""

from __future__ import annotations

from dataclasses import dataclass

from chronoq.aio import AsyncQueue
from chronoq.calls.checks import MAX_LIMIT
from chronoq.errors import InvalidInput
from chronoq.job import JobInfo
from chronoq.states import State

__all__ = ["PAGE", "SCAN_BUDGET", "Page", "dead_page", "offset_arg", "scan_state"]

PAGE = 25  # rows of a list page
SCAN_BUDGET = 5000  # jobs one page of a state scan reads at most
_SCAN_READ = 500  # jobs per read of a scan, at most


@dataclass(frozen=True)
class Page:
    """Rows of one page; ``next`` is what asks for the following page (an
    offset or a scan cursor; None: this is the last)."""

    jobs: list[JobInfo]
    next: str | None
    scanned: int = 0


def offset_arg(text: str | None, *, most: int = MAX_LIMIT - PAGE - 1) -> int:
    """A page offset from the query string."""
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()) or int(text) > most:
        raise InvalidInput(f"offset must be a whole number up to {most}, got {text!r}")
    return int(text)


async def dead_page(queue: AsyncQueue, topic: str, offset: int) -> Page:
    jobs = await queue.dead(topic, limit=offset + PAGE + 1)
    more = len(jobs) > offset + PAGE and offset + 2 * PAGE + 1 <= MAX_LIMIT
    return Page(jobs[offset : offset + PAGE], str(offset + PAGE) if more else None)


def _cursor(text: str | None, shards: int) -> tuple[int, str | None]:
    """``"shard:position"`` (position empty at a shard's start)."""
    if not text:
        return 0, None
    shard, colon, position = text.partition(":")
    if not colon or not (shard.isascii() and shard.isdigit()) or int(shard) >= shards:
        raise InvalidInput(f"bad page cursor {text!r}: follow the page's own links")
    return int(shard), position or None


async def scan_state(queue: AsyncQueue, topic: str, state: State, cursor: str | None) -> Page:
    """A page of the topic's jobs in ``state``, ordered by due time within
    the page (the scan itself follows the store's order, not due time)."""
    shards = queue.shards
    shard, position = _cursor(cursor, shards)
    found: list[JobInfo] = []
    scanned = 0
    # a page holds every match of the reads it made: small reads first keep
    # it near PAGE rows where most jobs match, larger ones where few do
    read = PAGE
    while shard < shards and scanned < SCAN_BUDGET and len(found) < PAGE:
        page = await queue.jobs(topic, shard=shard, cursor=position, limit=read)
        # a read is charged in full: a far tier of deleted jobs answers short pages
        scanned += max(len(page.jobs), read)
        read = min(read * 4, _SCAN_READ)
        found += [job for job in page.jobs if job.state == state]
        if page.cursor is None:
            shard, position = shard + 1, None
        else:
            position = page.cursor
    found.sort(key=lambda job: (job.due_at, job.id))
    more = f"{shard}:{position or ''}" if shard < shards else None
    return Page(found, more, scanned)
