"""The compatibility protocols on the same server: the Youzan design's JSON
command protocol (``POST /v1/command``) and ouqiang/delay-queue's root paths
(``/push``, ``/pop``, ``/finish``, ``/delete``, ``/get``)."""

from __future__ import annotations

from chronoq.aio import AsyncQueue
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics
from chronoq.server.routing import Route
from chronoq.server.settings import ServerSettings

__all__ = ["compat_routes"]


def compat_routes(
    queue: AsyncQueue, polls: LongPolls, settings: ServerSettings, metrics: Metrics
) -> list[Route]:
    return []
