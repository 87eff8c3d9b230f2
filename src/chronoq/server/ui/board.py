"""What the dashboard's handlers share: the queue, the settings and the
event log's tail."""

from __future__ import annotations

from chronoq.aio import AsyncQueue
from chronoq.server.auth import Action, allowed
from chronoq.server.settings import ServerSettings
from chronoq.server.ui.activity import Activity
from chronoq.server.web.asgi import Service
from chronoq.server.web.routing import Call

__all__ = ["Board"]


class Board:
    def __init__(self, queue: AsyncQueue, service: Service) -> None:
        self.queue = queue
        self.service = service
        self.activity = Activity(queue)

    @property
    def settings(self) -> ServerSettings:
        return self.service.settings

    def may(self, call: Call, action: Action, topic: str | None) -> bool:
        """Whether the request's token allows ``action`` on ``topic`` (always
        with auth off, but on the server's own topics)."""
        return allowed(call.token, action, topic)

    def may_act(self, call: Call, topic: str) -> bool:
        """Whether to offer the actions on ``topic``: not in read-only mode,
        and only to a token that may use them."""
        return not self.settings.read_only_ui and self.may(call, Action.ADMIN, topic)

    def check(self, call: Call, action: Action, topic: str) -> None:
        """Raise 403 unless the token allows ``action`` on ``topic``: for a
        topic that comes in the query string, which the route cannot check."""
        self.settings.auth.check(call.token, action, topic)
