"""How a round trip on Redis Cluster is split, answered and sent again,
without I/O: the redirect plan (what a cluster answers before a command runs
is resent, for up to a budget of seconds), the units of a round trip and
their replies (cluster.py and cluster_aio.py send them)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
from redis.exceptions import AskError, MovedError

from chronoq.backends.redis.links.plan import (
    Address,
    SlotMap,
    Unit,
    address_of,
    redirect_of,
    units_of,
)
from chronoq.backends.redis.packing import Wired, unpacked
from chronoq.backends.redis.scripts import not_loaded

__all__ = ["RedirectPlan", "RoundTrip", "commands_of", "refused", "settle", "unit_replies"]

log = logging.getLogger("chronoq")


class RedirectPlan:
    """What to do with a round trip's units after one pass: which are done,
    which go again (and where), whether to wait first, and which nodes need
    the library. Shared by the blocking and the asyncio links."""

    def __init__(self, slots: SlotMap, budget: float) -> None:
        self.slots = slots
        self.deadline = time.monotonic() + budget
        self.attempt = 0
        self.load_on: set[Address] = set()

    def route(self, units: Iterable[Unit]) -> dict[Address, list[Unit]]:
        groups: dict[Address, list[Unit]] = {}
        for unit in units:
            node = unit.asking or self.slots.node_of(unit.slot)
            if node is None:  # a slot no primary serves (a failover under way)
                node = self.slots.candidates()[0]
                self.slots.stale = True
            groups.setdefault(node, []).append(unit)
        return groups

    def judge(self, node: Address, unit: Unit, replies: list[Any]) -> bool:
        """Whether ``unit`` (sent to ``node``) must go again; notes why."""
        unit.asking = None
        redirect = redirect_of(replies)
        if isinstance(redirect, MovedError):
            self.slots.moved(redirect.slot_id, address_of(redirect))
            return True
        if isinstance(redirect, AskError):
            unit.asking = address_of(redirect)
            return True
        if redirect is not None:  # TRYAGAIN, CLUSTERDOWN
            self.slots.stale = True
            return True
        if any(not_loaded(reply) for reply in replies):
            self.load_on.add(node)
            return True
        return False

    def pause(self) -> float | None:
        """How long to wait before the next pass (None: the budget is spent)."""
        now = time.monotonic()
        if now >= self.deadline:
            return None
        self.attempt += 1
        if self.attempt == 1:
            return 0.0  # a MOVED, an ASK or a missing library: at once
        backoff: float = min(0.005 * 2 ** (self.attempt - 2), 0.25)
        return min(backoff * (0.5 + random.random() / 2), self.deadline - now)


def unit_replies(unit: Unit, replies: list[Any], start: int) -> tuple[list[Any], int]:
    """The replies of ``unit`` in a node's reply list from ``start`` (an
    ``ASKING`` reply skipped), and where the next unit's begin."""
    if unit.asking is not None:
        start += 1
    end = start + len(unit.indexes)
    return replies[start:end], end


def commands_of(
    units: list[Unit], commands: list[tuple[Any, ...]], wait: tuple[Any, ...] | None
) -> list[tuple[Any, ...]]:
    """What one node is sent for ``units``: each after ``ASKING`` when it is
    redirected by an ASK, then ``WAIT`` when the round trip ends with one."""
    sent: list[tuple[Any, ...]] = []
    for unit in units:
        if unit.asking is not None:
            sent.append(("ASKING",))
        sent.extend(commands[i] for i in unit.indexes)
    if wait is not None:
        sent.append(wait)
    return sent


def settle(
    plan: RedirectPlan,
    node: Address,
    units: list[Unit],
    node_replies: list[Any],
    wait: tuple[Any, ...] | None,
    replies: list[Any],
    confirmed: list[int],
    on_reply: Callable[[int, Any], None] | None,
) -> list[Unit]:
    """One node's replies to its units: each unit's put in ``replies`` (and
    told to ``on_reply``), or the unit returned to go again; the node's
    ``WAIT`` reply noted when it took a part of the write."""
    again: list[Unit] = []
    start = 0
    wrote = False
    for unit in units:
        mine, start = unit_replies(unit, node_replies, start)
        if plan.judge(node, unit, mine):
            again.append(unit)
            continue
        wrote = True
        for index, reply in zip(unit.indexes, mine, strict=True):
            replies[index] = reply
            if on_reply is not None and not isinstance(reply, Exception):
                on_reply(index, reply)
    if wait is not None and wrote:
        confirmed.append(int(node_replies[-1]))
    return again


def refused(unit: Unit, replies: list[Any]) -> None:
    """The replies of a unit the cluster kept refusing: nothing of it ran."""
    # a ConnectionError: BackendUnavailable to the caller, who may retry
    refusal = redis.ConnectionError(
        "the cluster kept refusing the call (a slot migration or a failover that "
        "did not end within redirect_budget_ms); nothing was run"
    )
    for index in unit.indexes:
        replies[index] = refusal


class RoundTrip:
    """One pipeline over a cluster, whatever does the I/O (the blocking and
    the asyncio link): the commands split into units, the units still to
    send, the replies so far, and the redirect plan."""

    def __init__(
        self,
        slots: SlotMap,
        budget: float,
        commands: Iterable[Wired],
        on_reply: Callable[[int, Any], None] | None,
    ) -> None:
        listed = unpacked(list(commands))  # routed by key: see packing.py
        self.wait = listed.pop() if listed and str(listed[-1][0]).upper() == "WAIT" else None
        self.commands = listed
        self.on_reply = on_reply
        self.plan = RedirectPlan(slots, budget)
        self.pending = units_of(listed)
        self.replies: list[Any] = [None] * len(listed)
        self._confirmed: list[int] = []

    def shares(self) -> list[tuple[Address, list[Unit], list[tuple[Any, ...]]]]:
        """What each node is sent in this pass: its units and their commands."""
        return [
            (node, units, commands_of(units, self.commands, self.wait))
            for node, units in self.plan.route(self.pending).items()
        ]

    def settle(self, answers: Iterable[tuple[Address, list[Unit], list[Any]]]) -> float | None:
        """Each node's replies to its share; then how long to wait before the
        next pass (None: done, every unit answered or refused)."""
        again: list[Unit] = []
        for node, units, node_replies in answers:
            again += settle(
                self.plan, node, units, node_replies, self.wait,
                self.replies, self._confirmed, self.on_reply,
            )  # fmt: skip
        self.pending = again
        if not again:
            return None
        pause = self.plan.pause()
        if pause is None:  # the budget is spent: the refusals are the replies
            for unit in again:
                refused(unit, self.replies)
            self.pending = []
        return pause

    def result(self) -> list[Any]:
        """The replies, and ``WAIT``'s: the fewest replicas any writing node confirmed."""
        if self.wait is not None:
            return [*self.replies, min(self._confirmed) if self._confirmed else 0]
        return self.replies
