"""The dashboard's route table, on the service's own router: the token and
its topic are checked as for the /v1 API (``read`` for fragments, ``admin``
for actions); the page shell and its static files need none."""

from __future__ import annotations

from chronoq.server.auth import Action
from chronoq.server.ui.actions import Actions
from chronoq.server.ui.assets import Assets
from chronoq.server.ui.board import Board
from chronoq.server.ui.fragments import Fragments
from chronoq.server.ui.page import Page
from chronoq.server.web.routing import Route

__all__ = ["ui_routes"]


def ui_routes(board: Board, assets: Assets) -> list[Route]:
    page = Page(board, assets)
    reads = Fragments(board)
    acts = Actions(board)
    topic = "/ui/topics/{topic}"
    job = f"{topic}/jobs/{{id}}"
    group = f"{topic}/groups/{{group}}"
    table = [
        ("GET", "/ui/", page.shell, None, "the page"),
        ("GET", "/ui/static/{name}", assets.serve, None, "a static file"),
        ("GET", "/ui/topics", reads.topics, Action.READ, "the topics table"),
        ("GET", "/ui/job", reads.job, Action.READ, "one job"),
        ("GET", topic, reads.detail, Action.READ, "a topic's panel"),
        ("GET", f"{topic}/summary", reads.summary, Action.READ, "a topic's counts and lag"),
        ("GET", f"{topic}/forecast", reads.forecast, Action.READ, "a topic's jobs due per hour"),
        ("GET", f"{topic}/flow", reads.flow, Action.READ, "a topic's limits and groups"),
        ("GET", f"{topic}/dead", reads.dead, Action.READ, "a page of dead letters"),
        ("GET", f"{topic}/delayed", reads.delayed, Action.READ, "a page of delayed jobs"),
        ("POST", f"{topic}/pause", acts.pause, Action.ADMIN, "pause"),
        ("POST", f"{topic}/resume", acts.resume, Action.ADMIN, "resume"),
        ("POST", f"{group}/pause", acts.pause_group, Action.ADMIN, "pause a group"),
        ("POST", f"{group}/resume", acts.resume_group, Action.ADMIN, "resume a group"),
        ("POST", f"{topic}/dead/requeue", acts.requeue_all, Action.ADMIN, "requeue all"),
        ("POST", f"{job}/requeue", acts.requeue, Action.ADMIN, "requeue one"),
        ("POST", f"{job}/run-now", acts.run_now, Action.ADMIN, "run now"),
        ("POST", f"{job}/delete", acts.delete, Action.ADMIN, "delete"),
    ]
    return [
        Route(method, path, handler, summary, action, tag="dashboard", in_schema=False)
        for method, path, handler, action, summary in table
    ]
