"""Calls on one job by its id: get, delete, reschedule."""

from __future__ import annotations

from datetime import datetime

from chronoq.calls.call import Call, StoreSide, Use
from chronoq.calls.checks import reschedule_args
from chronoq.job import JobInfo, validate_id, validate_topic

__all__ = ["Delete", "Get", "Reschedule"]


class Get(Call[JobInfo | None]):
    """The job with this id, or None when there is none."""

    __slots__ = ("id", "topic")

    def __init__(self, topic: str, id: str) -> None:
        self.topic = validate_topic(topic)
        self.id = validate_id(id)

    def store(self, side: StoreSide) -> Use:
        return Use("get", (self.topic, self.id))


class Delete(Call[bool]):
    """Delete the job in any state; True if it existed."""

    __slots__ = ("id", "topic")

    def __init__(self, topic: str, id: str) -> None:
        self.topic = validate_topic(topic)
        self.id = validate_id(id)

    def store(self, side: StoreSide) -> Use:
        return Use("delete", (self.topic, self.id))


class Reschedule(Call[bool]):
    """Move a delayed or ready job to a new due time: after ``delay``
    seconds or at ``run_at`` (exactly one of them). False when the job is
    absent, reserved or dead."""

    __slots__ = ("at_ms", "delay_ms", "id", "run_at", "topic")

    def __init__(
        self,
        topic: str,
        id: str,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
    ) -> None:
        self.delay_ms, self.at_ms = reschedule_args(topic, id, delay, run_at)
        self.topic = topic
        self.id = id
        self.run_at = run_at

    def store(self, side: StoreSide) -> Use:
        return Use("reschedule", (self.topic, self.id, self.delay_ms, self.at_ms))
