"""Recurring jobs: define, list, remove, and put the occurrences due
(``chronoq.recurring`` holds what they store and plan, without I/O)."""

from __future__ import annotations

from typing import Any

from chronoq.calls.call import Call, StoreSide, StoreSteps, Use
from chronoq.job import validate_topic
from chronoq.recurring import (
    Recurring,
    RecurringRun,
    check_name,
    encode_spec,
    find_recurring,
    plan_run,
    recurring_list,
)

__all__ = ["DefineRecurring", "RecurringList", "RecurringRemove", "RunRecurring"]


class DefineRecurring(Call[Recurring]):
    """Define the recurring job ``name`` of the topic, or redefine it (its
    creation time and last occurrence are kept: calling this at every
    start-up is safe). ``cron``: 5 fields in the time zone ``tz``; or
    ``every``: seconds, counted from the Unix epoch. Each occurrence is put
    by ``run_recurring`` (workers call it) as a job with the id
    ``<name>@<occurrence ms>`` and this payload, priority, ttr and
    max_attempts. Occurrences before the definition are not put; missed
    ones (no worker ran) collapse into one job, the latest one due.
    Schedules are not jobs: ``purge`` keeps them, ``topics`` does not list
    a topic for them, and they appear in no event."""

    __slots__ = ("args", "name", "topic")

    def __init__(
        self,
        topic: str,
        *,
        name: str,
        cron: str | None = None,
        every: float | None = None,
        payload: Any = None,
        tz: str = "UTC",
        priority: int = 0,
        ttr: float = 30.0,
        max_attempts: int = 5,
    ) -> None:
        self.topic = topic
        self.name = name
        self.args = (cron, every, payload, tz, priority, ttr, max_attempts)

    def store(self, side: StoreSide) -> StoreSteps[Recurring]:
        spec = encode_spec(self.topic, self.name, *self.args, side.max_payload)
        yield Use("schedules_put", (self.topic, self.name, spec))
        now_ms, stored = yield Use("schedules_list", (self.topic,))
        return find_recurring(self.topic, self.name, now_ms, stored)


class RecurringList(Call[list[Recurring]]):
    """The topic's recurring jobs, by name."""

    __slots__ = ("topic",)

    def __init__(self, topic: str) -> None:
        self.topic = validate_topic(topic)

    def store(self, side: StoreSide) -> StoreSteps[list[Recurring]]:
        now_ms, stored = yield Use("schedules_list", (self.topic,))
        return recurring_list(self.topic, now_ms, stored)


class RecurringRemove(Call[bool]):
    """Forget a recurring job; True if it existed. Occurrences already put
    stay (``delete`` them by id)."""

    __slots__ = ("name", "topic")

    def __init__(self, topic: str, name: str) -> None:
        self.topic = validate_topic(topic)
        self.name = check_name(name)

    def store(self, side: StoreSide) -> Use:
        return Use("schedules_remove", (self.topic, self.name))


class RunRecurring(Call[RecurringRun]):
    """Put the occurrences of the topic's recurring jobs that are due and
    not yet put; returns those created and when the next one falls. Safe
    to call from any number of threads and processes at once: each
    occurrence is created once."""

    __slots__ = ("topic",)

    def __init__(self, topic: str) -> None:
        self.topic = validate_topic(topic)

    def store(self, side: StoreSide) -> StoreSteps[RecurringRun]:
        plan = plan_run(self.topic, *(yield Use("schedules_list", (self.topic,))))
        results = (yield Use("put_many", (self.topic, plan.jobs, False))) if plan.jobs else []
        for name, at_ms in plan.marks:
            yield Use("schedules_mark", (self.topic, name, at_ms))
        return plan.done(results)
