"""Hostile strings through every dashboard page and fragment that shows them,
over real HTTP on each backend: a job id, a payload and an error holding a
script tag, an attribute break-out and Jinja2 template syntax come out
escaped (the source holds the escaped form, never the raw tag), parse back
to the very string as text or as an attribute value, and the template
syntax is shown, not evaluated. Topics cannot hold any of it (their pattern
allows letters, digits and ``._:-``): a hostile topic in a link is dropped
or refused."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from urllib.parse import quote

import httpx
import pytest

import chronoq

ACT = {"hx-request": "true"}

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = "\"'><img src=x onerror=alert(1)>"
TEMPLATE = "{{7*7}}"
HOSTILE = (SCRIPT, BREAKOUT, TEMPLATE)
# ids hold no whitespace: the same attacks without it
IDS = (SCRIPT, "\"'><img/src=x/onerror=alert(1)>", "{{7*7}}")


class Parsed(HTMLParser):
    """What a browser's parser makes of a page: its elements, their
    attributes and its text (entities decoded)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def values(self) -> list[str]:
        return [v for _, attrs in self.tags for v in attrs.values() if v is not None]


def page(http: httpx.Client, path: str, method: str = "GET") -> tuple[str, Parsed]:
    answer = http.request(method, path, headers=ACT if method == "POST" else {})
    assert answer.status_code == 200, (path, answer.text)
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    return answer.text, Parsed(answer.text)


def no_raw_markup(path: str, source: str, parsed: Parsed) -> None:
    """Nothing a user wrote became markup: no script, no img, no event
    handler attribute; and no raw form of a hostile string in the source."""
    for raw in (*HOSTILE, *IDS):
        assert raw.startswith("{{") or raw not in source, (path, raw)
    assert "<script>" not in source and "<img" not in source, path
    for tag, attrs in parsed.tags:
        assert tag != "img" and (tag != "script" or attrs.get("src")), (path, tag)
        assert not any(name.startswith("on") for name in attrs), (path, tag, attrs)


def shows(path: str, source: str, parsed: Parsed, value: str) -> None:
    """``value`` round-trips as text, and the source holds it escaped (not
    as written, unless escaping leaves it so); template syntax stays as
    written (not rendered into 49)."""
    assert value in "".join(parsed.text), (path, value)
    assert value == html.escape(value) or value not in source, (path, value)
    if TEMPLATE in value:
        assert TEMPLATE in source, path


def put_hostile(queue: chronoq.Queue) -> None:
    """A delayed and a dead job under each hostile id, with hostile
    payloads and errors."""
    for n, job_id in enumerate(IDS):
        queue.put("orders", {"note": HOSTILE[n]}, id=f"later{job_id}", delay=600)
        queue.put("orders", list(HOSTILE), id=f"dead{job_id}", priority=1000)
        [job] = queue.reserve("orders")
        queue.bury(job, error=f"failed: {HOSTILE[n]}")


def test_hostile_ids_payloads_and_errors_are_escaped(
    http: httpx.Client, queue: chronoq.Queue
) -> None:
    put_hostile(queue)
    for path in ("/ui/topics/orders/dead", "/ui/topics/orders/delayed"):
        source, parsed = page(http, path)
        no_raw_markup(path, source, parsed)
        rows = {attrs.get("data-id") for tag, attrs in parsed.tags if tag == "tr"}
        prefix = "dead" if path.endswith("dead") else "later"
        for job_id in IDS:
            assert f"{prefix}{job_id}" in rows, (path, job_id)  # the id, as an attribute
            shows(path, source, parsed, f"{prefix}{job_id}")  # and as the link's text
            assert f"Delete job {prefix}{job_id}?" in parsed.values()  # the confirm question
        for value in HOSTILE:
            shows(path, source, parsed, value)  # in the payloads' previews or the errors
    for n, job_id in enumerate(IDS):
        for name in (f"later{job_id}", f"dead{job_id}"):
            path = f"/ui/job?topic=orders&id={quote(name, safe='')}"
            source, parsed = page(http, path)
            no_raw_markup(path, source, parsed)
            shows(path, source, parsed, name)
            shows(path, source, parsed, HOSTILE[n])  # payload or error
        missing = f"/ui/job?topic=orders&id={quote('gone' + job_id, safe='')}"
        source, parsed = page(http, missing)
        no_raw_markup(missing, source, parsed)
        shows(missing, source, parsed, f"gone{job_id}")
        assert f"job?topic=orders&id={quote('gone' + job_id, safe='')}" in parsed.values()


def test_hostile_ids_in_the_actions_answers(http: httpx.Client, queue: chronoq.Queue) -> None:
    put_hostile(queue)
    for job_id in IDS:
        for action, name in (("run-now", f"later{job_id}"), ("requeue", f"dead{job_id}")):
            path = f"/ui/topics/orders/jobs/{quote(name, safe='')}/{action}"
            source, parsed = page(http, path, "POST")
            no_raw_markup(path, source, parsed)
            shows(path, source, parsed, name)
        gone = f"/ui/topics/orders/jobs/{quote('gone' + job_id, safe='')}/delete"
        source, parsed = page(http, gone, "POST")
        no_raw_markup(gone, source, parsed)
        shows(gone, source, parsed, f"gone{job_id} was already gone.")


def test_the_pages_that_show_no_user_value_stay_clean(
    http: httpx.Client, queue: chronoq.Queue
) -> None:
    """The topics table, a topic's panel and its forecast show topics,
    counts and times only; the page echoes a topic from its link only when
    it is a valid one."""
    put_hostile(queue)
    for path in (
        "/ui/topics",
        "/ui/topics/orders",
        "/ui/topics/orders/summary",
        "/ui/topics/orders/forecast",
    ):
        source, parsed = page(http, path)
        no_raw_markup(path, source, parsed)
    for topic in HOSTILE:
        path = f"/ui/?topic={quote(topic, safe='')}"
        source, parsed = page(http, path)
        no_raw_markup(path, source, parsed)
        assert 'value=""' in source and 'hx-get="topics/' not in source, path
        bad = http.get(f"/ui/job?topic={quote(topic, safe='')}&id=x")
        assert bad.status_code == 400 and bad.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    "source",
    [
        f"<p>{SCRIPT}</p>",  # a raw tag
        f'<p data-x="{BREAKOUT}">x</p>',  # an attribute broken out of
        "<p>49</p>",  # template syntax evaluated
    ],
)
def test_the_checks_catch_what_escaping_prevents(source: str) -> None:
    """The checks above fail on markup that left a value raw or evaluated it."""
    value = next(v for v in HOSTILE if v in source) if "49" not in source else TEMPLATE
    with pytest.raises(AssertionError):
        parsed = Parsed(source)
        no_raw_markup("raw", source, parsed)
        shows("raw", source, parsed, value)


def test_the_lag_bars_name_their_unit_once() -> None:
    from chronoq.server.ui.charts import lag_histogram
    from chronoq.server.ui.templates import _ENV

    histogram = _ENV.get_template("charts.svg").module.histogram  # type: ignore[attr-defined]
    svg = str(histogram(lag_histogram([5, 700, 1500, 20_000])))
    titles = re.findall(r"<g><title>([^<]*)</title>", svg)
    assert titles and all(":" in title for title in titles)
    assert not [title for title in titles if "s ms" in title]  # "0.5–1s", not "0.5–1s ms"
    assert any(title.endswith(" ms: 1") for title in titles)
