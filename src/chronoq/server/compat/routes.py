"""The compatibility protocols on the same server: the Youzan design's JSON
command protocol (``POST /v1/command``) and ouqiang/delay-queue's root paths
(``/push``, ``/pop``, ``/finish``, ``/delete``, ``/get``). Both name jobs by
id alone, through one index in the store (``chronoq.server.compat.byid``)."""

from __future__ import annotations

from chronoq.aio import AsyncQueue
from chronoq.server.compat.byid import IdJobs
from chronoq.server.compat.ouqiang import ouqiang_routes
from chronoq.server.compat.youzan import youzan_routes
from chronoq.server.grouped_puts import GroupedPuts
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics
from chronoq.server.settings import ServerSettings
from chronoq.server.web.routing import Route

__all__ = ["compat_routes"]


def compat_routes(
    queue: AsyncQueue,
    polls: LongPolls,
    settings: ServerSettings,
    metrics: Metrics,
    puts: GroupedPuts,
) -> list[Route]:
    jobs = IdJobs(queue, polls, metrics, puts)
    return youzan_routes(jobs, settings.auth, settings.limits) + ouqiang_routes(
        jobs, settings.auth, settings.limits
    )
