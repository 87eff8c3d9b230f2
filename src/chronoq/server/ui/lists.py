"""A topic's dead letters and delayed jobs, page by page, with their actions
(requeue, run now, delete): the rows as values, drawn by dead.html and
delayed.html."""

from __future__ import annotations

from dataclasses import dataclass

from chronoq.job import JobInfo
from chronoq.server.ui.formats import ago, preview, segment, url, utc
from chronoq.server.ui.listing import PAGE, SCAN_BUDGET, Page
from chronoq.server.ui.templates import render
from chronoq.server.ui.widgets import Button, Pager

__all__ = ["dead_list", "delayed_list"]


@dataclass(frozen=True)
class DeadRow:
    id: str
    lookup: str  # the job's view, for the lookup panel
    attempts: int
    error: str
    payload: str
    buttons: list[Button]


@dataclass(frozen=True)
class DelayedRow:
    id: str
    lookup: str
    at: str
    due: str
    priority: int
    attempts: int
    payload: str
    buttons: list[Button]


def _lookup(job: JobInfo) -> str:
    return url("job", topic=job.topic, id=job.id)


def _base(job: JobInfo) -> str:
    return f"topics/{segment(job.topic)}/jobs/{segment(job.id)}"


def _delete(job: JobInfo) -> Button:
    return Button("Delete", f"{_base(job)}/delete", confirm=f"Delete job {job.id}?", danger=True)


def _dead_row(job: JobInfo, acts: bool) -> DeadRow:
    buttons = [Button("Requeue", f"{_base(job)}/requeue"), _delete(job)] if acts else []
    return DeadRow(
        job.id, _lookup(job), job.attempts, job.last_error or "–", preview(job.payload), buttons
    )


def dead_list(topic: str, page: Page, offset: int, count: int, acts: bool) -> str:
    """Dead letters, oldest death first; requeue one or all, delete one."""
    base = f"topics/{segment(topic)}/dead"
    rows = [_dead_row(job, acts) for job in page.jobs]
    everything = (
        [
            Button(
                "Requeue all",
                f"{base}/requeue",
                confirm=f"Requeue all {count} dead jobs of {topic}?",
            )
        ]
        if acts and count
        else []
    )
    where = f"{offset + 1}–{offset + len(rows)} of {count}" if rows else ""
    return render(
        "dead.html",
        here=url(base, offset=offset or None),
        count=count,
        everything=everything,
        jobs=rows,
        pages=Pager(
            url(base) if offset else None,
            url(base, offset=max(offset - PAGE, 0) or None) if offset else None,
            url(base, offset=page.next) if page.next else None,
            where,
        ),
    )


def _delayed_row(job: JobInfo, acts: bool, now_ms: int) -> DelayedRow:
    buttons = [Button("Run now", f"{_base(job)}/run-now"), _delete(job)] if acts else []
    return DelayedRow(
        id=job.id,
        lookup=_lookup(job),
        at=utc(job.due_at),
        due=ago(job.due_at, now_ms),
        priority=job.priority,
        attempts=job.attempts,
        payload=preview(job.payload),
        buttons=buttons,
    )


def delayed_list(
    topic: str, page: Page, cursor: str | None, count: int, acts: bool, now_ms: int
) -> str:
    """Delayed jobs found by a bounded scan; "run now" makes one due at once."""
    base = f"topics/{segment(topic)}/delayed"
    rows = [_delayed_row(job, acts, now_ms) for job in page.jobs]
    where = f"{len(rows)} shown of {count}"
    if page.next is not None and len(rows) < PAGE and page.scanned >= SCAN_BUDGET:
        where += f" (a page reads at most {SCAN_BUDGET} jobs: next goes on)"
    return render(
        "delayed.html",
        here=url(base, after=cursor),
        count=count,
        jobs=rows,
        empty="No delayed jobs." if cursor is None else "No more delayed jobs.",
        pages=Pager(
            url(base) if cursor else None,
            None,
            url(base, after=page.next) if page.next else None,
            where if count else "",
        ),
    )
