"""The limits' values and rules (chronoq/limits.py, docs/contract.md §10): what
set_limits and clear_limits make of what a store holds, the limits a group is
held to, each shard's share, the stored text, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from chronoq.errors import InvalidInput
from chronoq.limits import Limits, Rule, checked_rule, cleared, merged, shard_share

NONE = (None, None, None, None)


def set_limits(current: Limits, shards: int = 1, group: str | None = None, **kw: Any) -> Limits:
    topic = tuple(kw.get(n) for n in ("rate", "per", "burst", "concurrency"))
    defaults = tuple(kw.get(f"group_{n}") for n in ("rate", "per", "burst", "concurrency"))
    return merged(
        current,
        group=group,
        given=checked_rule(topic),  # type: ignore[arg-type]
        defaults=checked_rule(defaults, "group_"),  # type: ignore[arg-type]
        shards=shards,
    )


def test_set_limits_sets_what_it_is_given_and_keeps_the_rest() -> None:
    limits = set_limits(Limits("mail"), rate=200, per=1.0, burst=20, concurrency=50)
    assert limits.topic_rule == Rule(200.0, 1.0, 20, 50)
    limits = set_limits(limits, concurrency=10, group_rate=5, group_concurrency=2)
    assert limits.topic_rule == Rule(200.0, 1.0, 20, 10)
    assert limits.default == Rule(5.0, None, None, 2)
    limits = set_limits(limits, group="tenant-42", rate=50, concurrency=10)
    assert limits.groups == {"tenant-42": Rule(50.0, None, None, 10)}
    # a group's own replace the defaults field by field; the default group has none
    assert limits.of_group("tenant-42") == Rule(50.0, None, None, 10)
    assert limits.of_group("other") == limits.of_group(None) == Rule(5.0, None, None, 2)
    limits = set_limits(limits, group="tenant-7", concurrency=3)
    assert limits.of_group("tenant-7") == Rule(5.0, None, None, 3)


def test_clear_limits_clears_the_topics_and_defaults_or_one_groups() -> None:
    limits = set_limits(Limits("t"), rate=10, group_concurrency=2)
    limits = set_limits(limits, group="a", rate=1)
    limits = set_limits(limits, group="b", rate=2)
    one_less = cleared(limits, "a")
    assert set(one_less.groups) == {"b"} and one_less.topic_rule == limits.topic_rule
    none_left = cleared(cleared(one_less, None), "b")
    assert none_left.empty and not cleared(limits, None).empty


def test_the_bucket_defaults_to_a_pers_worth_of_the_rate() -> None:
    """The rate is jobs per ``per``: a ``per``'s worth is ``rate`` tokens,
    whatever ``per`` is (one a minute is a bucket of one, not of 60)."""
    assert Rule(rate=200).bucket == 200
    assert Rule(rate=2.5).bucket == 3 and Rule(rate=0.5, per=5).bucket == 1  # halves up
    assert Rule(rate=1_000_000, per=86_400).bucket == 1_000_000  # as a burst's own bound
    assert Rule(rate=5, per=60).bucket == 5 and Rule(rate=1, per=60).bucket == 1
    assert Rule(rate=0.1).bucket == 1
    assert Rule(rate=100, burst=10).bucket == 10
    assert Rule(concurrency=3).bucket is None


@pytest.mark.parametrize(
    "rule", [Rule(), Rule(200.0, 1.0, 20, 50), Rule(0.5, None, None, 3), Rule(None, 60.0, 7)]
)
def test_a_rule_is_kept_as_text_and_read_back(rule: Rule) -> None:
    assert Rule.unpack(rule.pack()) == rule


def test_each_shard_enforces_a_share_that_adds_up_to_no_more() -> None:
    rule = Rule(rate=100.0, burst=10, concurrency=10)
    for salt in range(4):
        shares = [shard_share(rule, s, 4, salt) for s in range(4)]
        assert sum(s.concurrency or 0 for s in shares) == 10
        assert sorted(s.concurrency or 0 for s in shares) == [2, 2, 3, 3]
        assert all(s.rate == 25.0 and s.burst == 2 for s in shares)
    assert shard_share(rule, 0, 1) is rule
    # each shard keeps one token of a burst below the shard count
    assert [shard_share(Rule(rate=1.0, burst=2), s, 4).burst for s in range(4)] == [1, 1, 1, 1]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({}, "at least one"),
        ({"rate": 0}, "rate must be"),
        ({"rate": float("inf")}, "rate must be"),
        ({"rate": True}, "rate must be"),
        ({"rate": 10**400}, "rate must be"),
        ({"per": 10**400}, "per must be"),
        ({"per": 0}, "per must be"),
        ({"burst": 1.5}, "burst must be"),
        ({"concurrency": 0}, "concurrency must be"),
        ({"group_concurrency": -1}, "group_concurrency must be"),
        ({"group": "a b", "rate": 1}, "invalid group"),
        ({"group": "a", "group_rate": 1}, "without group="),
        ({"group": "a"}, r"rate, per, burst or concurrency$"),
    ],
)
def test_bad_limits_are_refused(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        set_limits(Limits("t"), **kw)


def test_a_concurrency_below_the_shard_count_is_refused() -> None:
    with pytest.raises(InvalidInput, match="below the topic's 4 shards"):
        set_limits(Limits("t"), shards=4, concurrency=3)
    with pytest.raises(InvalidInput, match="group_concurrency 2 is below"):
        set_limits(Limits("t"), shards=4, group_concurrency=2)
    with pytest.raises(InvalidInput, match="group g's concurrency"):
        set_limits(Limits("t"), shards=4, group="g", concurrency=1)
    assert set_limits(Limits("t"), shards=4, concurrency=4).topic_rule.concurrency == 4


def test_limits_are_values() -> None:
    assert hash(Limits("t")) == hash(Limits("t")) and Limits("t") == Limits("t")
