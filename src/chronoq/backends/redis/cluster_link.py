"""Round trips on Redis Cluster, routed by chronoq itself (see slotmap.py):
each command goes to the primary that serves its key's slot, on that node's
connection of this thread (link.py), every node's share sent before any
reply is read, so the nodes work side by side.

What a cluster answers before a command runs is resent, never anything else:
MOVED (the slot has a new primary: the map is corrected and read again), ASK
(a migration: sent again to the importing node after ``ASKING``), TRYAGAIN
and CLUSTERDOWN (a migration under way, a failover: sent again after a
backoff), and ``Function not found`` (a node that became primary after the
library was loaded: it is loaded there, then the call is sent again) — for up
to ``redirect_budget`` seconds. A cut connection or a timeout is never resent:
the caller hears of it (Redis may have run the command).

``WAIT`` at the end of a round trip is sent on every node that took a part of
it, on the same connection, and its reply is the fewest replicas any node
confirmed: a ``WAIT`` on another node would confirm nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
from redis.exceptions import AskError, MovedError

from chronoq.backends.redis.link import Link, Sent
from chronoq.backends.redis.packing import Packed, Wired, unpacked
from chronoq.backends.redis.scripts import not_loaded
from chronoq.backends.redis.slotmap import (
    Address,
    SlotMap,
    Unit,
    address_of,
    parse_slots,
    redirect_of,
    units_of,
)

__all__ = ["ClusterLink", "RedirectPlan", "RoundTrip"]

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


class ClusterLink:
    """A cluster's primaries, each through a ``Link`` of its own."""

    def __init__(
        self,
        seeds: list[Address],
        connect: Callable[[str, int], redis.Redis],
        library: str,
        *,
        redirect_budget: float = 5.0,
    ) -> None:
        self.slots = SlotMap(seeds)
        self._connect = connect
        self._library = library  # FUNCTION LOAD's text
        self._budget = redirect_budget
        self._nodes: dict[Address, tuple[redis.Redis, Link]] = {}
        self._lock = threading.Lock()

    # -- nodes and the slot map ------------------------------------------------------

    def node(self, address: Address) -> tuple[redis.Redis, Link]:
        found = self._nodes.get(address)
        if found is None:
            with self._lock:
                found = self._nodes.get(address)
                if found is None:
                    client = self._connect(*address)
                    found = self._nodes[address] = (client, Link(client))
        return found

    def refresh(self) -> None:
        """Read the slot map from the first node that answers."""
        error: Exception | None = None
        for address in self.slots.candidates():
            try:
                reply = self.node(address)[1].call("CLUSTER", "SLOTS")
            except (redis.RedisError, OSError) as exc:
                error = exc
                continue
            ranges = parse_slots(reply, address[0])
            if ranges:
                fresh = {a for _, _, a in ranges} - set(self.slots.primaries())
                self.slots.load(ranges)
                for primary in fresh:
                    self._load_library(primary, quiet=True)
                return
        if error is not None:
            raise error
        raise redis.ConnectionError("no node of the cluster serves any slot")

    def _load_library(self, address: Address, quiet: bool = False) -> None:
        try:
            self.node(address)[1].call("FUNCTION", "LOAD", "REPLACE", self._library)
        except (redis.RedisError, OSError):
            if not quiet:
                raise
            # a node that is down now is loaded when a call finds it without the library
            log.debug("could not load the library on %s:%s yet", *address)

    # -- round trips -----------------------------------------------------------------

    def pipeline(
        self,
        commands: Iterable[Wired],
        raise_on_error: bool = True,
        on_reply: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """As ``Link.pipeline``, over the cluster's nodes (see the module's text)."""
        trip = RoundTrip(self.slots, self._budget, commands, on_reply)
        if self.slots.stale:
            self.refresh()
        while trip.pending:
            pause = trip.settle(self._exchange(trip.shares()))
            if pause is not None:
                time.sleep(pause)
                self._mend(trip.plan)
        replies = trip.result()
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    def _mend(self, plan: RedirectPlan) -> None:
        """Before sending again: the slot map read anew, the library loaded where missing."""
        if self.slots.stale:
            self.refresh()
        for address in plan.load_on:
            self._load_library(address)
        plan.load_on.clear()

    def _exchange(
        self, shares: list[tuple[Address, list[Unit], list[tuple[Any, ...]]]]
    ) -> list[tuple[Address, list[Unit], list[Any]]]:
        """Send each node its share, then read each node's replies."""
        sent: list[tuple[Address, list[Unit], Link, Sent]] = []
        try:
            for node, units, commands in shares:
                link = self.node(node)[1]
                sent.append((node, units, link, link.send(commands)))
            return [(node, units, link.collect(s)) for node, units, link, s in sent]
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            self.slots.stale = True  # a primary may have failed: read the map again
            raise

    def call(self, *args: Any) -> Any:
        return self.pipeline([args])[0]

    def roundtrip(self, command: Packed) -> Any:
        """As ``Link.roundtrip``, routed and redirected as ``pipeline``."""
        return self.pipeline([command], False)[0]

    def command(self, *args: Any) -> Any:
        """One command, its reply parsed the redis-py way (a set for SMEMBERS…)."""
        [reply] = self.pipeline([args])
        client = next(iter(self._nodes.values()))[0]
        callback = client.response_callbacks.get(str(args[0]).upper())
        return callback(reply) if callback is not None else reply

    def close(self) -> None:
        for client, link in list(self._nodes.values()):
            link.close()
            client.close()
