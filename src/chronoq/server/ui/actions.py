"""The POST handlers: pause, resume (a topic, or one of its groups),
requeue, run now, delete. Each answers a one-line message for the flash
area and an ``HX-Trigger`` that makes the lists on the page reload. An
action that finds nothing to do (a job gone meanwhile) is answered 200 with
a warning, not an error: the page is merely behind. Read-only mode and the
token are checked before a handler runs (guard.py, and the route's
``admin`` action)."""

from __future__ import annotations

import logging

from chronoq.server.ui.board import Board
from chronoq.server.ui.fragments import html_reply
from chronoq.server.ui.templates import render
from chronoq.server.web.routing import Call, Reply

__all__ = ["Actions"]

log = logging.getLogger("chronoq")

# fired at the body, not at the button: a poll may have replaced the button
# (and detached it) while its request was out
_CHANGED = (b"hx-trigger", b'{"chronoq-changed":{"target":"body"}}')


def _done(message: str, ok: bool = True) -> Reply:
    return html_reply(render("flash.html", message=message, ok=ok), _CHANGED)


class Actions:
    def __init__(self, board: Board) -> None:
        self.queue = board.queue

    def _audit(self, call: Call, what: str, topic: str, job_id: str | None = None) -> None:
        who = call.token.name if call.token is not None else "anyone (auth off)"
        target = topic if job_id is None else f"{topic}/{job_id}"
        log.info("dashboard: %s %s by %s", what, target, who)

    def _job(self, call: Call) -> tuple[str, str]:
        return call.param("topic"), call.param("id")

    async def pause(self, call: Call) -> Reply:
        topic = call.param("topic")
        self._audit(call, "pause", topic)
        await self.queue.pause(topic)
        return _done(f"Paused {topic}: its jobs stay, and none is handed out.")

    async def resume(self, call: Call) -> Reply:
        topic = call.param("topic")
        self._audit(call, "resume", topic)
        await self.queue.resume(topic)
        return _done(f"Resumed {topic}.")

    async def pause_group(self, call: Call) -> Reply:
        topic, group = call.param("topic"), call.param("group")
        self._audit(call, f"pause group {group} of", topic)
        await self.queue.pause(topic, group=group)
        return _done(f"Paused group {group} of {topic}: its jobs stay; the other groups flow on.")

    async def resume_group(self, call: Call) -> Reply:
        topic, group = call.param("topic"), call.param("group")
        self._audit(call, f"resume group {group} of", topic)
        await self.queue.resume(topic, group=group)
        return _done(f"Resumed group {group} of {topic}.")

    async def requeue_all(self, call: Call) -> Reply:
        topic = call.param("topic")
        self._audit(call, "requeue all", topic)
        moved = await self.queue.requeue(topic)
        return _done(f"Requeued {moved} dead job{'s' if moved != 1 else ''} of {topic}.")

    async def requeue(self, call: Call) -> Reply:
        topic, job_id = self._job(call)
        self._audit(call, "requeue", topic, job_id)
        if await self.queue.requeue(topic, [job_id]):
            return _done(f"Requeued {job_id}: it is ready, with its attempts reset.")
        return _done(f"{job_id} was not requeued: it is not dead (any more).", ok=False)

    async def run_now(self, call: Call) -> Reply:
        topic, job_id = self._job(call)
        self._audit(call, "run now", topic, job_id)
        if await self.queue.reschedule(topic, job_id, delay=0):
            return _done(f"{job_id} is due now.")
        return _done(f"{job_id} was not moved: it is reserved, dead or gone.", ok=False)

    async def delete(self, call: Call) -> Reply:
        topic, job_id = self._job(call)
        self._audit(call, "delete", topic, job_id)
        if await self.queue.delete(topic, job_id):
            return _done(f"Deleted {job_id}.")
        return _done(f"{job_id} was already gone.", ok=False)
