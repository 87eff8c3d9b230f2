"""Bodies and answers of the limits routes (docs/contract.md §10): their
JSON shapes, which the OpenAPI document shows."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from chronoq.limits import MAX_CONCURRENCY, MAX_PER, MAX_RATE

__all__ = ["GroupPaused", "LimitsBody", "RuleBody", "SetLimitsBody", "set_limits_args"]


Rate = Annotated[float, Meta(gt=0, le=MAX_RATE, description="jobs handed out per `per`")]
Per = Annotated[float, Meta(ge=0.001, le=MAX_PER, description="seconds (default 1)")]
# whole numbers: JSON's 5.0 is one too (as in wire.Attempts)
Burst = Annotated[
    float, Meta(ge=1, le=MAX_CONCURRENCY, multiple_of=1, description="the token bucket's size")
]
Slots = Annotated[
    float, Meta(ge=1, le=MAX_CONCURRENCY, multiple_of=1, description="jobs under a live lease")
]


class RuleBody(Struct, omit_defaults=True):
    """One set of limits; a field left out is not set."""

    rate: Rate | None = None
    per: Per | None = None
    burst: Burst | None = None
    concurrency: Slots | None = None


class SetLimitsBody(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The fields to set (the others are kept): for the topic, or with
    ``?group=`` for that group; ``group_*`` set every group's default."""

    rate: Rate | None = None
    per: Per | None = None
    burst: Burst | None = None
    concurrency: Slots | None = None
    group_rate: Rate | None = None
    group_per: Per | None = None
    group_burst: Burst | None = None
    group_concurrency: Slots | None = None


class LimitsBody(Struct):
    """A topic's limits: its own, every group's default, each group's own."""

    topic: str
    topic_rule: RuleBody
    default: RuleBody
    groups: dict[str, RuleBody]


def set_limits_args(body: SetLimitsBody) -> dict[str, float | int | None]:
    """The body as ``set_limits`` takes it (bursts and slots as ints)."""
    args: dict[str, float | int | None] = {}
    for name in body.__struct_fields__:
        value = getattr(body, name)
        whole = name.endswith(("burst", "concurrency")) and value is not None
        args[name] = int(value) if whole else value
    return args


class GroupPaused(Struct):
    group: str
    paused: bool
