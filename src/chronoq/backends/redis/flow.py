"""Flow control on the Redis backend (docs/contract.md §10): a topic's limits
and paused groups, written to every shard of the topic (each enforces its
share: lua/lib/6_flow.lua), and its groups' counts, merged over the shards.
Written once, without I/O, as core.py's are (operations.py finds them here).

``set_limits`` reads the limits from the first shard, merges what it is given
(``chronoq.limits.merged``) and writes the result to every shard: two
processes changing one topic's limits at the same moment may each keep the
other's fields unmerged (the last write wins); the turns and the limits
themselves are checked in each shard's own reserve step."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from chronoq.backends.redis.codec import as_text, by_name
from chronoq.backends.redis.core import RedisCore
from chronoq.backends.redis.steps import Steps
from chronoq.limits import GROUPS_SHOWN, Limits, Rule, cleared, merged

__all__ = ["clear_limits", "group_counts", "limits", "set_group_paused", "set_limits"]


def limits(core: RedisCore, topic: str) -> Steps[Limits]:
    reply = yield from core.run("limits_read", topic, 0)
    groups = {name: Rule.unpack(as_text(rule)) for name, rule in by_name(reply[2:]).items()}
    return Limits(
        topic,
        Rule.unpack(as_text(reply[0])),
        Rule.unpack(as_text(reply[1])),
        MappingProxyType(dict(sorted(groups.items()))),
    )


def _flags(limits: Limits) -> str:
    """What the shards must keep for these limits (lua/lib/6_flow.lua, flow_flags):
    't' the topic's leases, 'g' each group's, 'r' groups waiting for a token, 'o'
    groups with rules of their own."""
    rules = [limits.default, *limits.groups.values()]
    return (
        "t" * (limits.topic_rule.concurrency is not None)
        + "g" * any(rule.concurrency is not None for rule in rules)
        + "r" * any(rule.rate is not None for rule in rules)
        + "o" * bool(limits.groups)
    )


def _store(core: RedisCore, old: Limits, new: Limits, group: str | None) -> Steps[None]:
    resets = "t" * (new.topic_rule != old.topic_rule) + "d" * (new.default != old.default)
    own = ""
    if group is not None:
        rule = new.groups.get(group)
        own = "" if rule is None else rule.pack()
        resets += "g" * (rule != old.groups.get(group))
    shards, flags = core.shards, _flags(new)
    rules = [new.topic_rule.pack(), new.default.pack(), group or "", own, resets, flags]
    calls = ((n, [f"{n}:{shards}", *rules]) for n in range(shards))
    yield from core.run_many("limits", new.topic, calls)


def set_limits(
    core: RedisCore, topic: str, group: str | None, given: Rule, defaults: Rule
) -> Steps[Limits]:
    old = yield from limits(core, topic)
    new = merged(old, group=group, given=given, defaults=defaults, shards=core.shards)
    yield from _store(core, old, new, group)
    return new


def clear_limits(core: RedisCore, topic: str, group: str | None) -> Steps[Limits]:
    old = yield from limits(core, topic)
    new = cleared(old, group)
    if new != old:
        yield from _store(core, old, new, group)
    return new


def set_group_paused(core: RedisCore, topic: str, group: str, paused: bool) -> Steps[None]:
    flag = "1" if paused else "0"
    yield from core.run_many("group_pause", topic, ((n, [group, flag]) for n in range(core.shards)))


def group_counts(core: RedisCore, topic: str) -> Steps[list[dict[str, Any]]]:
    """The groups with the largest backlogs over every shard, largest first."""
    calls = ((n, [str(GROUPS_SHOWN)]) for n in range(core.shards))
    replies = yield from core.run_many("groups", topic, calls)
    counts: dict[str, dict[str, Any]] = {}
    for reply in replies:
        for i in range(0, len(reply), 4):
            name = as_text(reply[i])
            entry = counts.setdefault(
                name, {"group": name or None, "ready": 0, "reserved": 0, "paused": False}
            )
            entry["ready"] += int(reply[i + 1])
            entry["reserved"] += int(reply[i + 2])
            entry["paused"] = entry["paused"] or reply[i + 3] == 1
    ranked = sorted(counts.values(), key=lambda g: (-g["ready"], g["group"] or ""))
    return ranked[:GROUPS_SHOWN]
