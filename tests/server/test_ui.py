"""The dashboard at /ui/ over real HTTP, on each backend: every fragment and
every action, the lists' pages, auth on and off, read-only mode, and the
escaping of what users control (topics, ids, payloads, errors)."""

from __future__ import annotations

import asyncio
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from urllib.parse import quote

import httpx
import pytest

import chronoq
import chronoq.aio
from chronoq.server import Action, Auth, ServerSettings, Token, hash_token
from chronoq.server.ui import activity

from .live import LiveServer

ACT = {"hx-request": "true"}  # what htmx sends with every request
XSS = "<script>alert(1)</script>"


def tree(text: str) -> ET.Element:
    """A fragment as an element tree: it must be well-formed, so that a
    stray ``<`` from an unescaped value fails the parse."""
    return ET.fromstring(f"<root>{text}</root>")


def texts(element: ET.Element) -> str:
    return " ".join(" ".join(element.itertext()).split())


def row(doc: ET.Element, attr: str, value: str) -> ET.Element:
    found = [tr for tr in doc.iter("tr") if tr.attrib.get(attr) == value]
    assert len(found) == 1, f"{len(found)} rows with {attr}={value!r}"
    return found[0]


def fields(doc: ET.Element) -> dict[str, str]:
    """The ``<dl>`` of a job view."""
    terms = [texts(dt) for dt in doc.iter("dt")]
    return dict(zip(terms, [texts(dd) for dd in doc.iter("dd")], strict=True))


def posts(element: ET.Element) -> list[str]:
    return [b.attrib["hx-post"] for b in element.iter("button") if "hx-post" in b.attrib]


def get(http: httpx.Client, path: str, **headers: str) -> ET.Element:
    answer = http.get(path, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    return tree(answer.text)


def dead_job(
    queue: chronoq.Queue, topic: str, job_id: str, error: str, payload: object = 1
) -> None:
    queue.put(topic, payload, id=job_id, priority=1000)  # reserved before any other
    [job] = queue.reserve(topic)
    assert job.id == job_id
    queue.bury(job, error=error)


# -- the page and its files -------------------------------------------------------------


def test_the_page_loads_without_a_token_and_links_its_files(http: httpx.Client) -> None:
    moved = http.get("/ui")
    assert moved.status_code == 308 and moved.headers["location"] == "ui/"  # relative: proxies
    page = http.get("/ui/")
    assert page.status_code == 200 and "<title>chronoq dashboard</title>" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["cache-control"] == "no-store"
    assert 'id="token-form"' not in page.text  # auth is off
    for name, kind in [
        ("htmx.min.js", "text/javascript"),
        ("dashboard.js", "text/javascript"),
        ("dashboard.css", "text/css"),
    ]:
        href = re.search(rf'"(static/{re.escape(name)}\?v=[0-9a-f]+)"', page.text)
        assert href is not None, name
        asset = http.get(f"/ui/{href.group(1)}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        assert "max-age" in asset.headers["cache-control"]
    assert http.get("/ui/static/htmx.min.js").text.startswith("var htmx=")
    missing = http.get("/ui/static/secrets.txt")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert http.get("/ui/nowhere").status_code == 404


def test_the_page_preselects_a_topic(http: httpx.Client) -> None:
    assert 'hx-get="topics/orders.eu"' in http.get("/ui/?topic=orders.eu").text
    assert 'hx-get="topics/' not in http.get("/ui/?topic=bad%20topic").text


# -- reads ---------------------------------------------------------------------------------


def test_topics_table_counts_states(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", {"n": 1}, id="later", delay=600)
    queue.put("orders", {"n": 2}, id="now")
    queue.put("orders", {"n": 3}, id="held")
    queue.reserve("orders", count=1)  # "now" or "held": both due at once
    dead_job(queue, "orders", "broken", "boom")
    queue.pause("mail")
    doc = get(http, "/ui/topics")
    root = doc.find("div")
    assert root is not None and root.attrib["hx-trigger"].startswith("every 2s")
    orders = row(doc, "data-topic", "orders")
    cells = [texts(td) for td in orders.findall("td")]
    assert cells[:6] == ["orders", "1", "1", "1", "1", "active"]
    assert posts(orders) == ["topics/orders/pause"]
    mail = row(doc, "data-topic", "mail")
    assert texts(mail.findall("td")[5]) == "paused"
    assert posts(mail) == ["topics/mail/resume"]


def test_throughput_and_lag_come_from_the_event_log(
    http: httpx.Client, queue: chronoq.Queue
) -> None:
    for n in range(6):
        queue.put("busy", n, id=f"j{n}")
    jobs = queue.reserve("busy", count=4)
    queue.ack_many(jobs[:3])
    doc = get(http, "/ui/topics")
    spark = row(doc, "data-topic", "busy").find(".//svg[@class='spark']")
    assert spark is not None
    assert "6 put, 3 acked" in spark.attrib["aria-label"]
    assert len(spark.findall("polyline")) == 2
    lag = doc.find(".//div[@class='lag']")
    assert lag is not None and "the last 4 reserves" in texts(lag)
    bars = lag.findall(".//rect[@class='bar']")
    assert len(bars) == 13
    counts = [t.text for t in lag.findall(".//text[@class='count']")]
    assert sum(int(c) for c in counts if c) == 4
    # later events are read from where the last look stopped (at most once a second)
    queue.ack_many(jobs[3:])
    for n in range(6, 9):
        queue.put("busy", n, id=f"j{n}")
    deadline = time.monotonic() + 5
    while True:
        spark = row(get(http, "/ui/topics"), "data-topic", "busy").find(".//svg")
        assert spark is not None
        if "9 put, 4 acked" in spark.attrib["aria-label"]:
            break
        assert time.monotonic() < deadline, spark.attrib["aria-label"]
        time.sleep(0.1)


def test_topic_panel_and_summary(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", 1, id="a", delay=60)
    queue.reserve("orders")  # nothing due: no reserve event
    queue.put("orders", 2, id="b")
    queue.reserve("orders")
    panel = get(http, "/ui/topics/orders")
    summary = panel.find(".//div[@id='summary']")
    assert summary is not None and summary.attrib["hx-get"] == "topics/orders/summary"
    assert "every 2s" in summary.attrib["hx-trigger"]
    loads = [
        d.attrib["hx-get"] for d in panel.iter("div") if "load" in d.attrib.get("hx-trigger", "")
    ]
    assert loads == [
        "topics/orders/flow",
        "topics/orders/forecast",
        "topics/orders/dead",
        "topics/orders/delayed",
    ]
    counts = {
        texts(c.find("span")): texts(c.find("b"))  # type: ignore[arg-type]
        for c in panel.iter("div")
        if c.attrib.get("class") == "count"
    }
    assert counts == {"delayed": "1", "ready": "0", "reserved": "1", "dead": "0"}
    summary_doc = get(http, "/ui/topics/orders/summary")
    assert "the last reserve of this topic" in texts(summary_doc)
    assert posts(summary_doc) == ["topics/orders/pause"]


def test_forecast_chart_of_the_next_day(http: httpx.Client, queue: chronoq.Queue) -> None:
    for n, hours in enumerate((0.4, 0.6, 1.5, 23.5, 30)):
        queue.put("orders.eu", n, id=f"j{n}", delay=hours * 3600)
    queue.put("orders.eu", "now", id="ready")  # due: not forecast
    doc = get(http, "/ui/topics/orders.eu/forecast")
    section = doc.find("section")
    assert section is not None and section.attrib["hx-get"] == "topics/orders.eu/forecast"
    assert section.attrib["hx-trigger"].startswith("every 60s")
    assert "Due in the next 24 hours (4)" in texts(section)
    assert "1 more due after" in texts(section)
    svg = section.find("svg")
    assert svg is not None and svg.attrib["role"] == "img"
    assert svg.attrib["aria-label"].endswith("UTC: 4 in all")
    bars = svg.findall("g")
    assert len(bars) == 24
    counts = [int(bar.findtext("text[@class='count']") or 0) for bar in bars]
    assert counts == [2, 1] + [0] * 21 + [1]
    titles = [bar.findtext("title") or "" for bar in bars]
    span = r"^\d{4}-\d\d-\d\d (\d\d):(\d\d)–(\d\d):(\d\d) UTC: "
    assert re.match(span + "2 jobs due$", titles[0]) and re.match(span + "1 job due$", titles[1])
    assert re.match(span + "0 jobs due$", titles[2])
    starts = [re.match(span, title) for title in titles]
    hours = [int(found.group(1)) for found in starts if found]
    assert hours == [(hours[0] + i) % 24 for i in range(24)]  # hour after hour
    heights = [int(rect.attrib["height"]) for rect in svg.iter("rect")]
    assert heights[0] == max(heights) > heights[1] > heights[2] == 0
    labels = [bar.findtext("text[@class='axis']") for bar in bars]
    assert [label is not None for label in labels] == [i % 3 == 0 for i in range(24)]


def test_job_lookup_shows_every_field(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", {"order": 42}, id="order-42", max_attempts=3, priority=7, ttr=90)
    [job] = queue.reserve("orders")
    queue.nack(job, delay=300, error="bank timed out")
    doc = get(http, "/ui/job?topic=orders&id=order-42")
    view = doc.find("div")
    assert view is not None and view.attrib["id"] == "job-view"
    assert view.attrib["hx-trigger"] == "chronoq-changed from:body"
    shown = fields(doc)
    assert shown["state"] == "delayed"
    assert shown["attempts"] == "1 of 3"
    assert shown["priority"] == "7" and shown["ttr"] == "90 s"
    assert shown["last error"] == "bank timed out"
    assert re.search(r"Z \(in (4m 5\ds|5m 00s)\)$", shown["due"]), shown["due"]
    assert shown["deadline"] == "–"
    payload = doc.find(".//pre[@class='payload']")
    assert payload is not None and '"order": 42' in (payload.text or "")
    assert posts(doc) == [
        "topics/orders/jobs/order-42/run-now",
        "topics/orders/jobs/order-42/delete",
    ]
    queue.reschedule("orders", "order-42", delay=0)
    queue.reserve("orders", ttr=330)
    leased = fields(get(http, "/ui/job?topic=orders&id=order-42"))
    assert leased["state"] == "reserved" and "(in 5" in leased["deadline"]


def test_job_lookup_of_a_missing_or_bad_job(http: httpx.Client) -> None:
    doc = get(http, "/ui/job?topic=orders&id=nope")
    assert "No job nope in topic orders" in texts(doc)
    bad = http.get("/ui/job?topic=bad topic&id=x")
    assert bad.status_code == 400 and "invalid topic" in bad.json()["error"]["message"]
    assert http.get("/ui/job?topic=orders").status_code == 400


def test_dead_letters_page_by_page(http: httpx.Client, queue: chronoq.Queue) -> None:
    for n in range(30):
        queue.put("orders", n, id=f"d{n:02d}", max_attempts=1)
    for job in queue.reserve("orders", count=30):
        queue.bury(job, error=f"error {job.id}")
    first = get(http, "/ui/topics/orders/dead")
    section = first.find("section")
    assert section is not None and section.attrib["class"] == "pageable"
    rows = first.findall(".//tbody/tr")
    assert len(rows) == 25 and "of 30" in texts(first)
    assert "topics/orders/dead/requeue" in posts(first)  # requeue all
    pages = [b.attrib["hx-get"] for b in first.iter("button") if "hx-get" in b.attrib]
    assert pages == ["topics/orders/dead?offset=25"]
    second = get(http, "/ui/" + pages[0])
    more = second.findall(".//tbody/tr")
    assert len(more) == 5
    ids = [r.attrib["data-id"] for r in rows + more]
    assert sorted(ids) == [f"d{n:02d}" for n in range(30)]
    assert texts(row(second, "data-id", ids[-1]).findall("td")[2]) == f"error {ids[-1]}"
    back = [b.attrib["hx-get"] for b in second.iter("button") if "hx-get" in b.attrib]
    assert back == ["topics/orders/dead", "topics/orders/dead"]  # first, previous
    assert http.get("/ui/topics/orders/dead?offset=x").status_code == 400


def test_delayed_jobs_page_by_page(http: httpx.Client, queue: chronoq.Queue) -> None:
    # more than Redis keeps in a small (listpack) hash, which HSCAN returns whole
    queue.put_many(
        "orders", [chronoq.Job(n, delay=600 + n, id=f"later-{n:03d}") for n in range(700)]
    )
    queue.put("orders", "due", id="ready-1")
    seen: list[str] = []
    pages = 0
    path: str | None = "/ui/topics/orders/delayed"
    while path is not None:
        doc = get(http, path)
        due = [r.attrib["data-id"] for r in doc.findall(".//tbody/tr")]
        seen += due
        pages += 1
        assert len(due) < 25 + 500 and pages <= 30
        nexts = [b.attrib["hx-get"] for b in doc.iter("button") if "next" in texts(b)]
        path = "/ui/" + nexts[0] if nexts else None
    assert sorted(seen) == [f"later-{n:03d}" for n in range(700)] and pages > 2
    first = get(http, "/ui/topics/orders/delayed")
    one = first.findall(".//tbody/tr")[0]
    job_id = one.attrib["data-id"]
    assert posts(one) == [
        f"topics/orders/jobs/{job_id}/run-now",
        f"topics/orders/jobs/{job_id}/delete",
    ]
    shown = re.fullmatch(r"in (\d+)m (\d\d)s", texts(one.findall("td")[1]))
    assert shown is not None, texts(one.findall("td")[1])
    shown_s = int(shown.group(1)) * 60 + int(shown.group(2))
    assert 0 <= 600 + int(job_id.removeprefix("later-")) - shown_s <= 3
    assert http.get("/ui/topics/orders/delayed?after=nine").status_code == 400


# -- actions -----------------------------------------------------------------------------------


def act(http: httpx.Client, path: str) -> httpx.Response:
    answer = http.post(path, headers=ACT)
    assert answer.status_code == 200, answer.text
    assert answer.headers["hx-trigger"] == '{"chronoq-changed":{"target":"body"}}'
    return answer


def test_every_action(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", 1, id="later", delay=600)
    dead_job(queue, "orders", "broken", "boom")
    dead_job(queue, "orders", "broken2", "boom")
    dead_job(queue, "orders", "broken3", "boom")
    assert "Paused orders" in act(http, "/ui/topics/orders/pause").text
    assert queue.stats("orders")["paused"] is True
    assert "Resumed" in act(http, "/ui/topics/orders/resume").text
    assert queue.stats("orders")["paused"] is False
    assert "due now" in act(http, "/ui/topics/orders/jobs/later/run-now").text
    info = queue.get("orders", "later")
    assert info is not None and info.state == "ready"
    assert "Requeued broken" in act(http, "/ui/topics/orders/jobs/broken/requeue").text
    info = queue.get("orders", "broken")
    assert info is not None and info.state == "ready" and info.attempts == 0
    assert "Requeued 2 dead jobs" in act(http, "/ui/topics/orders/dead/requeue").text
    assert queue.stats("orders")["dead"] == 0
    assert "Deleted later" in act(http, "/ui/topics/orders/jobs/later/delete").text
    assert queue.get("orders", "later") is None


def test_an_action_with_nothing_to_do_warns(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", 1, id="ready")
    assert 'class="warn"' in act(http, "/ui/topics/orders/jobs/gone/delete").text
    assert 'class="warn"' in act(http, "/ui/topics/orders/jobs/ready/requeue").text
    queue.reserve("orders")
    assert "reserved, dead or gone" in act(http, "/ui/topics/orders/jobs/ready/run-now").text


def test_actions_need_post_from_the_page(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", 1, id="j")
    no_header = http.post("/ui/topics/orders/pause")
    assert no_header.status_code == 403 and "HX-Request" in no_header.json()["error"]["message"]
    assert http.get("/ui/topics/orders/pause").status_code == 405
    assert http.get("/ui/topics/orders/jobs/j/delete").status_code == 405
    assert queue.stats("orders")["paused"] is False and queue.get("orders", "j") is not None


# -- escaping ---------------------------------------------------------------------------------


def test_user_values_are_escaped_everywhere(http: httpx.Client, queue: chronoq.Queue) -> None:
    nasty_id = "<q>&'\"x"
    queue.put("orders", {"html": XSS}, id=nasty_id, delay=600)
    dead_job(queue, "orders", "d<i>", f"{XSS}<img src=x onerror=alert(2)>", payload=XSS)
    lookups = [
        f"/ui/job?topic=orders&id={quote(nasty_id, safe='')}",
        "/ui/job?topic=orders&id=d%3Ci%3E",
    ]
    for path in [
        "/ui/topics",
        "/ui/topics/orders",
        "/ui/topics/orders/dead",
        "/ui/topics/orders/delayed",
        "/ui/topics/orders/forecast",
        *lookups,
    ]:
        answer = http.get(path)
        assert answer.status_code == 200, (path, answer.text)
        assert (
            "<script" not in answer.text and "<img" not in answer.text and "<q>" not in answer.text
        )
        tree(answer.text)  # well-formed: nothing unescaped broke the markup
    delayed = get(http, "/ui/topics/orders/delayed")
    assert row(delayed, "data-id", nasty_id) is not None  # the id round-trips as text
    assert XSS in texts(delayed)
    dead = get(http, "/ui/topics/orders/dead")
    cells = [texts(td) for td in row(dead, "data-id", "d<i>").findall("td")]
    assert cells[2] == f"{XSS}<img src=x onerror=alert(2)>"
    job = get(http, lookups[0])
    payload = job.find(".//pre")
    assert payload is not None and XSS in (payload.text or "")
    # the action links quote the id as one path segment, and work
    [run_now, _] = posts(row(delayed, "data-id", nasty_id))
    assert run_now == "topics/orders/jobs/%3Cq%3E%26%27%22x/run-now"
    act(http, "/ui/" + run_now)
    info = queue.get("orders", nasty_id)
    assert info is not None and info.state == "ready"


# -- read-only and auth ---------------------------------------------------------------------------


def test_read_only_shows_and_refuses(
    serve: Callable[..., LiveServer], queue: chronoq.Queue
) -> None:
    server = serve(ServerSettings(read_only_ui=True))
    queue.put("orders", 1, id="later", delay=600)
    dead_job(queue, "orders", "broken", "boom")
    with httpx.Client(base_url=server.url) as http:
        assert "read-only" in http.get("/ui/").text
        for path in [
            "/ui/topics",
            "/ui/topics/orders",
            "/ui/topics/orders/dead",
            "/ui/topics/orders/delayed",
            "/ui/job?topic=orders&id=later",
        ]:
            doc = get(http, path)
            assert posts(doc) == [], path
        for path in [
            "/ui/topics/orders/pause",
            "/ui/topics/orders/dead/requeue",
            "/ui/topics/orders/jobs/broken/requeue",
            "/ui/topics/orders/jobs/later/run-now",
            "/ui/topics/orders/jobs/later/delete",
        ]:
            refused = http.post(path, headers=ACT)
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "read_only"
    assert queue.stats("orders")["paused"] is False
    assert queue.stats("orders")["dead"] == 1 and queue.stats("orders")["delayed"] == 1


READ, ADMIN, ORDERS = "read-secret", "admin-secret", "orders-secret"


def _secured() -> ServerSettings:
    return ServerSettings(
        auth=Auth(
            [
                Token("reader", hash_token(READ), ("*",), frozenset({Action.READ})),
                Token("admin", hash_token(ADMIN), ("*",), frozenset({Action.READ, Action.ADMIN})),
                Token("orders", hash_token(ORDERS), ("orders.*",), frozenset(Action)),
            ]
        )
    )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_auth_reads_need_read_and_actions_admin(
    serve: Callable[..., LiveServer], queue: chronoq.Queue
) -> None:
    server = serve(_secured())
    queue.put("orders.eu", 1, id="later", delay=600)
    queue.put("billing", 1, id="invoice", delay=600)
    with httpx.Client(base_url=server.url) as http:
        page = http.get("/ui/")
        assert page.status_code == 200 and 'id="token-form"' in page.text
        assert http.get("/ui/static/dashboard.js").status_code == 200
        anonymous = http.get("/ui/topics")
        assert anonymous.status_code == 401 and "www-authenticate" in anonymous.headers
        assert http.get("/ui/topics", headers=bearer("wrong")).status_code == 401
        # a read token sees everything and is offered no action
        doc = get(http, "/ui/topics", **bearer(READ))
        assert {r.attrib["data-topic"] for r in doc.iter("tr") if "data-topic" in r.attrib} == {
            "billing",
            "orders.eu",
        }
        assert posts(doc) == []
        assert posts(get(http, "/ui/topics/orders.eu/delayed", **bearer(READ))) == []
        refused = http.post("/ui/topics/orders.eu/pause", headers=ACT | bearer(READ))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        assert http.post("/ui/topics/orders.eu/pause", headers=ACT).status_code == 401
        # an admin token is offered the actions, and they work
        assert posts(get(http, "/ui/topics", **bearer(ADMIN)))
        done = http.post("/ui/topics/orders.eu/pause", headers=ACT | bearer(ADMIN))
        assert done.status_code == 200 and queue.stats("orders.eu")["paused"] is True
        # a token for orders.* sees only those topics, and nothing else by id
        mine = get(http, "/ui/topics", **bearer(ORDERS))
        assert [r.attrib["data-topic"] for r in mine.iter("tr") if "data-topic" in r.attrib] == [
            "orders.eu"
        ]
        for path in ["/ui/topics/billing", "/ui/topics/billing/dead", "/ui/job?topic=billing&id=x"]:
            assert http.get(path, headers=bearer(ORDERS)).status_code == 403, path
        elsewhere = http.post(
            "/ui/topics/billing/jobs/invoice/delete", headers=ACT | bearer(ORDERS)
        )
        assert elsewhere.status_code == 403 and queue.get("billing", "invoice") is not None
        assert get(http, "/ui/job?topic=orders.eu&id=later", **bearer(ORDERS)) is not None


# -- the topics list pages -----------------------------------------------------------------------


def test_topics_page_by_page(http: httpx.Client, queue: chronoq.Queue) -> None:
    for n in range(30):
        queue.put(f"t{n:02d}", n)
    first = get(http, "/ui/topics")
    names = [r.attrib["data-topic"] for r in first.iter("tr") if "data-topic" in r.attrib]
    assert names == [f"t{n:02d}" for n in range(25)]
    assert "topics 1–25 of 30" in texts(first)
    nexts = [b.attrib["hx-get"] for b in first.iter("button") if "next" in texts(b)]
    assert nexts == ["topics?offset=25"]
    second = get(http, "/ui/" + nexts[0])
    root = second.find("div")
    assert root is not None and root.attrib["hx-get"] == "topics?offset=25"  # polls its own page
    names = [r.attrib["data-topic"] for r in second.iter("tr") if "data-topic" in r.attrib]
    assert names == [f"t{n:02d}" for n in range(25, 30)]


# -- the event log's tail -----------------------------------------------------------------------


def test_the_log_tail_backfills_follows_and_skips_ahead(
    queue: chronoq.Queue, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """A first look reads back BACKFILL events; later looks read only what
    is new; a tail too far behind jumps to the last BACKFILL events rather
    than read without end."""
    monkeypatch.setattr(activity, "BACKFILL", 5)
    monkeypatch.setattr(activity, "_REFRESH_S", 0.0)
    loop = asyncio.new_event_loop()
    aqueue = chronoq.aio.AsyncQueue.from_queue(queue)
    tail = activity.Activity(aqueue)
    request.addfinalizer(loop.close)
    request.addfinalizer(lambda: loop.run_until_complete(aqueue.close()))

    def puts() -> int:
        return sum(loop.run_until_complete(tail.views(["orders"]))["orders"].puts)

    for n in range(20):
        queue.put("orders", n)
    assert puts() == 5
    for n in range(3):
        queue.put("orders", n)
    assert puts() == 8
    monkeypatch.setattr(activity, "_PAGE", 2)
    monkeypatch.setattr(activity, "_PAGES", 1)
    for n in range(20):
        queue.put("orders", n)
    first = puts()
    assert 8 < first < 28
    counts = [puts() for _ in range(8)]
    assert counts[-1] == first + 5 and counts == sorted(counts)
