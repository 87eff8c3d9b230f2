"""Calls on a whole topic (or every topic): stats, the forecast, topics,
dead jobs, requeue, purge, pause, resume, the event log."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from chronoq.calls.call import Call, StoreSide, Use
from chronoq.calls.checks import check_limit, forecast_args, requeue_ids
from chronoq.job import EventPage, Forecast, JobInfo, validate_topic
from chronoq.names import validate_group

__all__ = [
    "Dead",
    "DueForecast",
    "Events",
    "Pause",
    "Purge",
    "Requeue",
    "Resume",
    "Stats",
    "Topics",
]


class Stats(Call[dict[str, Any]]):
    """Counts by state and more: delayed, ready, reserved, dead, total,
    paused, next_due_at (ms or None); with ``per_shard``, also ``shards``:
    for each shard in order, its delayed, ready, reserved, dead and
    next_due_at; with ``groups``, also ``groups``: the groups with the
    largest backlogs (due jobs; at most 100) and the paused ones, largest
    first, each with its group (None: the default group), ready (its due
    jobs), reserved (its live leases) and paused."""

    __slots__ = ("groups", "per_shard", "topic")

    def __init__(self, topic: str, *, per_shard: bool = False, groups: bool = False) -> None:
        self.topic = validate_topic(topic)
        self.per_shard = bool(per_shard)
        self.groups = bool(groups)

    def store(self, side: StoreSide) -> Use:
        return Use("stats", (self.topic, self.per_shard, self.groups))


class DueForecast(Call[Forecast]):
    """How many delayed jobs fall due in each ``step`` (seconds, at least 1,
    ms resolution) from now until ``until`` (a datetime, naive means UTC, or
    epoch seconds; later than now by the store's clock, and at most 10,000
    steps away), and after: a ``Forecast`` whose ``start`` is the store's
    now. Read from the store's index of due times, never from the jobs."""

    __slots__ = ("step_ms", "topic", "until_ms")

    def __init__(self, topic: str, *, until: datetime | float, step: float = 3600.0) -> None:
        self.until_ms, self.step_ms = forecast_args(topic, until, step)
        self.topic = topic

    def store(self, side: StoreSide) -> Use:
        return Use("forecast", (self.topic, self.until_ms, self.step_ms))


class Topics(Call[list[str]]):
    """Topics that hold jobs or are paused, sorted. Over HTTP with a token,
    the topics it may read."""

    __slots__ = ()

    def store(self, side: StoreSide) -> Use:
        return Use("topics", ())


class Dead(Call[list[JobInfo]]):
    """Dead jobs, oldest death first. Over HTTP, at most the server's page
    (1000) at once."""

    __slots__ = ("limit", "topic")

    def __init__(self, topic: str, limit: int = 100) -> None:
        check_limit(limit)
        self.topic = validate_topic(topic)
        self.limit = limit

    def store(self, side: StoreSide) -> Use:
        return Use("dead", (self.topic, self.limit))


class Requeue(Call[int]):
    """Move dead jobs (all, or those in ``ids``) back to ready with attempts
    reset; returns how many moved."""

    __slots__ = ("ids", "topic")

    def __init__(self, topic: str, ids: Sequence[str] | None = None) -> None:
        self.ids = requeue_ids(topic, ids)
        self.topic = topic

    def store(self, side: StoreSide) -> Use:
        return Use("requeue", (self.topic, self.ids))


class Purge(Call[int]):
    """Delete every job of the topic (and its remembered ids); returns how many jobs."""

    __slots__ = ("topic",)

    def __init__(self, topic: str) -> None:
        self.topic = validate_topic(topic)

    def store(self, side: StoreSide) -> Use:
        return Use("purge", (self.topic,))


class Pause(Call[None]):
    """Stop handing out jobs of the topic, or of its ``group`` alone (the
    other groups flow on); puts are still accepted."""

    __slots__ = ("group", "topic")

    def __init__(self, topic: str, *, group: str | None = None) -> None:
        self.topic = validate_topic(topic)
        self.group = None if group is None else validate_group(group)

    def store(self, side: StoreSide) -> Use:
        if self.group is None:
            return Use("set_paused", (self.topic, True))
        return Use("set_group_paused", (self.topic, self.group, True))


class Resume(Call[None]):
    """Hand out jobs of a paused topic again, or of its paused ``group``."""

    __slots__ = ("group", "topic")

    def __init__(self, topic: str, *, group: str | None = None) -> None:
        self.topic = validate_topic(topic)
        self.group = None if group is None else validate_group(group)

    def store(self, side: StoreSide) -> Use:
        if self.group is None:
            return Use("set_paused", (self.topic, False))
        return Use("set_group_paused", (self.topic, self.group, False))


class Events(Call[EventPage]):
    """The event log after ``cursor`` (None: the oldest kept), oldest first.
    Pass ``page.cursor`` back to resume where the page ended."""

    __slots__ = ("cursor", "limit", "topic")

    def __init__(
        self, topic: str | None = None, *, cursor: str | None = None, limit: int = 1000
    ) -> None:
        check_limit(limit)
        self.topic = None if topic is None else validate_topic(topic)
        self.cursor = cursor
        self.limit = limit

    def store(self, side: StoreSide) -> Use:
        return Use("events", (self.topic, self.cursor, self.limit))
