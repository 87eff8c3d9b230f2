"""A topic's dead letters and delayed jobs as HTML lists, page by page,
with their actions (requeue, run now, delete)."""

from __future__ import annotations

from chronoq.job import JobInfo
from chronoq.server.ui.listing import PAGE, SCAN_BUDGET, Page
from chronoq.server.ui.markup import Html, ago, join, preview, render, segment, url, utc
from chronoq.server.ui.widgets import action, pager, table

__all__ = ["dead_list", "delayed_list"]


def _job_link(job: JobInfo) -> Html:
    return render(
        '<a class="job-id" href="#job" hx-get="{lookup}" hx-target="#job" '
        'hx-swap="innerHTML">{id}</a>',
        lookup=url("job", topic=job.topic, id=job.id),
        id=job.id,
    )


def _base(job: JobInfo) -> str:
    return f"topics/{segment(job.topic)}/jobs/{segment(job.id)}"


def _delete(job: JobInfo) -> Html:
    return action("Delete", f"{_base(job)}/delete", confirm=f"Delete job {job.id}?", danger=True)


def _dead_row(job: JobInfo, acts: bool) -> Html:
    buttons = join([action("Requeue", f"{_base(job)}/requeue"), _delete(job)]) if acts else ""
    return render(
        '<tr data-id="{id}"><td>{link}</td><td class="num">{attempts}</td>'
        '<td class="error">{error}</td><td><code>{payload}</code></td><td>{buttons}</td></tr>',
        id=job.id,
        link=_job_link(job),
        attempts=job.attempts,
        error=job.last_error or "–",
        payload=preview(job.payload),
        buttons=buttons,
    )


def dead_list(topic: str, page: Page, offset: int, count: int, acts: bool) -> Html:
    """Dead letters, oldest death first; requeue one or all, delete one."""
    base = f"topics/{segment(topic)}/dead"
    rows = [_dead_row(job, acts) for job in page.jobs]
    everything = (
        action(
            "Requeue all", f"{base}/requeue", confirm=f"Requeue all {count} dead jobs of {topic}?"
        )
        if acts and count
        else ""
    )
    where = f"{offset + 1}–{offset + len(rows)} of {count}" if rows else ""
    return render(
        '<section id="dead" class="pageable" hx-get="{here}" '
        'hx-trigger="chronoq-changed from:body" hx-swap="outerHTML">'
        "<h3>Dead letters <small>({count})</small> {everything}</h3>{table}{pager}</section>",
        here=url(base, offset=offset or None),
        count=count,
        everything=everything,
        table=table(
            "jobs", ["id", "attempts", "last error", "payload", ""], rows, "No dead letters."
        ),
        pager=pager(
            url(base) if offset else None,
            url(base, offset=max(offset - PAGE, 0) or None) if offset else None,
            url(base, offset=page.next) if page.next else None,
            where,
        ),
    )


def _delayed_row(job: JobInfo, acts: bool, now_ms: int) -> Html:
    buttons = join([action("Run now", f"{_base(job)}/run-now"), _delete(job)]) if acts else ""
    return render(
        '<tr data-id="{id}"><td>{link}</td><td title="{at}">{due}</td>'
        '<td class="num">{prio}</td><td class="num">{attempts}</td>'
        "<td><code>{payload}</code></td><td>{buttons}</td></tr>",
        id=job.id,
        link=_job_link(job),
        at=utc(job.due_at),
        due=ago(job.due_at, now_ms),
        prio=job.priority,
        attempts=job.attempts,
        payload=preview(job.payload),
        buttons=buttons,
    )


def delayed_list(
    topic: str, page: Page, cursor: str | None, count: int, acts: bool, now_ms: int
) -> Html:
    """Delayed jobs found by a bounded scan; "run now" makes one due at once."""
    base = f"topics/{segment(topic)}/delayed"
    rows = [_delayed_row(job, acts, now_ms) for job in page.jobs]
    where = f"{len(rows)} shown of {count}"
    if page.next is not None and len(rows) < PAGE and page.scanned >= SCAN_BUDGET:
        where += f" (a page reads at most {SCAN_BUDGET} jobs: next goes on)"
    return render(
        '<section id="delayed" class="pageable" hx-get="{here}" '
        'hx-trigger="chronoq-changed from:body" hx-swap="outerHTML">'
        '<h3>Delayed jobs <small>({count})</small></h3><p class="note">By due time within a '
        "page; pages follow the store's order.</p>{table}{pager}</section>",
        here=url(base, after=cursor),
        count=count,
        table=table(
            "jobs",
            ["id", "due", "priority", "attempts", "payload", ""],
            rows,
            "No delayed jobs." if cursor is None else "No more delayed jobs.",
        ),
        pager=pager(
            url(base) if cursor else None,
            None,
            url(base, after=page.next) if page.next else None,
            where if count else "",
        ),
    )
