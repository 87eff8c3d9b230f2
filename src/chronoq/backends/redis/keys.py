"""Key names of the Redis backend. Every key one script touches shares the hash
tag ``{<topic>:<shard>}``, so the same scripts run on Redis Cluster."""

from __future__ import annotations

from chronoq.job import shard_of

__all__ = ["PARTS", "logs_key", "shard_keys", "shard_of", "topics_key"]

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
)


def shard_keys(prefix: str, topic: str, shard: int) -> list[str]:
    tag = f"{prefix}:{{{topic}:{shard}}}:"
    return [tag + part for part in PARTS]


def topics_key(prefix: str) -> str:
    """The set of topic names: outside any shard's slot, so written on its own."""
    return f"{prefix}:topics"


def logs_key(prefix: str) -> str:
    """The set of topics that ever had a job put: the event logs to read.
    Unlike the topic set, ``purge`` leaves a name here, so that an export
    still finds the events of a purged topic."""
    return f"{prefix}:logs"
