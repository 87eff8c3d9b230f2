"""The protocol of ouqiang/delay-queue at the server's root: ``/push``,
``/pop``, ``/finish``, ``/delete``, ``/get``, each answered HTTP 200 with
``{"code": 0|1, "message", "data"}`` and ouqiang's own messages, so its
clients work unchanged. The body is read as Go's ``encoding/json`` reads it
into ouqiang's structs (keys in any case, unknown ones ignored, exact types);
docs/compat.md lists where chronoq differs and why."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from msgspec import Struct

from chronoq.errors import ChronoqError, PayloadTooLarge
from chronoq.server.auth import Action, Auth
from chronoq.server.compat.byid import Entry, IdJobs, Refused, check_not_internal
from chronoq.server.compat.protocols import check_topics, refusal_text, split_topics, trim
from chronoq.server.settings import Limits
from chronoq.server.web.problems import ApiError
from chronoq.server.web.routing import Call, Reply, Route

__all__ = ["body_text", "ouqiang_routes"]

# ouqiang's messages, word for word: clients may compare them
ADDED = "添加成功"
DONE = "操作成功"
BAD_JSON = "解析json失败"
NO_ID = "job id不能为空"
NO_TOPIC_PUSH = "topic 不能为空"  # with a space, unlike pop's
NO_TOPIC_POP = "topic不能为空"
BAD_DELAY = "delay 取值范围1 - (2^31 - 1)"
BAD_TTR = "ttr 取值范围1 - 86400"

_MAX_DELAY = 1 << 31  # what ouqiang accepts, one more than its message says
_MAX_TTR = 86400
_INT64 = range(-(1 << 63), 1 << 63)
_SURROGATE = re.compile("[\ud800-\udfff]")
# every method, as ouqiang's handlers never look at it (a GET's body is not
# read here, so a GET answers 解析json失败 as ouqiang does for a bodyless one)
_METHODS = ("POST", "GET", "PUT", "PATCH", "DELETE")


class OuqiangPopData(Struct):
    id: str
    body: str


class OuqiangJob(Struct):
    topic: str
    id: str
    delay: int  # when the job is due, Unix seconds
    ttr: int
    body: str


class OuqiangAnswer(Struct):
    code: int
    message: str
    data: None = None


class OuqiangPopAnswer(Struct):
    code: int
    message: str
    data: OuqiangPopData | None = None


class OuqiangGetAnswer(Struct):
    code: int
    message: str
    data: OuqiangJob | None = None


class _Malformed(Exception):
    """The body is not what Go's json.Unmarshal would take into the struct."""


class _Object(list[tuple[str, Any]]):
    """A JSON object's members in document order (a duplicate key: the last wins)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _fields(raw: bytes) -> dict[str, Any]:
    """The top-level members of the body by lower-cased key; raises _Malformed."""
    text = raw.decode("utf-8", "replace")  # Go takes invalid UTF-8 as U+FFFD
    if text.startswith("\ufeff"):  # Go refuses a byte order mark; Python would skip it
        raise _Malformed
    try:
        value = json.loads(text, object_pairs_hook=_Object, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise _Malformed from None
    if value is None:  # Go leaves the struct at its zero values
        return {}
    if not isinstance(value, _Object):
        raise _Malformed
    return {key.lower(): member for key, member in value}


def _text(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Malformed
    return trim(_SURROGATE.sub("\ufffd", value))  # a lone \ud800 cannot be stored as UTF-8


def _int64(fields: dict[str, Any], name: str) -> int:
    value = fields.get(name)
    if value is None:
        return 0
    # Go takes only integer literals into an int64: not 10.0, 1e3, "10" or true
    if isinstance(value, bool) or not isinstance(value, int) or value not in _INT64:
        raise _Malformed
    return value


def body_text(payload: Any) -> str:
    """A job's payload as ouqiang's string body: a string as it is (what
    ``/push`` stores), bytes as UTF-8 text, other JSON as its text, none as ""."""
    if isinstance(payload, str):
        return payload
    if payload is None:
        return ""
    if isinstance(payload, bytes):
        return payload.decode("utf-8", "replace")
    return msgspec.json.encode(payload).decode()


def _refused(problem: ApiError) -> OuqiangAnswer:
    return OuqiangAnswer(1, problem.message)


def _failed(message: str) -> Reply:
    return Reply(200, OuqiangAnswer(1, message))


class Ouqiang:
    def __init__(self, jobs: IdJobs, auth: Auth, limits: Limits) -> None:
        self.jobs = jobs
        self.auth = auth
        self.limits = limits

    async def push(self, call: Call) -> Reply:
        fields = _fields(call.raw_body)
        job_id, topic, body = _text(fields, "id"), _text(fields, "topic"), _text(fields, "body")
        delay, ttr = _int64(fields, "delay"), _int64(fields, "ttr")
        if not job_id:
            return _failed(NO_ID)
        if not topic:
            return _failed(NO_TOPIC_PUSH)
        if not 0 < delay <= _MAX_DELAY:
            return _failed(BAD_DELAY)
        if not 0 < ttr <= _MAX_TTR:
            return _failed(BAD_TTR)
        self.auth.check(call.token, Action.PUT, check_not_internal(topic))
        await self.jobs.push(topic, job_id, body, delay=delay, ttr=ttr, token=call.token)
        return Reply(200, OuqiangAnswer(0, ADDED))

    async def pop(self, call: Call) -> Reply:
        topic = _text(_fields(call.raw_body), "topic")
        if not topic:
            return _failed(NO_TOPIC_POP)
        topics = check_topics(split_topics(topic), self.limits.max_pop_topics)
        if not topics:
            return _failed(NO_TOPIC_POP)
        for name in topics:
            self.auth.check(call.token, Action.RESERVE, name)
        job = await self.jobs.pop(topics, self.limits.pop_wait, call.hung_up)
        if job is None:
            return Reply(200, OuqiangPopAnswer(0, DONE, None))
        data = OuqiangPopData(job.id, body_text(job.payload))
        # an answer that cannot be written gives the job back at once
        return Reply(200, OuqiangPopAnswer(0, DONE, data), undelivered=self.jobs.giver(job))

    async def _by_id(self, call: Call, action: Action) -> tuple[str, Entry | None]:
        job_id = _text(_fields(call.raw_body), "id")
        if not job_id:
            raise Refused(NO_ID)
        entry = await self.jobs.lookup(job_id)
        if entry is not None:
            self.jobs.check(call.token, action, job_id, entry)
        return job_id, entry

    async def finish(self, call: Call) -> Reply:
        return await self._remove(call, Action.RESERVE)

    async def delete(self, call: Call) -> Reply:
        return await self._remove(call, Action.PUT)

    async def _remove(self, call: Call, action: Action) -> Reply:
        job_id, entry = await self._by_id(call, action)
        if entry is not None:  # an unknown id is done too, as in ouqiang (DEL of no key)
            await self.jobs.remove(job_id, entry)
        return Reply(200, OuqiangAnswer(0, DONE))

    async def get(self, call: Call) -> Reply:
        job_id, entry = await self._by_id(call, Action.READ)
        info = None if entry is None else await self.jobs.get(job_id, entry)
        if info is None:
            return Reply(200, OuqiangGetAnswer(0, DONE))
        data = OuqiangJob(
            info.topic, info.id, info.due_at // 1000, math.ceil(info.ttr), body_text(info.payload)
        )
        return Reply(200, OuqiangGetAnswer(0, DONE, data))


def _guarded(handler: Callable[[Call], Awaitable[Reply]]) -> Callable[[Call], Awaitable[Reply]]:
    """Every refusal as ouqiang answers one: HTTP 200, code 1. Auth refusals
    (ApiError) keep their 401/403: they are the server's, on every route."""

    async def guarded(call: Call) -> Reply:
        try:
            return await handler(call)
        except _Malformed:
            return _failed(BAD_JSON)
        except Refused as exc:
            return _failed(str(exc))
        except PayloadTooLarge as exc:  # 413, as the server answers a body over max_body
            return Reply(413, OuqiangAnswer(1, str(exc)))
        except ChronoqError as exc:
            return _failed(refusal_text(exc))

    return guarded


def ouqiang_routes(jobs: IdJobs, auth: Auth, limits: Limits) -> list[Route]:
    api = Ouqiang(jobs, auth, limits)
    # a refusal keeps its status (401, 403, 413, 503) in ouqiang's envelope,
    # so a client that reads only ``code`` still sees code 1
    errors = {401: OuqiangAnswer, 403: OuqiangAnswer}
    table = [
        ("/push", api.push, "ouqiang: add a job", Action.PUT, OuqiangAnswer),
        ("/pop", api.pop, "ouqiang: lease a job (long poll)", Action.RESERVE, OuqiangPopAnswer),
        ("/finish", api.finish, "ouqiang: a job is done", Action.RESERVE, OuqiangAnswer),
        ("/delete", api.delete, "ouqiang: cancel a job", Action.PUT, OuqiangAnswer),
        ("/get", api.get, "ouqiang: a job by id", Action.READ, OuqiangGetAnswer),
    ]
    return [
        Route(
            method,
            path,
            _guarded(handler),
            summary,
            action,
            Any,  # any bytes: what is not a body ouqiang takes is answered code 1
            # 413: a body over limits.max_body, or a push's payload over max_payload
            {200: answer, **errors, 413: OuqiangAnswer},
            tag="ouqiang",
            long_poll=path == "/pop",
            # POST alone, as ouqiang's README says; /pop holds for pop_wait
            # seconds (178 by default), too long for generated calls to wait out
            in_schema=method == "POST" and path != "/pop",
            raw_body=True,
            envelope=_refused,
        )
        for path, handler, summary, action, answer in table
        for method in _METHODS
    ]
