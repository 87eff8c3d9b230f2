"""The GET handlers: each reads the queue and answers one HTML fragment,
which htmx puts into the page."""

from __future__ import annotations

import asyncio
import time

from chronoq.job import validate_id, validate_topic
from chronoq.server.auth import Action
from chronoq.server.ui.board import Board
from chronoq.server.ui.flow import flow_view
from chronoq.server.ui.listing import dead_page, offset_arg, scan_state
from chronoq.server.ui.lists import dead_list, delayed_list
from chronoq.server.ui.views import (
    DUE_STEPS,
    Summary,
    forecast_view,
    job_view,
    summary_of,
    topic_detail,
    topic_summary,
    topics_view,
)
from chronoq.server.web.routing import Call, Reply
from chronoq.states import State

__all__ = ["HTML", "Fragments", "html_reply"]

HTML = b"text/html; charset=utf-8"
TOPICS_PAGE = 25


def html_reply(markup: str, *headers: tuple[bytes, bytes]) -> Reply:
    return Reply(200, markup.encode(), content_type=HTML, headers=headers)


class Fragments:
    def __init__(self, board: Board) -> None:
        self.board = board
        self.queue = board.queue

    async def topics(self, call: Call) -> Reply:
        """The topics this token may read, a page of them with their counts."""
        offset = offset_arg(call.query.get("offset"))
        names = [t for t in await self.queue.topics() if self.board.may(call, Action.READ, t)]
        shown = names[offset : offset + TOPICS_PAGE]
        stats = await asyncio.gather(*(self.queue.stats(topic) for topic in shown))
        views = await self.board.activity.views(shown)
        rows = [(topic, s, views[topic]) for topic, s in zip(shown, stats, strict=True)]
        acts = {topic: self.board.may_act(call, topic) for topic in shown}
        return html_reply(topics_view(rows, acts, offset, len(names), TOPICS_PAGE))

    async def _summary(self, call: Call) -> Summary:
        topic = call.param("topic")
        stats = await self.queue.stats(topic)
        view = (await self.board.activity.views([topic]))[topic]
        return summary_of(topic, stats, view, self.board.may_act(call, topic))

    async def detail(self, call: Call) -> Reply:
        return html_reply(topic_detail(await self._summary(call)))

    async def summary(self, call: Call) -> Reply:
        return html_reply(topic_summary(await self._summary(call)))

    async def forecast(self, call: Call) -> Reply:
        topic = call.param("topic")
        # until by this server's clock: the store answers from its own now
        until = time.time() + DUE_STEPS * 3600
        return html_reply(forecast_view(topic, await self.queue.forecast(topic, until=until)))

    async def flow(self, call: Call) -> Reply:
        topic = call.param("topic")
        limits, stats = await asyncio.gather(
            self.queue.limits(topic), self.queue.stats(topic, groups=True)
        )
        acts = self.board.may_act(call, topic)
        return html_reply(flow_view(topic, limits, stats["groups"], acts))

    async def dead(self, call: Call) -> Reply:
        topic = call.param("topic")
        offset = offset_arg(call.query.get("offset"))
        page, stats = await asyncio.gather(
            dead_page(self.queue, topic, offset), self.queue.stats(topic)
        )
        acts = self.board.may_act(call, topic)
        return html_reply(dead_list(topic, page, offset, stats["dead"], acts))

    async def delayed(self, call: Call) -> Reply:
        topic = call.param("topic")
        cursor = call.query.get("after") or None
        page, stats = await asyncio.gather(
            scan_state(self.board.queue, topic, State.DELAYED, cursor),
            self.queue.stats(topic),
        )
        acts = self.board.may_act(call, topic)
        now_ms = int(time.time() * 1000)
        return html_reply(delayed_list(topic, page, cursor, stats["delayed"], acts, now_ms))

    async def job(self, call: Call) -> Reply:
        """One job by topic and id (the topic comes in the query string, so
        the token is checked here)."""
        topic = validate_topic(call.query.get("topic", "").strip())
        job_id = validate_id(call.query.get("id", "").strip())
        self.board.check(call, Action.READ, topic)
        info = await self.queue.get(topic, job_id)
        return html_reply(job_view(topic, job_id, info, self.board.may_act(call, topic)))
