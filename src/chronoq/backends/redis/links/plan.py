"""Routing on Redis Cluster, without I/O: which slot a command's key is in,
which primary serves a slot (from ``CLUSTER SLOTS``), and how a round trip's
commands split into units that go to one node each.

chronoq routes its calls itself rather than through redis-py's
``RedisCluster``: that client sends ``COMMAND GETKEYS`` with the whole command
to another node before every ``FCALL`` (a second round trip, and the payload
twice), and routes ``WAIT`` and ``CLIENT UNBLOCK`` to a default node, where
they confirm or unblock nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, ResponseError, TryAgainError

__all__ = [
    "SLOTS",
    "Address",
    "SlotMap",
    "Unit",
    "command_slot",
    "parse_slots",
    "redirect_of",
    "units_of",
]

SLOTS = 16384
Address = tuple[str, int]

# the commands chronoq sends whose key is their first argument (the rest are
# FCALL, whose first key follows the function name and the key count, and
# commands with no key: TIME, WAIT, MULTI, EXEC, CLIENT, FUNCTION)
_FIRST_ARG_KEYED = frozenset(
    {
        "SADD",
        "SREM",
        "SMEMBERS",
        "XRANGE",
        "XTRIM",
        "HSET",
        "HSETNX",
        "HDEL",
        "HGETALL",
        "HSCAN",
        "ZADD",
        "ZREM",
        "ZRANGE",
        "DEL",
        "GET",
        "SET",
        "EXISTS",
        "LPUSH",
        "RPUSH",
        "BLPOP",
        "LLEN",
    }
)


def _encoded(key: Any) -> bytes:
    return key if isinstance(key, bytes) else str(key).encode()


def command_slot(command: Sequence[Any]) -> int | None:
    """The slot of ``command``'s key, None for a command without a key."""
    name = str(command[0]).upper()
    if name in ("FCALL", "FCALL_RO"):
        return key_slot(_encoded(command[3])) if int(command[2]) > 0 else None
    if name == "XINFO":
        return key_slot(_encoded(command[2]))
    if name in _FIRST_ARG_KEYED:
        return key_slot(_encoded(command[1]))
    return None


@dataclass(slots=True)
class Unit:
    """Commands that go to one node together: one command, or a whole
    ``MULTI`` … ``EXEC`` (refused as a whole when a redirect aborts it).
    ``indexes`` are the commands' places in the round trip; ``slot`` is the
    slot of its key (None: a unit with no key, sent to any node)."""

    indexes: list[int]
    slot: int | None
    asking: Address | None = None  # sent to this node after ASKING (a migration)


def units_of(commands: Sequence[tuple[Any, ...]]) -> list[Unit]:
    """The units of a round trip, in order. A command without a key goes with
    the next command that has one (``TIME`` before the read it dates), or
    with the last one; a transaction is one unit."""
    units: list[Unit] = []
    floating: list[int] = []
    open_tx: Unit | None = None
    for index, command in enumerate(commands):
        name = str(command[0]).upper()
        if open_tx is not None:
            open_tx.indexes.append(index)
            if open_tx.slot is None:
                open_tx.slot = command_slot(command)
            if name in ("EXEC", "DISCARD"):
                open_tx = None
            continue
        if name == "MULTI":
            open_tx = Unit([*floating, index], None)
            floating = []
            units.append(open_tx)
            continue
        slot = command_slot(command)
        if slot is None:
            floating.append(index)
            continue
        units.append(Unit([*floating, index], slot))
        floating = []
    if floating:
        if units:
            units[-1].indexes.extend(floating)
        else:
            units.append(Unit(floating, None))
    return units


def redirect_of(replies: Sequence[Any]) -> ResponseError | None:
    """The redirect that refused a unit, when one did: MOVED, ASK, TRYAGAIN or
    CLUSTERDOWN come before a command runs, and a transaction with one of
    them queued is aborted whole, so such a unit ran nothing."""
    for reply in replies:
        if isinstance(reply, MovedError | AskError | TryAgainError | ClusterDownError):
            return reply
    return None


def parse_slots(reply: Sequence[Any], seed_host: str) -> list[tuple[int, int, Address]]:
    """``CLUSTER SLOTS`` as ranges of slots and their primary's address. A
    node that announces no host ("" or "?") is on the host it was asked through."""
    ranges = []
    for entry in reply:
        first, last, primary = int(entry[0]), int(entry[1]), entry[2]
        host = primary[0].decode() if isinstance(primary[0], bytes) else str(primary[0])
        if host in ("", "?"):
            host = seed_host
        ranges.append((first, last, (host, int(primary[1]))))
    return ranges


class SlotMap:
    """Which primary serves each slot, as last learnt. A MOVED reply corrects
    one slot at once; ``stale`` asks for a full read of the map before the
    next call (after a cut connection, a CLUSTERDOWN, or a MOVED)."""

    def __init__(self, seeds: Sequence[Address]) -> None:
        self.seeds = list(seeds)
        self._slots: list[Address | None] = [None] * SLOTS
        self.stale = True

    def load(self, ranges: Sequence[tuple[int, int, Address]]) -> None:
        slots: list[Address | None] = [None] * SLOTS
        for first, last, address in ranges:
            for slot in range(first, last + 1):
                slots[slot] = address
        self._slots = slots
        self.stale = False

    def moved(self, slot: int, address: Address) -> None:
        self._slots[slot] = address
        self.stale = True  # other slots may have moved with it

    def node_of(self, slot: int | None) -> Address | None:
        if slot is None:
            return next((a for a in self._slots if a is not None), None)
        return self._slots[slot]

    def primaries(self) -> list[Address]:
        return sorted({a for a in self._slots if a is not None})

    def candidates(self) -> list[Address]:
        """Where to ask for the map: the known primaries, then the seeds."""
        known = self.primaries()
        return known + [seed for seed in self.seeds if seed not in known]


def address_of(redirect: MovedError | AskError) -> Address:
    return redirect.host, int(redirect.port)
