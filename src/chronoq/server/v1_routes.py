"""The route table of the /v1 API: method, path, handler, action, the body
and answer types (which also make the OpenAPI document)."""

from __future__ import annotations

from typing import Any

from chronoq.aio import AsyncQueue
from chronoq.job import MAX_DURATION_S, MAX_FORECAST_STEPS, YEAR_10000
from chronoq.names import GROUP_PATTERN
from chronoq.server import wire
from chronoq.server.auth import Action
from chronoq.server.grouped_puts import GroupedPuts
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics
from chronoq.server.settings import Limits
from chronoq.server.v1 import V1
from chronoq.server.web.routing import Param, Route
from chronoq.server.wire_limits import GroupPaused, LimitsBody, SetLimitsBody

__all__ = ["v1_routes"]

_TOPIC = "/v1/topics/{topic}"
_JOB = _TOPIC + "/jobs/{id}"
_GROUP = _TOPIC + "/groups/{group}"
_ERRORS = {400: wire.ErrorBody, 401: wire.ErrorBody, 403: wire.ErrorBody, 503: wire.ErrorBody}
# a payload over the store's max_payload (or a body over limits.max_body)
_PUT_ERRORS = {**_ERRORS, 413: wire.ErrorBody}


def v1_routes(
    queue: AsyncQueue, polls: LongPolls, limits: Limits, metrics: Metrics, puts: GroupedPuts
) -> list[Route]:
    api = V1(queue, polls, limits, metrics, puts)
    lease_errors = {**_ERRORS, 404: wire.ErrorBody, 409: wire.ErrorBody}
    put, reserve, read, admin = Action.PUT, Action.RESERVE, Action.READ, Action.ADMIN
    limit = Param(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        "how many dead jobs at most",
    )
    until = Param(
        "until",
        {"type": "number", "minimum": 0, "exclusiveMaximum": YEAR_10000},
        "the end of the forecast, Unix time in seconds: later than the store's now",
        required=True,
    )
    step = Param(
        "step",
        {"type": "number", "minimum": 1, "maximum": MAX_DURATION_S, "default": 3600},
        f"seconds per step, ms resolution; at most {MAX_FORECAST_STEPS} steps to until",
    )
    per_shard = Param(
        "per_shard",
        {"type": "boolean", "default": False},
        "also each shard's counts and next due time, in order",
    )
    groups = Param(
        "groups",
        {"type": "boolean", "default": False},
        "also the counts of the groups with the largest backlogs (at most 100)",
    )
    group = Param(
        "group",
        {"type": "string", "pattern": f"^{GROUP_PATTERN}$"},
        "one group's own limits (left out: the topic's and the group defaults)",
    )

    def route(
        method: str,
        path: str,
        handler: Any,
        summary: str,
        action: Action,
        body: Any,
        answer: Any,
        *,
        errors: dict[int, Any] | None = None,
        tag: str = "jobs",
        **extra: Any,
    ) -> Route:
        answers = {200: answer, **(errors or _ERRORS)}
        if method != "GET":  # the server reads its body: one over limits.max_body is refused
            answers[413] = wire.ErrorBody
        return Route(method, path, handler, summary, action, body, answers, tag=tag, **extra)

    return [
        Route(
            "POST",
            _TOPIC + "/jobs",
            api.put,
            "Put one job (201 created, 200 it existed)",
            put,
            wire.PutJob,
            {201: wire.PutResultBody, 200: wire.PutResultBody, **_PUT_ERRORS},
            tag="produce",
        ),
        route(
            "POST",
            _TOPIC + "/jobs:batch",
            api.put_batch,
            "Put up to max_batch jobs: all checked first, all or nothing",
            put,
            wire.BatchPut,
            wire.BatchPutResult,
            errors=_PUT_ERRORS,
            tag="produce",
        ),
        route(
            "POST",
            _TOPIC + "/reserve",
            api.reserve,
            "Lease up to count due jobs, waiting up to wait seconds (long poll)",
            reserve,
            wire.ReserveBody,
            wire.ReserveResultBody,
            tag="consume",
        ),
        route(
            "POST",
            _TOPIC + "/jobs:ack",
            api.ack_batch,
            "Ack many leases at once",
            reserve,
            wire.AckBatch,
            wire.AckBatchResult,
            tag="consume",
        ),
        route(
            "POST",
            _JOB + "/ack",
            api.ack,
            "Ack a leased job: it is done",
            reserve,
            wire.LeaseBody,
            wire.Empty,
            errors=lease_errors,
            tag="consume",
        ),
        route(
            "POST",
            _JOB + "/nack",
            api.nack,
            "Give a leased job back for a retry",
            reserve,
            wire.NackBody,
            wire.NackResult,
            errors=lease_errors,
            tag="consume",
        ),
        route(
            "POST",
            _JOB + "/touch",
            api.touch,
            "Extend a lease",
            reserve,
            wire.TouchBody,
            wire.Touched,
            errors=lease_errors,
            tag="consume",
        ),
        route(
            "POST",
            _JOB + "/bury",
            api.bury,
            "Move a leased job to the dead letters",
            reserve,
            wire.StateBody,
            wire.NackResult,
            errors=lease_errors,
            tag="consume",
        ),
        route(
            "POST",
            _JOB + "/release",
            api.release,
            "Give a leased job back now, without counting a failure",
            reserve,
            wire.StateBody,
            wire.Empty,
            errors=lease_errors,
            tag="consume",
        ),
        route(
            "GET",
            _JOB,
            api.get,
            "A job's state, payload, attempts, last error",
            read,
            None,
            wire.JobInfoBody,
            errors={**_ERRORS, 404: wire.ErrorBody},
        ),
        route("DELETE", _JOB, api.delete, "Cancel a job (any state)", put, None, wire.Deleted),
        route(
            "POST",
            _JOB + "/reschedule",
            api.reschedule,
            "Move a waiting job's due time",
            put,
            wire.RescheduleBody,
            wire.Rescheduled,
        ),
        route(
            "GET",
            "/v1/topics",
            api.topics,
            "The topics with jobs",
            read,
            None,
            wire.TopicList,
            tag="topics",
        ),
        route(
            "GET",
            _TOPIC + "/stats",
            api.stats,
            "Counts per state, paused, next due time",
            read,
            None,
            dict[str, Any],
            tag="topics",
            query=(per_shard, groups),
        ),
        route(
            "GET",
            _TOPIC + "/forecast",
            api.forecast,
            "Delayed jobs falling due per step from now until a time",
            read,
            None,
            wire.ForecastBody,
            tag="topics",
            query=(until, step),
        ),
        route(
            "GET",
            _TOPIC + "/dead",
            api.dead,
            "Dead jobs, oldest first",
            read,
            None,
            wire.JobList,
            tag="topics",
            query=(limit,),
        ),
        route(
            "POST",
            _TOPIC + "/dead/requeue",
            api.requeue,
            "Move dead jobs (all, or those named) back to ready",
            admin,
            wire.Requeue,
            wire.Requeued,
            tag="topics",
        ),
        route(
            "POST",
            _TOPIC + "/purge",
            api.purge,
            "Delete every job of the topic",
            admin,
            None,
            dict[str, int],
            tag="topics",
        ),
        route(
            "POST",
            _TOPIC + "/pause",
            api.pause,
            "Hand out no job until resumed",
            admin,
            None,
            wire.Paused,
            tag="topics",
        ),
        route(
            "POST",
            _TOPIC + "/resume",
            api.resume,
            "Hand out jobs again",
            admin,
            None,
            wire.Paused,
            tag="topics",
        ),
        route(
            "POST",
            _GROUP + "/pause",
            api.pause_group,
            "Hand out no job of the group until resumed; the others flow on",
            admin,
            None,
            GroupPaused,
            tag="limits",
        ),
        route(
            "POST",
            _GROUP + "/resume",
            api.resume_group,
            "Hand out the group's jobs again",
            admin,
            None,
            GroupPaused,
            tag="limits",
        ),
        route(
            "GET",
            _TOPIC + "/limits",
            api.get_limits,
            "The topic's limits, every group's default and each group's own",
            read,
            None,
            LimitsBody,
            tag="limits",
        ),
        route(
            "PUT",
            _TOPIC + "/limits",
            api.set_limits,
            "Set the limits given, keep the others (?group= for one group's own)",
            admin,
            SetLimitsBody,
            LimitsBody,
            tag="limits",
            query=(group,),
        ),
        route(
            "DELETE",
            _TOPIC + "/limits",
            api.clear_limits,
            "Clear the topic's limits and the defaults, or (?group=) one group's own",
            admin,
            None,
            LimitsBody,
            tag="limits",
            query=(group,),
        ),
    ]
