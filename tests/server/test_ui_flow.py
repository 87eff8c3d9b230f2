"""A topic's limits and groups on the dashboard (docs/flow.md), over real
HTTP on each backend: the panel with limits set and groups present, the
short lines of a topic with neither, pausing and resuming a group with the
panel's own buttons, and the admin token and read-only mode that guard
them; and the escaping of the panel's values."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from types import MappingProxyType

import httpx

import chronoq
from chronoq.limits import Limits, Rule
from chronoq.server import ServerSettings
from chronoq.server.ui.flow import GROUP_ROWS, flow_view

from .live import LiveServer
from .test_ui import ACT, ADMIN, ORDERS, READ, _secured, act, bearer, get, posts, row, texts
from .test_ui_escaping import BREAKOUT, SCRIPT, TEMPLATE, Parsed, no_raw_markup, shows


def groups_of(queue: chronoq.Queue, topic: str) -> dict[str | None, dict[str, object]]:
    return {g["group"]: g for g in queue.stats(topic, groups=True)["groups"]}


def cells(doc: ET.Element, attr: str, value: str) -> list[str]:
    return [texts(td) for td in row(doc, attr, value).findall("td")]


def flow_jobs(queue: chronoq.Queue) -> None:
    """Three groups with due jobs, the default group's, and a paused group
    with none; limits at every level."""
    queue.set_limits("orders", rate=200, burst=20, concurrency=50, group_rate=5)
    queue.set_limits("orders", group_concurrency=2)
    queue.set_limits("orders", group="tenant-42", rate=50, concurrency=10)
    queue.set_limits("orders", group="tenant-7", per=60)
    for n in range(4):
        queue.put("orders", n, group="tenant-42")
    for n in range(3):
        queue.put("orders", n)
    queue.put("orders", 1, group="tenant-7")
    queue.put("orders", 1, group="tenant-8", delay=600)  # no due job: not listed
    queue.pause("orders", group="tenant-9")


def test_the_panel_shows_limits_and_groups(http: httpx.Client, queue: chronoq.Queue) -> None:
    flow_jobs(queue)
    panel = get(http, "/ui/topics/orders")
    loads = [
        d.attrib["hx-get"] for d in panel.iter("div") if "load" in d.attrib.get("hx-trigger", "")
    ]
    assert "topics/orders/flow" in loads
    doc = get(http, "/ui/topics/orders/flow")
    section = doc.find("section")
    assert section is not None and section.attrib["hx-get"] == "topics/orders/flow"
    assert section.attrib["hx-trigger"] == "every 10s, chronoq-changed from:body"
    # what each row is held to; (n): not its own, but the default's or implied
    assert cells(doc, "data-limits", "topic") == ["topic", "200", "(1)", "20", "50"]
    assert cells(doc, "data-limits", "default") == ["group default", "5", "(1)", "(5)", "2"]
    assert cells(doc, "data-limits", "tenant-42") == ["group tenant-42", "50", "(1)", "(50)", "10"]
    assert cells(doc, "data-limits", "tenant-7") == ["group tenant-7", "(5)", "60", "(5)", "(2)"]
    shown = [r.attrib["data-group"] for r in doc.iter("tr") if "data-group" in r.attrib]
    assert shown == ["tenant-42", "", "tenant-7", "tenant-9"]  # largest backlog first
    assert cells(doc, "data-group", "tenant-42")[:4] == ["tenant-42", "4", "0", "active"]
    assert cells(doc, "data-group", "")[:4] == ["(default)", "3", "0", "active"]
    assert cells(doc, "data-group", "tenant-9")[:4] == ["tenant-9", "0", "0", "paused"]
    # one button per named group; the default group pauses only with the topic
    assert posts(doc) == [
        "topics/orders/groups/tenant-42/pause",
        "topics/orders/groups/tenant-7/pause",
        "topics/orders/groups/tenant-9/resume",
    ]
    assert len(queue.reserve("orders")) == 1
    leased = get(http, "/ui/topics/orders/flow")
    reserved = sum(int(cells(leased, "data-group", g)[2]) for g in ("tenant-42", "", "tenant-7"))
    assert reserved == 1


def test_a_topic_without_limits_or_groups(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("mail", 1)  # in the default group: no group is named
    queue.put("mail", 2, group="later", delay=600)
    doc = get(http, "/ui/topics/mail/flow")
    assert doc.find(".//table") is None
    empty = [texts(p) for p in doc.iter("p") if p.attrib.get("class") == "empty"]
    assert empty == ["No limits.", "No groups: no due job names one, and none is paused."]
    assert get(http, "/ui/topics/nothing.here/flow").find(".//table") is None


def test_pause_and_resume_a_group_from_the_panel(http: httpx.Client, queue: chronoq.Queue) -> None:
    queue.put("orders", "a", id="a", group="tenant-1")
    queue.put("orders", "b", id="b", group="tenant-2")
    [pause, _] = posts(get(http, "/ui/topics/orders/flow"))
    assert pause == "topics/orders/groups/tenant-1/pause"
    assert "Paused group tenant-1 of orders" in act(http, "/ui/" + pause).text
    assert groups_of(queue, "orders")["tenant-1"]["paused"] is True
    assert groups_of(queue, "orders")["tenant-2"]["paused"] is False
    assert [job.id for job in queue.reserve("orders", count=2)] == ["b"]  # the others flow on
    doc = get(http, "/ui/topics/orders/flow")
    assert cells(doc, "data-group", "tenant-1")[3] == "paused"
    [resume] = posts(row(doc, "data-group", "tenant-1"))
    assert resume == "topics/orders/groups/tenant-1/resume"
    assert "Resumed group tenant-1 of orders" in act(http, "/ui/" + resume).text
    assert groups_of(queue, "orders")["tenant-1"]["paused"] is False
    assert [job.id for job in queue.reserve("orders")] == ["a"]
    bad = http.post("/ui/topics/orders/groups/no%20such/pause", headers=ACT)
    assert bad.status_code == 400 and "invalid group" in bad.json()["error"]["message"]


def test_group_actions_need_an_admin_token(
    serve: Callable[..., LiveServer], queue: chronoq.Queue
) -> None:
    server = serve(_secured())
    queue.put("orders.eu", 1, group="tenant-1")
    queue.put("billing", 1, group="tenant-1")
    pause = "/ui/topics/orders.eu/groups/tenant-1/pause"
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/ui/topics/orders.eu/flow").status_code == 401
        # a read token sees the panel, is offered no button, and is refused
        doc = get(http, "/ui/topics/orders.eu/flow", **bearer(READ))
        assert cells(doc, "data-group", "tenant-1")[:4] == ["tenant-1", "1", "0", "active"]
        assert posts(doc) == []
        assert http.post(pause, headers=ACT).status_code == 401
        refused = http.post(pause, headers=ACT | bearer(READ))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        assert groups_of(queue, "orders.eu")["tenant-1"]["paused"] is False
        # an admin token is offered the button, and it works
        assert posts(get(http, "/ui/topics/orders.eu/flow", **bearer(ADMIN))) == [pause[4:]]
        done = http.post(pause, headers=ACT | bearer(ADMIN))
        assert done.status_code == 200 and "Paused group tenant-1" in done.text
        assert groups_of(queue, "orders.eu")["tenant-1"]["paused"] is True
        # a token for orders.* neither sees nor pauses the groups of billing
        assert http.get("/ui/topics/billing/flow", headers=bearer(ORDERS)).status_code == 403
        elsewhere = "/ui/topics/billing/groups/tenant-1/pause"
        assert http.post(elsewhere, headers=ACT | bearer(ORDERS)).status_code == 403
        assert groups_of(queue, "billing")["tenant-1"]["paused"] is False


def test_read_only_offers_and_takes_no_group_action(
    serve: Callable[..., LiveServer], queue: chronoq.Queue
) -> None:
    server = serve(ServerSettings(read_only_ui=True))
    queue.put("orders", 1, group="tenant-1")
    with httpx.Client(base_url=server.url) as http:
        doc = get(http, "/ui/topics/orders/flow")
        assert cells(doc, "data-group", "tenant-1")[0] == "tenant-1" and posts(doc) == []
        refused = http.post("/ui/topics/orders/groups/tenant-1/pause", headers=ACT)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "read_only"
    assert groups_of(queue, "orders")["tenant-1"]["paused"] is False


def test_many_groups_keep_the_paused_ones(http: httpx.Client, queue: chronoq.Queue) -> None:
    """The panel shows the largest backlogs and every paused group beyond
    them, so that a paused group can be resumed from it."""
    queue.put_many(
        "orders",
        [chronoq.Job(n, group=f"g{g:02d}") for g in range(GROUP_ROWS + 5) for n in range(g + 1)],
    )
    queue.pause("orders", group="g00")  # the smallest backlog: last
    doc = get(http, "/ui/topics/orders/flow")
    shown = [r.attrib["data-group"] for r in doc.iter("tr") if "data-group" in r.attrib]
    assert len(shown) == GROUP_ROWS + 1 and shown[0] == f"g{GROUP_ROWS + 4:02d}"
    assert shown[-1] == "g00" and posts(row(doc, "data-group", "g00"))[0].endswith("/resume")
    assert "4 more groups with smaller backlogs are not shown" in texts(doc)


def test_the_panel_escapes_what_it_shows() -> None:
    """Topics and groups cannot hold markup (their pattern allows letters,
    digits and ``._:-``), so the panel's template is given hostile values
    directly: they come out as text, in cells and in the buttons' paths."""
    hostile = (SCRIPT, BREAKOUT, TEMPLATE)
    limits = Limits(
        "orders",
        Rule(rate=1.5),
        Rule(concurrency=2),
        MappingProxyType({name: Rule(rate=3) for name in hostile}),
    )
    groups = [{"group": name, "ready": 1, "reserved": 0, "paused": False} for name in hostile]
    for topic in (*hostile, "orders"):
        source = flow_view(topic, limits, groups, acts=True)
        parsed = Parsed(source)
        no_raw_markup("flow", source, parsed)
        for name in hostile:
            shows("flow", source, parsed, name)
            shows("flow", source, parsed, f"group {name}")
            assert name in [attrs.get("data-group") for _, attrs in parsed.tags]
        paths = [attrs["hx-post"] for tag, attrs in parsed.tags if "hx-post" in attrs]
        assert len(paths) == 3 and all("<" not in (p or "") and '"' not in (p or "") for p in paths)
