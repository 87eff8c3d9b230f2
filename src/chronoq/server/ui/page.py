"""The page at /ui/: a shell with no data in it, so it loads without a
token; htmx then fills it with fragments, each request carrying the token
that the user pasted (kept in sessionStorage by dashboard.js)."""

from __future__ import annotations

from chronoq.errors import InvalidInput
from chronoq.job import validate_topic
from chronoq.server.ui.assets import Assets
from chronoq.server.ui.board import Board
from chronoq.server.ui.formats import segment
from chronoq.server.ui.fragments import html_reply
from chronoq.server.ui.templates import render
from chronoq.server.web.routing import Call, Reply

__all__ = ["Page"]

# htmx settings: no inline style (the CSP forbids it), no eval, no history
# snapshots (they would copy payloads into localStorage)
_HTMX_CONFIG = (
    '{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,'
    '"historyEnabled":false,"historyCacheSize":0,"selfRequestsOnly":true}'
)


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
        markup = render(
            "page.html",
            htmx_config=_HTMX_CONFIG,
            css=self.assets.href("dashboard.css"),
            htmx=self.assets.href("htmx.min.js"),
            js=self.assets.href("dashboard.js"),
            auth=settings.auth.enabled,
            store=settings.shown_store(self.board.queue.url),
            read_only=settings.read_only_ui,
            topic=topic,
            detail=segment(topic),
        )
        return html_reply(markup)
