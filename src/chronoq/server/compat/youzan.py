"""The JSON command protocol of the Youzan delay-queue design at
``POST /v1/command``: ``{"command": "add"|"pop"|"finish"|"delete", ...}``
answered HTTP 200 with ``{"success", "error", "id", "value"}``. The article
fixes the field names only; the choices made where it is silent (defaults,
pop's wait, what an unknown id answers) are in docs/compat.md."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct

from chronoq.errors import ChronoqError, PayloadTooLarge
from chronoq.job import Reservation
from chronoq.server.auth import Action, Auth
from chronoq.server.compat.byid import IdJobs, Refused, check_not_internal
from chronoq.server.compat.protocols import check_topics, refusal_text, split_topics, trim
from chronoq.server.settings import Limits
from chronoq.server.web.routing import Call, Reply, Route

__all__ = ["youzan_routes"]

_COMMANDS = "add, pop, finish or delete"
_DEFAULT_TTR = 30.0  # chronoq's default lease


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."  # a refusal need not echo a megabyte


class YouzanAnswer(Struct):
    success: bool
    error: str | None = None
    id: str | None = None
    value: Any = None  # the job's body, as it was added (pop)


def _fields(raw: bytes) -> dict[str, Any]:
    try:  # msgspec refuses what JSON cannot hold in UTF-8 (a lone surrogate)
        value = msgspec.json.decode(raw)
    except (ValueError, RecursionError) as exc:  # DecodeError, bad UTF-8, deep nesting
        raise Refused(f"the body is not valid JSON ({exc}): send a JSON object") from None
    if not isinstance(value, dict):
        raise Refused('the body must be a JSON object such as {"command": "pop", "topic": "t"}')
    return {key.lower(): member for key, member in value.items()}  # "TTR" as the article has it


def _text(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    if value is None:
        raise Refused(f"{name} is missing: give it as a string")
    if not isinstance(value, str):
        raise Refused(f"{name} must be a string, got {_shown(value)}")
    value = trim(value)
    if not value:
        raise Refused(f"{name} is empty: give it as a non-empty string")
    return value


def _seconds(fields: dict[str, Any], name: str, default: float) -> float:
    value = fields.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"{name} must be a number of seconds, got {_shown(value)}")
    return value


class Youzan:
    def __init__(self, jobs: IdJobs, auth: Auth, limits: Limits) -> None:
        self.jobs = jobs
        self.auth = auth
        self.limits = limits

    async def command(self, call: Call) -> Reply:
        job_id = None
        popped: Reservation | None = None
        status = 200
        try:
            fields = _fields(call.raw_body)
            if isinstance(fields.get("id"), str):
                job_id = trim(fields["id"]) or None
            name = fields.get("command")
            if name is None:
                raise Refused(f"command is missing: give one of {_COMMANDS}")
            kind = name.lower() if isinstance(name, str) else name
            if kind == "add":
                answer = await self.add(call, fields)
            elif kind == "pop":
                answer, popped = await self.pop(call, fields)
            elif kind in ("finish", "delete"):
                answer = await self.remove(call, fields, kind)
            else:
                raise Refused(f"unknown command {_shown(name)}: give one of {_COMMANDS}")
        except Refused as exc:
            answer = YouzanAnswer(False, str(exc), job_id)
        except PayloadTooLarge as exc:  # 413, as the server answers a body over max_body
            answer, status = YouzanAnswer(False, str(exc), job_id), 413
        except ChronoqError as exc:
            answer = YouzanAnswer(False, refusal_text(exc), job_id)
        if popped is None:
            return Reply(status, answer)
        # an answer that cannot be written gives the job back at once
        return Reply(200, answer, undelivered=self.jobs.giver(popped))

    async def add(self, call: Call, fields: dict[str, Any]) -> YouzanAnswer:
        topic, job_id = _text(fields, "topic"), _text(fields, "id")
        delay = _seconds(fields, "delay", 0.0)
        ttr = _seconds(fields, "ttr", _DEFAULT_TTR)
        self.auth.check(call.token, Action.PUT, check_not_internal(topic))
        await self.jobs.push(
            topic, job_id, fields.get("body"), delay=delay, ttr=ttr, token=call.token
        )
        return YouzanAnswer(True, None, job_id)

    async def pop(
        self, call: Call, fields: dict[str, Any]
    ) -> tuple[YouzanAnswer, Reservation | None]:
        topics = split_topics(_text(fields, "topic"))
        if not topics:
            raise Refused("topic names no topic: give one, or several separated by commas")
        if "wait" in fields and "timeout" in fields:
            raise Refused("give wait or timeout (the same thing), not both")
        wait = _seconds(fields, "wait" if "wait" in fields else "timeout", 0.0)
        if not 0 <= wait <= self.limits.max_wait:
            raise Refused(
                f"wait must be from 0 to {self.limits.max_wait:g} seconds (this server's "
                f"max_wait), got {_shown(wait)}: pop again when it ends"
            )
        for topic in check_topics(topics, self.limits.max_pop_topics):
            self.auth.check(call.token, Action.RESERVE, topic)
        job = await self.jobs.pop(topics, wait, call.hung_up)
        if job is None:
            return YouzanAnswer(True), None
        return YouzanAnswer(True, None, job.id, job.payload), job

    async def remove(self, call: Call, fields: dict[str, Any], kind: str) -> YouzanAnswer:
        job_id = _text(fields, "id")
        entry = await self.jobs.lookup(job_id)
        if entry is not None:  # an unknown id is finished already: success, as ouqiang
            action = Action.RESERVE if kind == "finish" else Action.PUT
            self.jobs.check(call.token, action, job_id, entry)
            await self.jobs.remove(job_id, entry)
        return YouzanAnswer(True, None, job_id)


def youzan_routes(jobs: IdJobs, auth: Auth, limits: Limits) -> list[Route]:
    api = Youzan(jobs, auth, limits)
    return [
        Route(
            "POST",
            "/v1/command",
            api.command,
            "The Youzan delay-queue command protocol: add, pop, finish, delete",
            # only the body names the command: the dispatcher identifies the
            # token, and each command checks its own action (add, delete: put;
            # pop, finish: reserve) on the job's real topic
            Action.RESERVE,
            Any,  # any bytes: what is not a command is answered success false
            {200: YouzanAnswer, 401: YouzanAnswer, 403: YouzanAnswer, 413: YouzanAnswer},
            tag="youzan",
            long_poll=True,
            raw_body=True,
            checks_in_handler=True,
            envelope=lambda problem: YouzanAnswer(False, problem.message),
        )
    ]
