"""chronoq.pipeline.report and .charts: the HTML of ``chronoq analyze``, from
rows made by hand (no Spark): well-formed, offline, escaped, and capped."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest

from chronoq.pipeline.charts import Series, line_chart, nice_ticks, time_ticks
from chronoq.pipeline.report import BUCKET_ROWS_SHOWN, CHARTED_TOPICS, ReportData, render_report

T0 = datetime(2026, 11, 25, 10, tzinfo=UTC)
HOSTILE = "<b>&x"
SVG_NS = "http://www.w3.org/2000/svg"
COUNTS = ("puts", "reserves", "acks", "nacks", "expires", "deads", "buries", "deletes")
COUNTS += ("reschedules", "requeues", "touches")


def metrics(topic: str, n: int = 10, *, lag: float | None = 12.34) -> dict[str, Any]:
    """A row of ``topics``: ``n`` puts, reserves and acks, one nack."""
    row: dict[str, Any] = dict.fromkeys(COUNTS, 0)
    row.update(topic=topic, puts=n, reserves=n, acks=n, nacks=1)
    for key, factor in (("lag_p50_ms", 1), ("lag_p95_ms", 2), ("lag_p99_ms", 3), ("lag_max_ms", 4)):
        row[key] = None if lag is None else lag * factor
    row.update(run_p50_ms=lag, run_p99_ms=lag)
    row["retry_rate"] = None if lag is None else 1 / n
    row["dead_rate"] = None if lag is None else 0.0
    return row


def bucket(topic: str, hour: int, n: int = 10, *, lag: float | None = 12.34) -> dict[str, Any]:
    return {**metrics(topic, n, lag=lag), "bucket": T0 + timedelta(hours=hour)}


def data(
    buckets: list[dict[str, Any]] | None = None,
    topics: list[dict[str, Any]] | None = None,
    attempts: list[dict[str, Any]] | None = None,
) -> ReportData:
    return ReportData(
        generated_at=T0,
        parameters={"events": "/data/export", "bucket": "1h", "topic": "every topic"},
        input={"files": "12", "events": "1,000,000"},
        buckets=buckets or [],
        topics=topics or [],
        attempts=attempts or [],
    )


def small() -> ReportData:
    """Two topics over three hours (the second with a gap), one of them hostile."""
    buckets = [bucket("emails", h, 10 + h) for h in (2, 0, 1)] + [
        bucket(HOSTILE, 0),
        bucket(HOSTILE, 2),
    ]
    attempts = [
        {"topic": "emails", "outcome": "acked", "attempts": 1, "jobs": 1200},
        {"topic": "emails", "outcome": "dead", "attempts": 5, "jobs": 3},
        {"topic": HOSTILE, "outcome": "acked", "attempts": 2, "jobs": 7},
    ]
    return data(buckets, [metrics("emails", 33), metrics(HOSTILE, 20)], attempts)


class Tags(HTMLParser):
    """Counts of the tags that must balance, and every svg's own text."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = {"svg": 0, "table": 0, "html": 0, "section": 0}
        self.opened = dict.fromkeys(self.depth, 0)
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        if tag in self.depth:
            self.depth[tag] += 1
            self.opened[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.depth:
            self.depth[tag] -= 1
            assert self.depth[tag] >= 0, f"</{tag}> without <{tag}>"


def parsed(document: str) -> Tags:
    parser = Tags()
    parser.feed(document)
    parser.close()
    assert all(d == 0 for d in parser.depth.values()), parser.depth
    return parser


def check_offline(document: str) -> None:
    assert "<script" not in document.lower()
    assert set(re.findall(r"https?://[^\s\"'<>)]*", document)) <= {SVG_NS}
    assert "@import" not in document and "url(" not in document


def check_points_inside(document: str) -> int:
    """Every point of every chart is in its viewBox; the number of points."""
    seen = 0
    for svg in re.findall(r"<svg\b.*?</svg>", document, re.S):
        width, height = map(float, re.search(r'viewBox="0 0 (\S+) (\S+)"', svg).groups())  # type: ignore[union-attr]
        points = [
            tuple(map(float, pair.split(",")))
            for coords in re.findall(r'<polyline points="([^"]*)"', svg)
            for pair in coords.split()
        ]
        points += [tuple(map(float, p)) for p in re.findall(r'cx="([^"]+)" cy="([^"]+)"', svg)]
        for x, y in points:
            assert 0 <= x <= width and 0 <= y <= height, (x, y, width, height)
        seen += len(points)
    return seen


def test_a_report_is_one_wellformed_offline_document() -> None:
    document = render_report(small())
    assert document.startswith("<!DOCTYPE html>")
    tags = parsed(document)
    assert tags.opened["svg"] == 6  # three charts for each of two topics
    assert tags.opened["table"] >= 5
    check_offline(document)
    assert check_points_inside(document) > 0
    for text in ("chronoq delivery report", "2026-11-25 10:00:00 UTC", "/data/export", "emails"):
        assert text in document
    assert "1,200" in document and "12.3" in document and "10.00 %" in document


def test_data_text_is_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    report = small()
    report.parameters["topic"] = hostile
    document = render_report(report)
    assert HOSTILE not in document and hostile not in document
    assert "&lt;b&gt;&amp;x" in document
    check_offline(document)
    parsed(document)


def test_missing_values_show_as_a_dash() -> None:
    quiet = metrics("quiet", 0, lag=None)
    document = render_report(data([bucket("quiet", 0, 0, lag=None)], [quiet]))
    row = re.search(r"<tr><td>quiet</td>.*?</tr>", document)
    assert row is not None and row.group(0).count("<td") - row.group(0).count("—") == 12
    assert "no reserves, so no lag" in document


def test_only_the_busiest_topics_are_charted() -> None:
    names = [f"topic-{i:02}" for i in range(CHARTED_TOPICS + 3)]
    topics = [metrics(name, 100 + i) for i, name in enumerate(names)]
    buckets = [bucket(name, h) for name in names for h in range(3)]
    document = render_report(data(buckets, topics))
    assert parsed(document).opened["svg"] == 3 * CHARTED_TOPICS
    assert "3 more are left out of the charts" in document
    for name in names:  # in the tables all the same
        assert f"<td>{name}</td>" in document
    charted = re.findall(r"<h3>(topic-\d+)</h3><div", document)
    assert charted == names[::-1][:CHARTED_TOPICS]  # the busiest first


def test_the_bucket_table_keeps_the_most_recent_rows() -> None:
    rows = [bucket(topic, h) for topic in ("a", "b") for h in range(BUCKET_ROWS_SHOWN // 2 + 50)]
    document = render_report(data(rows, [metrics("a"), metrics("b")]))
    assert f"{len(rows):,} rows: only the last {BUCKET_ROWS_SHOWN:,}" in document
    table = document[document.index("<h2>Per bucket</h2>") :]
    assert table.count("<tr><td>") == BUCKET_ROWS_SHOWN
    assert "2026-11-25 10:00" not in table  # the first hours went
    assert check_points_inside(document) > 0


@pytest.mark.parametrize(
    "report",
    [
        data(),
        data(topics=[metrics("idle", 0, lag=None)]),
        data([bucket("one", 0)], [metrics("one")]),
        data(attempts=[{"topic": "late", "outcome": "dead", "attempts": 3, "jobs": 1}]),
    ],
    ids=["nothing", "no-buckets", "one-bucket", "attempts-only"],
)
def test_thin_inputs_render(report: ReportData) -> None:
    document = render_report(report)
    parsed(document)
    check_offline(document)
    check_points_inside(document)
    assert "no events" in document or "one" in document
    for row in report.topics:
        assert row["topic"] in document


def test_empty_buckets_are_zero_events_but_no_lag() -> None:
    # hour 2 had no events: no row
    document = render_report(data([bucket("t", h) for h in (0, 1, 3)], [metrics("t")]))
    lag, flow, _ = re.findall(r"<svg\b.*?</svg>", document, re.S)
    # a gap: each percentile is a line over hours 0-1 and a point at hour 3
    assert lag.count("<polyline") == 3 and lag.count("<circle") == 3 * 3
    assert all(len(p.split()) == 2 for p in re.findall(r'points="([^"]*)"', lag))
    # no gap: zero events in hour 2
    assert flow.count("<polyline") == 3 and flow.count("<circle") == 3 * 4


def test_a_chart_alone() -> None:
    times = [T0 + timedelta(minutes=5 * i) for i in range(100)]
    values: list[float | None] = [float(i % 7) for i in range(100)]
    values[40:45] = [None] * 5
    svg = line_chart("a & b", times, [Series("<s>", values), Series("flat", [0.0] * 100)])
    assert svg.startswith(f'<svg xmlns="{SVG_NS}" width="720" height="260" viewBox="0 0 720 260"')
    assert "a &amp; b" in svg and "&lt;s&gt;" in svg and "<s>" not in svg
    assert svg.count("<polyline") == 3  # the gap splits the first line
    assert check_points_inside(svg) > 0
    with pytest.raises(ValueError):
        line_chart("x", times, [Series("short", [1.0])])
    empty = line_chart("x", [], [], empty="nothing here")
    assert "nothing here" in empty and "<polyline" not in empty


def test_ticks_are_round() -> None:
    assert nice_ticks(0, 101) == [0, 50, 100, 150]
    assert nice_ticks(0, 1) == [0, 0.25, 0.5, 0.75, 1]
    assert nice_ticks(0, 1, integer=True) == [0, 1]
    assert nice_ticks(0, 0.3) == [0, 0.1, 0.2, 0.3]
    assert nice_ticks(5, 5)[0] <= 5 <= nice_ticks(5, 5)[-1]
    start = T0.timestamp()
    ticks, caption = time_ticks(start, start + 6 * 3600)
    assert [label for _, label in ticks] == ["10:00", "12:00", "14:00", "16:00"]
    assert caption == "2026-11-25, UTC"
    ticks, _ = time_ticks(start, start + 20 * 86400)
    assert all(label.startswith("2026-") for _, label in ticks) and 2 <= len(ticks) <= 6


def test_the_top_groups_show_with_their_lag_and_throughput() -> None:
    groups = [
        {**metrics("emails", 40), "group": "tenant-1", "jobs": 40, "acks_per_s": 0.0111},
        {**metrics("emails", 30), "group": None, "jobs": 30, "acks_per_s": 1234.5},
        {**metrics(HOSTILE, 20), "group": HOSTILE, "jobs": 20, "acks_per_s": None},
    ]
    group_buckets = [
        {**bucket("emails", h), "group": group} for h in (0, 1, 2) for group in ("tenant-1", None)
    ]
    report = data([bucket("emails", h) for h in (0, 1, 2)], [metrics("emails", 70)])
    report = dataclasses.replace(report, groups=groups, group_buckets=group_buckets, group_count=12)
    document = render_report(report)
    parsed(document)
    check_offline(document)
    assert check_points_inside(document) > 0
    section = document[document.index("<h2>Groups</h2>") : document.index("<h2>Over time</h2>")]
    assert "The 3 groups with the most jobs; 9 more are in the groups table." in section
    assert section.count("<svg") == 2  # lag p99 and acks per bucket, a line per group
    assert "acks per bucket by group" in section and "emails / (no group)" in section
    rows = re.findall(r"<tr><td>.*?</tr>", section)
    assert [re.findall(r"<td>(.*?)</td>", row)[:2] for row in rows] == [
        ["emails", "tenant-1"],
        ["emails", "<em>(no group)</em>"],
        ["&lt;b&gt;&amp;x", "&lt;b&gt;&amp;x"],
    ]
    assert '>40</td><td class="n">0.01</td>' in rows[0]
    assert ">1,234</td>" in rows[1] or ">1,235</td>" in rows[1]
    assert HOSTILE not in document


def test_no_groups_no_group_charts() -> None:
    document = render_report(small())
    section = document[document.index("<h2>Groups</h2>") : document.index("<h2>Over time</h2>")]
    assert "no events" in section and "<svg" not in section
