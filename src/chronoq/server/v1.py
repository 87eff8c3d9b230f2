"""The handlers of the /v1 endpoints (docs/contract.md §8): each one a thin call of
``AsyncQueue``; ``v1_routes.py`` puts them in the route table."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from chronoq.aio import AsyncQueue
from chronoq.errors import LeaseLost
from chronoq.job import Job, JobLease
from chronoq.server import wire
from chronoq.server.auth import Action, allowed
from chronoq.server.batching import Coalescer
from chronoq.server.grouped_puts import GroupedPuts
from chronoq.server.longpoll import LongPolls
from chronoq.server.metrics import Metrics
from chronoq.server.settings import Limits
from chronoq.server.web.problems import ApiError
from chronoq.server.web.routing import Call, Reply
from chronoq.server.wire_limits import GroupPaused, set_limits_args

__all__ = ["V1"]

_LIMIT = re.compile(r"[0-9]{1,5}")  # ASCII digits: str.isdigit takes "²" too


def _job(spec: wire.JobSpec) -> Job:
    payload = spec.payload
    if spec.payload_b64 is not None:
        if payload is not None:
            raise ApiError(400, "invalid_input", "give payload or payload_b64, not both")
        try:
            payload = base64.b64decode(spec.payload_b64, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "invalid_input", "payload_b64 is not valid base64") from None
    return Job(
        payload,
        spec.delay,
        spec.run_at,
        spec.id,
        int(spec.priority),
        spec.ttr,
        int(spec.max_attempts),
        spec.unique_for,
        spec.traceparent,
        spec.group,
    )


def _number(query: dict[str, str], name: str, default: float | None, what: str) -> float:
    """A number from the query string (the queue checks its range); ``what``
    says what it is, for the message."""
    raw = query.get(name)
    if raw is None and default is not None:
        return default
    try:
        return float(raw or "")
    except ValueError:
        needed = "is required" if raw is None else f"must be a number, got {raw!r}"
        raise ApiError(400, "invalid_input", f"{name} {needed}: {what}") from None


def _flag(call: Call, name: str) -> bool:
    raw = call.query.get(name, "false")
    if raw not in ("true", "false"):
        raise ApiError(400, "invalid_input", f"{name} must be true or false, got {raw!r}")
    return raw == "true"


def _ok(body: Any, status: int = 200) -> Reply:
    return Reply(status, body)


class V1:
    def __init__(
        self,
        queue: AsyncQueue,
        polls: LongPolls,
        limits: Limits,
        metrics: Metrics,
        puts: GroupedPuts | None = None,
    ) -> None:
        self.q = queue
        self.polls = polls
        self.limits = limits
        self.metrics = metrics
        # single puts and acks that meet at the store go as one call (batching.py)
        self.puts = puts or GroupedPuts(queue)
        self.acks: Coalescer[str, JobLease, bool] = Coalescer(self._ack_group)

    def _check_batch(self, size: int, what: str) -> None:
        if size > self.limits.max_batch:
            raise ApiError(
                400, "too_many", f"{size} {what} in one batch, over the limit of "
                f"{self.limits.max_batch}: split it",
            )  # fmt: skip

    async def _ack_group(self, topic: str, leases: list[JobLease]) -> list[bool]:
        """Lost or not, per lease. An id twice in one group (a retried ack)
        goes in a later call, so that each answer is its own lease's."""
        lost = [False] * len(leases)
        pending = list(range(len(leases)))
        while pending:
            seen: set[str] = set()
            now: list[int] = []
            later: list[int] = []
            for i in pending:
                (later if leases[i].id in seen else now).append(i)
                seen.add(leases[i].id)
            gone = set(await self.q.ack_many([leases[i] for i in now]))
            for i in now:
                lost[i] = leases[i].id in gone
            pending = later
        return lost

    # -- producing ---------------------------------------------------------------

    async def put(self, call: Call) -> Reply:
        spec: wire.PutJob = call.body
        result = await self.puts.put(call.param("topic"), _job(spec), replace=spec.replace)
        self.metrics.transition(call.param("topic"), "put", int(result.created))
        return _ok(wire.put_body(result), 201 if result.created else 200)

    async def put_batch(self, call: Call) -> Reply:
        batch: wire.BatchPut = call.body
        self._check_batch(len(batch.jobs), "jobs")
        jobs = []
        for index, spec in enumerate(batch.jobs):
            try:
                jobs.append(_job(spec))
            except ApiError as exc:
                raise ApiError(
                    400, "invalid_job", f"job #{index} of the batch: {exc.message}", index=index
                ) from None
        results = await self.q.put_many(call.param("topic"), jobs, replace=batch.replace)
        self.metrics.transition(call.param("topic"), "put", sum(r.created for r in results))
        return _ok(wire.BatchPutResult([wire.put_body(r) for r in results]))

    # -- consuming -----------------------------------------------------------------

    async def reserve(self, call: Call) -> Reply:
        body: wire.ReserveBody = call.body
        limits = self.limits
        if body.count > limits.max_count:
            raise ApiError(
                400,
                "invalid_input",
                f"count must be at most {limits.max_count} (this server's max_count)",
            )
        if body.wait > limits.max_wait:
            raise ApiError(
                400,
                "invalid_input",
                f"wait must be at most {limits.max_wait:g} "
                "seconds (this server's max_wait): poll again when it ends",
            )
        hung_up = call.watch_hang_up() if body.wait > 0 else None
        jobs = await self.polls.reserve(
            (call.param("topic"),), int(body.count), body.ttr, body.wait, hung_up
        )
        if jobs and hung_up is not None and hung_up.is_set():
            await self.polls.give_back(jobs)  # nobody to hand them to
            jobs = []
        self.metrics.reserved(jobs)
        answer = wire.ReserveResultBody([wire.reservation_body(job) for job in jobs])
        if not jobs:
            return _ok(answer)
        return Reply(200, answer, undelivered=lambda: self.polls.give_back_later(jobs))

    async def ack(self, call: Call) -> Reply:
        body: wire.LeaseBody = call.body
        topic, job_id = call.param("topic"), call.param("id")
        if await self.acks.call(topic, JobLease(topic, job_id, body.lease)):
            raise LeaseLost(topic, job_id)
        self.metrics.transition(topic, "ack")
        return _ok(wire.Empty())

    async def ack_batch(self, call: Call) -> Reply:
        batch: wire.AckBatch = call.body
        self._check_batch(len(batch.leases), "leases")
        topic = call.param("topic")
        lost = await self.q.ack_many([JobLease(topic, ref.id, ref.lease) for ref in batch.leases])
        self.metrics.transition(topic, "ack", len(batch.leases) - len(lost))
        return _ok(wire.AckBatchResult(lost))

    async def nack(self, call: Call) -> Reply:
        body: wire.NackBody = call.body
        state = await self.q.nack(
            call.param("topic"), call.param("id"), body.lease, delay=body.delay, error=body.error
        )
        self.metrics.transition(call.param("topic"), "nack")
        return _ok(wire.NackResult(state.value))

    async def touch(self, call: Call) -> Reply:
        body: wire.TouchBody = call.body
        deadline = await self.q.touch(
            call.param("topic"), call.param("id"), body.lease, ttr=body.ttr
        )
        return _ok(wire.Touched(deadline))

    async def bury(self, call: Call) -> Reply:
        body: wire.StateBody = call.body
        await self.q.bury(call.param("topic"), call.param("id"), body.lease, error=body.error)
        self.metrics.transition(call.param("topic"), "bury")
        return _ok(wire.NackResult("dead"))

    async def release(self, call: Call) -> Reply:
        body: wire.StateBody = call.body
        await self.q.release(call.param("topic"), call.param("id"), body.lease, error=body.error)
        return _ok(wire.Empty())

    # -- by id ---------------------------------------------------------------------------

    async def get(self, call: Call) -> Reply:
        info = await self.q.get(call.param("topic"), call.param("id"))
        if info is None:
            raise ApiError(
                404,
                "not_found",
                f"no job {call.param('id')!r} on topic "
                f"{call.param('topic')!r} (never put, or acked, or deleted)",
            )
        return _ok(wire.info_body(info))

    async def delete(self, call: Call) -> Reply:
        deleted = await self.q.delete(call.param("topic"), call.param("id"))
        self.metrics.transition(call.param("topic"), "delete", int(deleted))
        return _ok(wire.Deleted(deleted))

    async def reschedule(self, call: Call) -> Reply:
        body: wire.RescheduleBody = call.body
        done = await self.q.reschedule(
            call.param("topic"), call.param("id"), delay=body.delay, run_at=body.run_at
        )
        return _ok(wire.Rescheduled(done))

    # -- topic-wide ------------------------------------------------------------------------

    async def topics(self, call: Call) -> Reply:
        # only what the request may read (never the server's own, without tokens)
        names = [name for name in await self.q.topics() if allowed(call.token, Action.READ, name)]
        return _ok(wire.TopicList(names))

    async def stats(self, call: Call) -> Reply:
        per_shard, groups = _flag(call, "per_shard"), _flag(call, "groups")
        return _ok(await self.q.stats(call.param("topic"), per_shard=per_shard, groups=groups))

    async def forecast(self, call: Call) -> Reply:
        until = _number(call.query, "until", None, "Unix time in seconds, such as 1893456000")
        step = _number(call.query, "step", 3600.0, "seconds, such as 3600")
        found = await self.q.forecast(call.param("topic"), until=until, step=step)
        return _ok(wire.forecast_body(found))

    async def dead(self, call: Call) -> Reply:
        raw = call.query.get("limit", "100")
        if not _LIMIT.fullmatch(raw) or not 1 <= int(raw) <= 1000:
            raise ApiError(
                400, "invalid_input", f"limit must be an integer from 1 to 1000, got {raw!r}"
            )
        jobs = await self.q.dead(call.param("topic"), int(raw))
        return _ok(wire.JobList([wire.info_body(info) for info in jobs]))

    async def requeue(self, call: Call) -> Reply:
        body: wire.Requeue = call.body
        return _ok(wire.Requeued(await self.q.requeue(call.param("topic"), body.ids)))

    async def purge(self, call: Call) -> Reply:
        return _ok({"purged": await self.q.purge(call.param("topic"))})

    async def pause(self, call: Call) -> Reply:
        await self.q.pause(call.param("topic"))
        return _ok(wire.Paused(True))

    async def resume(self, call: Call) -> Reply:
        await self.q.resume(call.param("topic"))
        return _ok(wire.Paused(False))

    async def pause_group(self, call: Call) -> Reply:
        await self.q.pause(call.param("topic"), group=call.param("group"))
        return _ok(GroupPaused(call.param("group"), True))

    async def resume_group(self, call: Call) -> Reply:
        await self.q.resume(call.param("topic"), group=call.param("group"))
        return _ok(GroupPaused(call.param("group"), False))

    async def get_limits(self, call: Call) -> Reply:
        return _ok((await self.q.limits(call.param("topic"))).as_dict())

    async def set_limits(self, call: Call) -> Reply:
        args = set_limits_args(call.body)
        group = call.query.get("group")
        found = await self.q.set_limits(call.param("topic"), group=group, **args)  # type: ignore[arg-type]
        return _ok(found.as_dict())

    async def clear_limits(self, call: Call) -> Reply:
        found = await self.q.clear_limits(call.param("topic"), group=call.query.get("group"))
        return _ok(found.as_dict())
