"""Key names of the Redis backend. Every key one script touches shares the hash
tag ``{<topic>:<shard>}``, so the same scripts run on Redis Cluster.

On a cluster the tag of a shard may carry a suffix, ``{<topic>:<shard>.<k>}``:
the first ``k`` (0: no suffix) that puts shard ``s`` of ``n`` within
``NEAR`` slots after the ``s``-th of ``n`` equally spaced points of the slot
ring, counted from the slot of shard 0 (whose tag is always plain). Plain
tags land where CRC16 puts them, and 16 shards over 3 primaries split within
±15% for only a fifth of topic names; on points spaced this way, any topic's
shards fall on primaries that hold equal slot ranges (as ``redis-cli
--cluster create`` makes them) in proportion, give or take one (5, 5 and 6
of 16 on 3), while the points of different topics are offset by their
names, so that no primary is favoured across topics.
"""

from __future__ import annotations

from functools import lru_cache

from redis.crc import key_slot

from chronoq.backends.redis.links.plan import SLOTS
from chronoq.job import shard_of

__all__ = [
    "NEAR",
    "PARTS",
    "SLOTS",
    "logs_key",
    "shard_keys",
    "shard_of",
    "shard_tag",
    "topics_key",
]

NEAR = 32  # slots: how close to its point a shard's tag must land (about 512 tries)

#: the order of KEYS in every script (see lua/lib/1_keys.lua)
PARTS = (
    "jobs",
    "delayed",
    "ready",
    "leased",
    "dead",
    "forget",
    "events",
    "wake",
    "paused",
    "seq",
    "evseq",
    "timer",
    # never written: on Redis Cluster, a call whose slot is being migrated is
    # then refused before it runs (TRYAGAIN on the source, which still has
    # other keys of the shard; ASK, then TRYAGAIN on the target) and sent
    # again after the migration, rather than run while the shard's keys are
    # split between two nodes, where any access to a key missing on the node
    # fails the script half-way ("non local key"), after its first writes
    "guard",
    # the far tier (lua/lib/7_far.lua): its buckets, their counts, the index of
    # the ids that do not name their bucket; a bucket's pages are
    # <far>:<start>:<page>, under the same hash tag
    "far",
    "farn",
    "faridx",
)


def _slot(tag: str) -> int:
    return int(key_slot(tag.encode()))  # a tag has no braces: its whole text is hashed


@lru_cache(maxsize=65536)  # ~512 CRCs a spread tag: each process finds it once
def shard_tag(topic: str, shard: int, *, shards: int, spread: bool) -> str:
    """The hash tag of ``shard`` of ``topic``: ``<topic>:<shard>``, with the
    suffix that spreads it over the slot ring when ``spread`` (see above)."""
    plain = f"{topic}:{shard}"
    if not spread or shards == 1:
        return plain
    base = _slot(f"{topic}:0")
    point = shard * SLOTS // shards
    near = max(min(NEAR, SLOTS // shards), 1)
    for k in range(64 * SLOTS // near):  # each try lands near its point with odds near/SLOTS
        tag = f"{plain}.{k}" if k else plain
        if 0 <= (_slot(tag) - base) % SLOTS - point < near:
            return tag
    return plain  # odds of e**-64: not met in practice


def shard_keys(prefix: str, topic: str, shard: int, *, shards: int, spread: bool) -> list[str]:
    """Every key of a shard (PARTS); ``spread``: the tags of a cluster."""
    tag = f"{prefix}:{{{shard_tag(topic, shard, shards=shards, spread=spread)}}}:"
    return [tag + part for part in PARTS]


def topics_key(prefix: str) -> str:
    """The set of topic names: outside any shard's slot, so written on its own."""
    return f"{prefix}:topics"


def logs_key(prefix: str) -> str:
    """The set of topics that ever had a job put: the event logs to read.
    Unlike the topic set, ``purge`` leaves a name here, so that an export
    still finds the events of a purged topic."""
    return f"{prefix}:logs"
