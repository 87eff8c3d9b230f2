"""The read fragments of the overview: the topics table with its sparklines,
a topic's summary and lag histogram, its forecast, and one job. Each function shapes what
the handlers read into plain values (the view models below) and renders its
template with them; the markup, and its escaping, is the templates'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chronoq.job import Forecast, JobInfo
from chronoq.server.ui.activity import BUCKET_S, BUCKETS, TopicView
from chronoq.server.ui.charts import (
    Histogram,
    Spark,
    due_chart,
    lag_histogram,
    percentile,
    sparkline,
)
from chronoq.server.ui.formats import ago, payload_text, segment, url, utc
from chronoq.server.ui.templates import render
from chronoq.server.ui.widgets import Button, Pager
from chronoq.states import State

__all__ = [
    "DUE_STEPS",
    "STATES",
    "Summary",
    "forecast_view",
    "job_view",
    "summary_of",
    "topic_detail",
    "topic_summary",
    "topics_view",
]

STATES = ("delayed", "ready", "reserved", "dead")
DUE_STEPS = 24  # the forecast panel: the next day, by the hour


@dataclass(frozen=True)
class Lag:
    """The hand-over lag panel: ``chart`` is None while there is no reserve."""

    where: str
    reserves: str = ""
    since: str = ""
    figures: str = ""
    chart: Histogram | None = None


@dataclass(frozen=True)
class TopicRow:
    topic: str
    href: str
    detail: str
    counts: list[int]
    paused: bool
    spark: Spark
    put: int
    acked: int
    due: str
    buttons: list[Button]


@dataclass(frozen=True)
class Summary:
    topic: str
    counts: list[tuple[str, int]]
    paused: bool
    buttons: list[Button]
    lag: Lag


@dataclass(frozen=True)
class JobBody:
    """A job's fields as text, but for its state (a badge)."""

    topic: str
    id: str
    state: str
    fields: list[tuple[str, str]]
    payload: str
    cut: bool
    buttons: list[Button]


def _pause_buttons(topic: str, paused: bool, acts: bool) -> list[Button]:
    if not acts:
        return []
    base = f"topics/{segment(topic)}"
    return [Button("Resume", f"{base}/resume") if paused else Button("Pause", f"{base}/pause")]


def _topic_row(topic: str, stats: dict[str, Any], view: TopicView, acts: bool) -> TopicRow:
    paused = bool(stats.get("paused"))
    return TopicRow(
        topic=topic,
        href=url("", topic=topic),
        detail=f"topics/{segment(topic)}",
        counts=[stats.get(state, 0) for state in STATES],
        paused=paused,
        spark=sparkline(view.puts, view.acks, BUCKET_S),
        put=sum(view.puts),
        acked=sum(view.acks),
        due=ago(stats.get("next_due_at")),
        buttons=_pause_buttons(topic, paused, acts),
    )


def lag_panel(lags: Sequence[int], since_ms: int | None, where: str) -> Lag:
    """The hand-over lag of recent reserves, with percentiles."""
    if not lags:
        return Lag(where)
    ordered = sorted(lags)
    figures = ", ".join(
        f"{name} {percentile(ordered, q)} ms"
        for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
    )
    reserves = f"{len(lags)} reserves" if len(lags) > 1 else "reserve"
    return Lag(where, reserves, utc(since_ms), figures, lag_histogram(lags))


def topics_view(
    rows: Sequence[tuple[str, dict[str, Any], TopicView]],
    acts: dict[str, bool],
    offset: int,
    total: int,
    page: int,
) -> str:
    """The topics table, which reloads itself every 2 s and after an action."""
    minutes = f"{BUCKETS * BUCKET_S // 60} min"
    headers = ["topic", *STATES, "state", f"put / acked per {BUCKET_S}s"]
    headers += [f"put, {minutes}", f"acked, {minutes}", "next due", ""]
    where = f"topics {offset + 1}–{offset + len(rows)} of {total}" if total else ""
    lags = [lag for _, _, view in rows for lag in view.lags]
    since = min((v.lags_since_ms for _, _, v in rows if v.lags_since_ms is not None), default=None)
    return render(
        "topics.html",
        here=url("topics", offset=offset or None),
        headers=headers,
        rows=[_topic_row(topic, stats, view, acts[topic]) for topic, stats, view in rows],
        pages=Pager(
            url("topics") if offset else None,
            url("topics", offset=max(offset - page, 0)) if offset else None,
            url("topics", offset=offset + page) if offset + page < total else None,
            where,
        ),
        step=BUCKET_S,
        lag=lag_panel(lags, since, "the topics above"),
    )


def summary_of(topic: str, stats: dict[str, Any], view: TopicView, acts: bool) -> Summary:
    paused = bool(stats.get("paused"))
    return Summary(
        topic=topic,
        counts=[(state, stats.get(state, 0)) for state in STATES],
        paused=paused,
        buttons=_pause_buttons(topic, paused, acts),
        lag=lag_panel(view.lags, view.lags_since_ms, "this topic"),
    )


def topic_summary(summary: Summary) -> str:
    """A topic's counts, pause button and lag: reloaded every 2 s."""
    return render("summary.html", summary=summary)


def topic_detail(summary: Summary) -> str:
    """A topic's panel: its summary (reloaded every 2 s) and its dead letters
    and delayed jobs (loaded once, and again after an action)."""
    return render("topic.html", base=f"topics/{segment(summary.topic)}", summary=summary)


def forecast_view(topic: str, forecast: Forecast) -> str:
    """A topic's delayed jobs due per hour over the next day, reloaded every
    minute. A store whose clock is behind this server's answers a step more
    than asked for: it joins the jobs due later."""
    counts = forecast.counts[:DUE_STEPS]
    return render(
        "forecast.html",
        here=f"topics/{segment(topic)}/forecast",
        hours=len(counts),
        total=sum(counts),
        start=utc(forecast.start),
        later=forecast.later + sum(forecast.counts[DUE_STEPS:]),
        chart=due_chart(
            forecast.start, round(forecast.step * 1000), counts, "delayed jobs due per hour"
        ),
    )


def _job_buttons(job: JobInfo) -> list[Button]:
    base = f"topics/{segment(job.topic)}/jobs/{segment(job.id)}"
    buttons = []
    if job.state == State.DELAYED:
        buttons.append(Button("Run now", f"{base}/run-now"))
    if job.state == State.DEAD:
        buttons.append(Button("Requeue", f"{base}/requeue"))
    buttons.append(Button("Delete", f"{base}/delete", confirm=f"Delete job {job.id}?", danger=True))
    return buttons


def _job_body(job: JobInfo, acts: bool) -> JobBody:
    text, cut = payload_text(job.payload)
    fields = [
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("due", f"{utc(job.due_at)} ({ago(job.due_at)})"),
        ("deadline", f"{utc(job.deadline)} ({ago(job.deadline)})" if job.deadline else "–"),
        ("priority", str(job.priority)),
        ("ttr", f"{job.ttr:g} s"),
        ("created", f"{utc(job.created_at)} ({ago(job.created_at)})"),
        ("unique for", f"{job.unique_for:g} s"),
        ("last error", job.last_error or "–"),
    ]
    buttons = _job_buttons(job) if acts else []
    return JobBody(job.topic, job.id, str(job.state), fields, text, cut, buttons)


def job_view(topic: str, job_id: str, job: JobInfo | None, acts: bool) -> str:
    """One job, reloaded after any action (so a deleted one says so)."""
    return render(
        "job.html",
        here=url("job", topic=topic, id=job_id),
        topic=topic,
        job_id=job_id,
        job=None if job is None else _job_body(job, acts),
    )
