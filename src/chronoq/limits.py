"""Flow-control limits of a topic (docs/contract.md §10; issue 28, being built):
the values, their checks, how ``set_limits`` and ``clear_limits`` change what a
store holds, the limits a group is held to, each shard's share of them, and the
text a store keeps them as. No I/O: both stores and the facades share this.

A ``Rule`` is one set of limits (a rate of jobs handed out per ``per`` seconds,
a token bucket of ``burst``; a number of live leases), any field unset. A
topic's ``Limits`` hold three kinds: the topic's own (every job of the topic),
the group defaults, and each named group's own, which replace the defaults
field by field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from chronoq.errors import InvalidInput
from chronoq.job.codec import check_int, finite
from chronoq.names import validate_group

__all__ = [
    "GROUPS_SHOWN",
    "MAX_CONCURRENCY",
    "MAX_PER",
    "MAX_RATE",
    "Limits",
    "Rule",
    "checked_rule",
    "cleared",
    "given_rules",
    "merged",
    "refilled",
    "shard_share",
    "token_wait_ms",
]

#: stats(groups=True) shows the groups with the largest backlogs, at most this many
GROUPS_SHOWN = 100
MAX_RATE = 1_000_000.0  # jobs per `per`
MAX_PER = 86_400.0  # seconds: a day
MAX_CONCURRENCY = 1_000_000
_FIELDS = ("rate", "per", "burst", "concurrency")


@dataclass(frozen=True, slots=True)
class Rule:
    """One set of limits; None: not set (no limit, or the default's)."""

    rate: float | None = None
    per: float | None = None
    burst: int | None = None
    concurrency: int | None = None

    def over(self, base: Rule) -> Rule:
        """This rule's fields, and ``base``'s where this one has none."""
        return Rule(
            base.rate if self.rate is None else self.rate,
            base.per if self.per is None else self.per,
            base.burst if self.burst is None else self.burst,
            base.concurrency if self.concurrency is None else self.concurrency,
        )

    @property
    def bucket(self) -> int | None:
        """The token bucket's size: ``burst``, else a ``per``'s worth of the
        rate (``rate`` tokens: the rate is jobs per ``per``)."""
        if self.rate is None:
            return None
        if self.burst is not None:
            return self.burst
        # halves up (not Python's to even): the Lua side rounds the same way
        return min(max(1, math.floor(self.rate + 0.5)), MAX_CONCURRENCY)

    @property
    def empty(self) -> bool:
        return all(getattr(self, n) is None for n in _FIELDS)

    def shown(self, own: Rule) -> list[tuple[float | None, bool]]:
        """What a row of limits shows of this rule (what a row is held to):
        rate, per (1 s when a rate implies it), burst (the bucket; a burst set
        without a rate too) and concurrency, each with whether ``own`` (the
        row's own rule) sets it: the CLI's and the dashboard's tables."""
        per = self.per if self.per is not None or self.rate is None else 1.0
        burst = self.burst if self.burst is not None else self.bucket
        return [
            (self.rate, own.rate is not None),
            (per, own.per is not None),
            (burst, own.burst is not None),
            (self.concurrency, own.concurrency is not None),
        ]

    def as_dict(self) -> dict[str, float | int]:
        """The fields that are set (JSON over HTTP, the CLI)."""
        return {n: getattr(self, n) for n in _FIELDS if getattr(self, n) is not None}

    @classmethod
    def of_dict(cls, fields: Mapping[str, Any]) -> Rule:
        return checked_rule(tuple(fields.get(n) for n in _FIELDS))  # type: ignore[arg-type]

    def pack(self) -> str:
        """The text a store keeps: the four fields, ':' between, '' for unset;
        '' for a rule with none."""
        if self.empty:
            return ""
        return ":".join("" if getattr(self, n) is None else repr(getattr(self, n)) for n in _FIELDS)

    @classmethod
    def unpack(cls, text: str | None) -> Rule:
        """The rule ``pack`` made (None or '': no field set)."""
        if not text:
            return cls()
        rate, per, burst, concurrency = text.split(":")
        return cls(
            float(rate) if rate else None,
            float(per) if per else None,
            int(burst) if burst else None,
            int(concurrency) if concurrency else None,
        )


_NONE = Rule()


@dataclass(frozen=True, slots=True)
class Limits:
    """A topic's limits: ``topic_rule`` for the whole topic, ``default`` for
    every group, ``groups`` each named group's own."""

    topic: str
    topic_rule: Rule = _NONE
    default: Rule = _NONE
    groups: Mapping[str, Rule] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def of_group(self, group: str | None) -> Rule:
        """The limits ``group`` is held to (None: the default group)."""
        own = self.groups.get(group) if group is not None else None
        return self.default if own is None else own.over(self.default)

    @property
    def empty(self) -> bool:
        return self.topic_rule.empty and self.default.empty and not self.groups

    def as_dict(self) -> dict[str, Any]:
        """As JSON carries it: ``topic``, ``topic_rule``, ``default`` and
        ``groups`` (name: rule), each rule with the fields that are set."""
        return {
            "topic": self.topic,
            "topic_rule": self.topic_rule.as_dict(),
            "default": self.default.as_dict(),
            "groups": {name: rule.as_dict() for name, rule in self.groups.items()},
        }

    @classmethod
    def of_dict(cls, fields: Mapping[str, Any]) -> Limits:
        groups = {name: Rule.of_dict(rule) for name, rule in fields.get("groups", {}).items()}
        return cls(
            fields["topic"],
            Rule.of_dict(fields.get("topic_rule", {})),
            Rule.of_dict(fields.get("default", {})),
            MappingProxyType(groups),
        )


def _number(value: object, name: str, low: float, high: float, unit: str) -> float:
    """A number in (0, high] and at least ``low``, as a float."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and finite(value)
        and 0 < value <= high
        and value >= low
    ):
        return float(value)
    bounds = f"from {low:g} to {high:,.0f}" if low > 0 else f"above 0 and at most {high:,.0f}"
    raise InvalidInput(f"{name} must be {unit} {bounds}, got {value!r}")


def checked_rule(values: tuple[object, object, object, object], prefix: str = "") -> Rule:
    """A ``Rule`` of (rate, per, burst, concurrency) as given to ``set_limits``
    (None: not given), each checked; ``prefix`` names them in errors."""
    rate, per, burst, concurrency = values
    return Rule(
        None if rate is None else _number(rate, prefix + "rate", 0, MAX_RATE, "a number"),
        None if per is None else _number(per, prefix + "per", 0.001, MAX_PER, "seconds"),
        None if burst is None else check_int(burst, prefix + "burst", 1, MAX_CONCURRENCY),
        None
        if concurrency is None
        else check_int(concurrency, prefix + "concurrency", 1, MAX_CONCURRENCY),
    )


def _check_split(rule: Rule, shards: int, what: str) -> None:
    if rule.concurrency is not None and rule.concurrency < shards:
        raise InvalidInput(
            f"{what}concurrency {rule.concurrency} is below the topic's {shards} shards: each "
            "shard enforces its share of a limit (docs/contract.md §10); use an unsharded "
            "topic for a tighter one"
        )


def given_rules(group: str | None, given: Rule, defaults: Rule) -> tuple[Rule, Rule]:
    """``given`` and ``defaults`` (``checked_rule``) if ``set_limits`` may set
    them together: at least one field, and no defaults with a group."""
    if group is not None and not defaults.empty:
        raise InvalidInput(
            "group_rate, group_per, group_burst and group_concurrency set every "
            "group's default: give them without group="
        )
    if given.empty and defaults.empty:
        raise InvalidInput(
            "give at least one limit: rate, per, burst or concurrency"
            + ("" if group is not None else ", or a group_* default")
        )
    return given, defaults


def merged(
    current: Limits,
    *,
    group: str | None,
    given: Rule,
    defaults: Rule,
    shards: int,
) -> Limits:
    """``current`` with the fields ``set_limits`` was given (``checked_rule``):
    ``given`` for the topic, or for ``group`` when one is named; ``defaults``
    (the ``group_*`` arguments) for every group's default."""
    given, defaults = given_rules(group, given, defaults)
    if group is not None:
        group = validate_group(group)
    if group is not None:
        own = given.over(current.groups.get(group, _NONE))
        _check_split(own, shards, f"group {group}'s ")
        groups = dict(current.groups)
        groups[group] = own
        return replace(current, groups=MappingProxyType(groups))
    topic_rule, default = given.over(current.topic_rule), defaults.over(current.default)
    _check_split(topic_rule, shards, "")
    _check_split(default, shards, "group_")
    return replace(current, topic_rule=topic_rule, default=default)


def cleared(current: Limits, group: str | None) -> Limits:
    """``clear_limits``: the topic's limits and the group defaults (``group``
    None), or one group's own."""
    if group is None:
        return replace(current, topic_rule=_NONE, default=_NONE)
    group = validate_group(group)
    groups = {name: rule for name, rule in current.groups.items() if name != group}
    return replace(current, groups=MappingProxyType(groups))


def shard_share(rule: Rule, shard: int, shards: int, salt: int = 0) -> Rule:
    """What shard ``shard`` of ``shards`` enforces of ``rule``: the rate over
    the shards, the burst too (rounded down, at least 1), and the leases split
    so that the first ``concurrency mod shards`` shards, counted from ``salt``
    (a hash of the group), take one more. The shares add up to no more than
    the rule, but for a burst below the shard count (each shard keeps one)."""
    if shards == 1:
        return rule
    rate = None if rule.rate is None else rule.rate / shards
    bucket = rule.bucket
    burst = None if bucket is None else max(1, bucket // shards)
    concurrency = rule.concurrency
    if concurrency is not None:
        extra = 1 if (shard - salt) % shards < concurrency % shards else 0
        concurrency = concurrency // shards + extra
    return Rule(rate, rule.per, burst, concurrency)


def refilled(tokens: float | None, since_ms: int, now_ms: int, rule: Rule) -> float:
    """A token bucket of ``rule`` holding ``tokens`` at ``since_ms`` (None:
    full), as of ``now_ms``."""
    bucket = rule.bucket or 1
    if tokens is None or rule.rate is None:
        return float(bucket)
    gained = max(now_ms - since_ms, 0) * rule.rate / ((rule.per or 1.0) * 1000)
    return min(float(bucket), tokens + gained)


def token_wait_ms(tokens: float, rule: Rule) -> float:
    """Ms until a bucket of ``rule`` holding ``tokens`` holds one whole token."""
    if tokens >= 1 or rule.rate is None:
        return 0.0
    return (1 - tokens) * (rule.per or 1.0) * 1000 / rule.rate
