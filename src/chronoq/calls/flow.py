"""Calls of flow control (docs/contract.md §10): a topic's limits, its
groups' defaults and each group's own."""

from __future__ import annotations

from chronoq.calls.call import Call, StoreSide, Use
from chronoq.job import validate_topic
from chronoq.limits import Limits, checked_rule, given_rules
from chronoq.names import validate_group

__all__ = ["ClearLimits", "SetLimits", "TopicLimits"]


class SetLimits(Call[Limits]):
    """Set the limits given and keep the others: ``rate`` jobs handed out per
    ``per`` seconds (default 1) with a bucket of ``burst`` (default a
    ``per``'s worth of the rate), at most ``concurrency`` jobs under a live
    lease; for the whole topic, or for ``group`` alone when it is named
    (its own limits, over the defaults field by field). ``group_rate``,
    ``group_per``, ``group_burst`` and ``group_concurrency`` set every
    group's default. Returns the topic's limits. On a sharded topic each
    shard enforces its share, and a concurrency below the shard count is
    refused (docs/contract.md §10)."""

    __slots__ = ("defaults", "given", "group", "topic")

    def __init__(
        self,
        topic: str,
        *,
        group: str | None = None,
        rate: float | None = None,
        per: float | None = None,
        burst: int | None = None,
        concurrency: int | None = None,
        group_rate: float | None = None,
        group_per: float | None = None,
        group_burst: int | None = None,
        group_concurrency: int | None = None,
    ) -> None:
        self.topic = validate_topic(topic)
        self.group = None if group is None else validate_group(group)
        self.given, self.defaults = given_rules(
            self.group,
            checked_rule((rate, per, burst, concurrency)),
            checked_rule((group_rate, group_per, group_burst, group_concurrency), "group_"),
        )

    def store(self, side: StoreSide) -> Use:
        return Use("set_limits", (self.topic, self.group, self.given, self.defaults))


class TopicLimits(Call[Limits]):
    """The topic's limits: its own, every group's default and each group's own."""

    __slots__ = ("topic",)

    def __init__(self, topic: str) -> None:
        self.topic = validate_topic(topic)

    def store(self, side: StoreSide) -> Use:
        return Use("limits", (self.topic,))


class ClearLimits(Call[Limits]):
    """Clear the topic's limits and every group's default (``group`` None),
    or one group's own limits; returns the topic's limits."""

    __slots__ = ("group", "topic")

    def __init__(self, topic: str, group: str | None = None) -> None:
        self.topic = validate_topic(topic)
        self.group = None if group is None else validate_group(group)

    def store(self, side: StoreSide) -> Use:
        return Use("clear_limits", (self.topic, self.group))
