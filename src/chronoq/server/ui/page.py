"""The page at /ui/: a shell with no data in it, so it loads without a
token; htmx then fills it with fragments, each request carrying the token
that the user pasted (kept in sessionStorage by dashboard.js)."""

from __future__ import annotations

from chronoq.errors import InvalidInput
from chronoq.job import validate_topic
from chronoq.server.ui.assets import Assets
from chronoq.server.ui.board import Board
from chronoq.server.ui.fragments import html_reply
from chronoq.server.ui.markup import Html, render, segment
from chronoq.server.ui.views import LOAD
from chronoq.server.web.routing import Call, Reply

__all__ = ["Page"]

# htmx settings: no inline style (the CSP forbids it), no eval, no history
# snapshots (they would copy payloads into localStorage)
_HTMX_CONFIG = (
    '{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,'
    '"historyEnabled":false,"historyCacheSize":0,"selfRequestsOnly":true}'
)

_SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content="{htmx_config}">
<title>chronoq dashboard</title>
<link rel="stylesheet" href="{css}">
<script src="{htmx}" defer></script>
<script src="{js}" defer></script>
</head>
<body data-auth="{auth}">
<header><h1>chronoq</h1><span class="store">{store}</span>{mode}
<a class="docs-link" href="../docs">API reference</a>{token}</header>
<div id="problem" role="alert" hidden></div>
<div id="flash" role="status" aria-live="polite"></div>
<main>
<section class="panel"><h2>Topics</h2>
<div id="topics" hx-get="topics" hx-trigger="load, every 2s, chronoq-changed from:body"
 hx-swap="outerHTML">
<p class="empty">Loading…</p></div></section>
<section class="panel"><h2>Find a job</h2>
<form id="lookup" hx-get="job" hx-target="#job" hx-swap="innerHTML">
<input name="topic" placeholder="topic" required value="{topic}" aria-label="topic">
<input name="id" placeholder="job id" required aria-label="job id">
<button type="submit">Look up</button></form>
<div id="job"></div></section>
<section class="panel" id="detail">{detail}</section>
</main></body></html>
"""

_TOKEN_FORM = """<form id="token-form" autocomplete="off">
<input id="token" type="password" placeholder="paste a token" aria-label="token">
<button type="submit">Use token</button>
<button type="button" id="forget-token">Forget</button>
<span id="token-state"></span></form>"""

_NO_TOPIC = '<p class="empty">Pick a topic above to see its dead letters and delayed jobs.</p>'


class Page:
    def __init__(self, board: Board, assets: Assets) -> None:
        self.board = board
        self.assets = assets

    async def shell(self, call: Call) -> Reply:
        settings = self.board.settings
        topic = call.query.get("topic", "")
        try:
            topic = validate_topic(topic) if topic else ""
        except InvalidInput:  # a bad link: show the page without a topic
            topic = ""
        detail = (
            render(
                '<div hx-get="topics/{t}" hx-trigger="{load}" hx-swap="outerHTML"></div>',
                t=segment(topic),
                load=LOAD,
            )
            if topic
            else Html(_NO_TOPIC)
        )
        mode = render('<span class="badge badge-read-only">read-only</span>')
        markup = render(
            _SHELL,
            htmx_config=_HTMX_CONFIG,
            css=self.assets.href("dashboard.css"),
            htmx=self.assets.href("htmx.min.js"),
            js=self.assets.href("dashboard.js"),
            auth="on" if settings.auth.enabled else "off",
            store=settings.shown_store(self.board.queue.url),
            mode=mode if settings.read_only_ui else "",
            token=Html(_TOKEN_FORM) if settings.auth.enabled else "",
            topic=topic,
            detail=detail,
        )
        return html_reply(markup)
