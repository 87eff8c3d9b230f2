"""The read fragments of the overview as HTML: the topics table with its
sparklines, a topic's summary and lag histogram, and one job. Pure
functions of what the handlers read; every value is escaped by ``render``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chronoq.job import JobInfo
from chronoq.server.ui.activity import BUCKET_S, BUCKETS, TopicView
from chronoq.server.ui.charts import lag_histogram, percentile, sparkline
from chronoq.server.ui.markup import Html, ago, join, payload_text, render, segment, url, utc
from chronoq.server.ui.widgets import action, badge, pager, table
from chronoq.states import State

__all__ = [
    "LOAD",
    "STATES",
    "job_view",
    "lag_panel",
    "topic_detail",
    "topic_summary",
    "topics_view",
]

STATES = ("delayed", "ready", "reserved", "dead")
# a placeholder loads at once, and again after an action or a token: its
# first load may have failed (no token yet) and htmx keeps only its trigger
LOAD = "load, chronoq-changed from:body"


def _pause_button(topic: str, paused: bool) -> Html:
    base = f"topics/{segment(topic)}"
    if paused:
        return action("Resume", f"{base}/resume")
    return action("Pause", f"{base}/pause")


def _topic_row(topic: str, stats: dict[str, Any], view: TopicView, acts: bool) -> Html:
    counts = join(render('<td class="num">{n}</td>', n=stats.get(state, 0)) for state in STATES)
    paused = bool(stats.get("paused"))
    return render(
        '<tr data-topic="{topic}"><td><a href="{href}" hx-get="{detail}" hx-target="#detail" '
        'hx-swap="innerHTML">{topic}</a></td>{counts}<td>{state}</td><td>{spark}</td>'
        '<td class="num">{put}</td><td class="num">{acked}</td><td>{due}</td><td>{act}</td></tr>',
        topic=topic,
        href=url("", topic=topic),
        detail=f"topics/{segment(topic)}",
        counts=counts,
        state=badge("paused") if paused else badge("active"),
        spark=sparkline(view.puts, view.acks, BUCKET_S),
        put=sum(view.puts),
        acked=sum(view.acks),
        due=ago(stats.get("next_due_at")),
        act=_pause_button(topic, paused) if acts else "",
    )


def lag_panel(lags: Sequence[int], since_ms: int | None, where: str) -> Html:
    """The hand-over lag histogram of recent reserves, with percentiles."""
    if not lags:
        return render(
            '<div class="lag"><h3>Hand-over lag</h3><p class="empty">No reserves of {where} '
            "in the event log yet.</p></div>",
            where=where,
        )
    ordered = sorted(lags)
    figures = ", ".join(
        f"{name} {percentile(ordered, q)} ms"
        for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
    )
    return render(
        '<div class="lag"><h3>Hand-over lag</h3><p class="note">Reserve time minus due time of '
        "the last {n} of {where} (since {since}): {figures}.</p>{chart}</div>",
        n=f"{len(lags)} reserves" if len(lags) > 1 else "reserve",
        where=where,
        since=utc(since_ms),
        figures=figures,
        chart=lag_histogram(lags),
    )


def topics_view(
    rows: Sequence[tuple[str, dict[str, Any], TopicView]],
    acts: dict[str, bool],
    offset: int,
    total: int,
    page: int,
) -> Html:
    """The topics table, which reloads itself every 2 s and after an action."""
    here = url("topics", offset=offset or None)
    body = [_topic_row(topic, stats, view, acts[topic]) for topic, stats, view in rows]
    minutes = f"{BUCKETS * BUCKET_S // 60} min"
    headers = ["topic", *STATES, "state", f"put / acked per {BUCKET_S}s"]
    headers += [f"put, {minutes}", f"acked, {minutes}", "next due", ""]
    where = f"topics {offset + 1}–{offset + len(rows)} of {total}" if total else ""
    lags = [lag for _, _, view in rows for lag in view.lags]
    since = min((v.lags_since_ms for _, _, v in rows if v.lags_since_ms is not None), default=None)
    return render(
        '<div id="topics" class="pageable" hx-get="{here}" '
        'hx-trigger="every 2s, chronoq-changed from:body" hx-swap="outerHTML">{table}{pager}'
        '<p class="legend"><span class="key-put">put</span> <span class="key-ack">acked</span> '
        "per {step}s, from the event log</p>{lag}</div>",
        here=here,
        table=table("topics", headers, body, "No topics yet: put a job to see one here."),
        pager=pager(
            url("topics") if offset else None,
            url("topics", offset=max(offset - page, 0)) if offset else None,
            url("topics", offset=offset + page) if offset + page < total else None,
            where,
        ),
        step=BUCKET_S,
        lag=lag_panel(lags, since, "the topics above"),
    )


def topic_summary(topic: str, stats: dict[str, Any], view: TopicView, acts: bool) -> Html:
    counts = join(
        render(
            '<div class="count"><b>{n}</b><span>{state}</span></div>', n=stats.get(s, 0), state=s
        )
        for s in STATES
    )
    paused = bool(stats.get("paused"))
    return render(
        '<div class="summary"><h2>{topic} {state}</h2><div class="counts">{counts}</div>'
        "<div>{act}</div></div>{lag}",
        topic=topic,
        state=badge("paused") if paused else badge("active"),
        counts=counts,
        act=_pause_button(topic, paused) if acts else "",
        lag=lag_panel(view.lags, view.lags_since_ms, "this topic"),
    )


def topic_detail(topic: str, summary: Html) -> Html:
    """A topic's panel: its summary (reloaded every 2 s) and its dead letters
    and delayed jobs (loaded once, and again after an action)."""
    base = f"topics/{segment(topic)}"
    return render(
        '<div class="topic" data-topic="{topic}"><div id="summary" hx-get="{base}/summary" '
        'hx-trigger="every 2s, chronoq-changed from:body" hx-swap="innerHTML">{summary}</div>'
        '<div hx-get="{base}/dead" hx-trigger="{load}" hx-swap="outerHTML"></div>'
        '<div hx-get="{base}/delayed" hx-trigger="{load}" hx-swap="outerHTML"></div></div>',
        load=LOAD,
        topic=topic,
        base=base,
        summary=summary,
    )


def _job_actions(job: JobInfo) -> Html:
    base = f"topics/{segment(job.topic)}/jobs/{segment(job.id)}"
    buttons = []
    if job.state == State.DELAYED:
        buttons.append(action("Run now", f"{base}/run-now"))
    if job.state == State.DEAD:
        buttons.append(action("Requeue", f"{base}/requeue"))
    buttons.append(action("Delete", f"{base}/delete", confirm=f"Delete job {job.id}?", danger=True))
    return render('<div class="actions">{b}</div>', b=join(buttons))


def job_view(topic: str, job_id: str, job: JobInfo | None, acts: bool) -> Html:
    """One job, reloaded after any action (so a deleted one says so)."""
    here = url("job", topic=topic, id=job_id)
    if job is None:
        inner = render(
            '<p class="empty">No job <code>{id}</code> in topic <code>{topic}</code>: it was '
            "acked or deleted, or never put.</p>",
            id=job_id,
            topic=topic,
        )
    else:
        inner = _job_body(job, acts)
    return render(
        '<div id="job-view" hx-get="{here}" hx-trigger="chronoq-changed from:body" '
        'hx-swap="outerHTML">{inner}</div>',
        here=here,
        inner=inner,
    )


def _job_body(job: JobInfo, acts: bool) -> Html:
    text, cut = payload_text(job.payload)
    fields = [
        ("state", badge(job.state)),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("due", f"{utc(job.due_at)} ({ago(job.due_at)})"),
        ("deadline", f"{utc(job.deadline)} ({ago(job.deadline)})" if job.deadline else "–"),
        ("priority", job.priority),
        ("ttr", f"{job.ttr:g} s"),
        ("created", f"{utc(job.created_at)} ({ago(job.created_at)})"),
        ("unique for", f"{job.unique_for:g} s"),
        ("last error", job.last_error or "–"),
    ]
    rows = join(render("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in fields)
    return render(
        '<div class="job" data-state="{state}"><h3><code>{topic}</code> / <code>{id}</code></h3>'
        '<dl>{rows}</dl><h4>Payload{cut}</h4><pre class="payload">{payload}</pre>{actions}</div>',
        state=job.state,
        topic=job.topic,
        id=job.id,
        rows=rows,
        cut=" (cut short; the API has it whole)" if cut else "",
        payload=text,
        actions=_job_actions(job) if acts else "",
    )
