"""A topic's flow control on its panel (docs/flow.md): its limits (the
topic's own, the group defaults, each group's own) and the groups with the
largest backlogs, each with a pause or resume button. The rows as values,
drawn by flow.html."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chronoq.limits import GROUPS_SHOWN, Limits, Rule
from chronoq.server.ui.formats import segment
from chronoq.server.ui.templates import render
from chronoq.server.ui.widgets import Button

__all__ = ["GROUP_ROWS", "LIMIT_ROWS", "flow_view"]

GROUP_ROWS = 25  # groups by backlog on the panel; paused ones beyond are kept
LIMIT_ROWS = 100  # groups with limits of their own on the panel


@dataclass(frozen=True)
class LimitRow:
    """Whom a rule holds (``key``: "topic", "default" or the group's name)
    and its rate, per, burst and concurrency as text."""

    key: str
    name: str
    cells: list[str]


@dataclass(frozen=True)
class GroupRow:
    group: str  # "" for the default group, which has no name
    name: str
    ready: int
    reserved: int
    paused: bool
    buttons: list[Button]


def _number(value: float | None) -> str:
    return "none" if value is None else f"{value:.15g}"


def _cells(rule: Rule, own: Rule) -> list[str]:
    """``rule``'s fields (what the row is held to); a value ``own`` does not
    set, a group default's or one the rate implies, in parentheses, as the
    CLI's ``limits`` shows it."""
    cells = []
    for value, set_here in rule.shown(own):
        text = _number(value)
        cells.append(f"({text})" if value is not None and not set_here else text)
    return cells


def _limit_rows(limits: Limits) -> list[LimitRow]:
    if limits.empty:
        return []
    rows = [
        LimitRow("topic", "topic", _cells(limits.topic_rule, limits.topic_rule)),
        LimitRow("default", "group default", _cells(limits.default, limits.default)),
    ]
    for name in sorted(limits.groups)[:LIMIT_ROWS]:
        own = limits.groups[name]
        rows.append(LimitRow(name, f"group {name}", _cells(limits.of_group(name), own)))
    return rows


def _group_row(topic: str, entry: dict[str, Any], acts: bool) -> GroupRow:
    group: str | None = entry["group"]
    paused = bool(entry["paused"])
    buttons = []
    # the default group has no name to pause it by: pausing it is pausing the topic
    if acts and group is not None:
        base = f"topics/{segment(topic)}/groups/{segment(group)}"
        buttons.append(
            Button("Resume", f"{base}/resume") if paused else Button("Pause", f"{base}/pause")
        )
    return GroupRow(
        group or "", group or "(default)", entry["ready"], entry["reserved"], paused, buttons
    )


def _shown(groups: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The largest backlogs, and every paused group (so that it can be
    resumed from here even when it has no due job)."""
    return [*groups[:GROUP_ROWS], *(g for g in groups[GROUP_ROWS:] if g["paused"])]


def _groups_note(listed: int, shown: int) -> str:
    note = "Largest backlog first (due jobs); a paused group is listed even when empty."
    if listed > shown:
        note += f" {listed - shown} more groups with smaller backlogs are not shown."
    if listed >= GROUPS_SHOWN:
        note += f" The store counts the {GROUPS_SHOWN} largest."
    return note


def flow_view(topic: str, limits: Limits, groups: Sequence[dict[str, Any]], acts: bool) -> str:
    """A topic's limits and its groups (``stats(topic, groups=True)["groups"]``),
    with a pause or resume button per named group when ``acts``."""
    named = any(entry["group"] is not None for entry in groups)
    shown = _shown(groups) if named else []
    more = len(limits.groups) - LIMIT_ROWS
    return render(
        "flow.html",
        here=f"topics/{segment(topic)}/flow",
        limits=_limit_rows(limits),
        more_limits=f"{more} more groups have limits of their own." if more > 0 else "",
        groups=[_group_row(topic, entry, acts) for entry in shown],
        groups_note=_groups_note(len(groups), len(shown)) if shown else "",
    )
