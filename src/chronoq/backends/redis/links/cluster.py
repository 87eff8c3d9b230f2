"""Round trips on Redis Cluster, routed by chronoq itself (see plan.py):
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
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis

from chronoq.backends.redis.links.plan import (
    Address,
    SlotMap,
    Unit,
    parse_slots,
)
from chronoq.backends.redis.links.redirects import (
    RedirectPlan,
    RoundTrip,
)
from chronoq.backends.redis.links.single import Link, Sent
from chronoq.backends.redis.packing import Packed, Wired

__all__ = ["ClusterLink"]

log = logging.getLogger("chronoq")


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
