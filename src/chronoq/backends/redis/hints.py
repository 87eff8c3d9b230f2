"""Which shards of a topic a reserve should look at, and in what order.

With many shards (16 per topic on a cluster), a reserve that called every
shard would cost 16 round trips, mostly to empty shards. Each reply of the
reserve script says when its shard next changes (a delayed job due, a lease
running out); this process remembers it, per topic and shard, as the time to
look again, and a reserve calls only the shards whose time has come, the
longest-waiting first: a shard with a backlog cannot starve the others, as a
shard whose job became due earlier is served before it.

What this process does not see is learnt another way: a job put by another
process pushes a token on its shard's wake list, which a waiting consumer's
bell pops (bells.py) and which marks the shard; a shard last seen empty is
looked at again after ``IDLE_RECHECK_S`` by a consumer that does not wait.

A reply can be older than a mark: a reserve sent before a put, answered after
that put's token marked the shard. Each shard counts its marks, a reserve
notes the count when it sends (``stamp``), and a reply that a mark overtook
leaves the shard due: it must not bury the mark under "empty, look in a
second" (under load, a waiting consumer missed a job that way).
"""

from __future__ import annotations

import math
import time

__all__ = ["IDLE_RECHECK_S", "ShardHints"]

IDLE_RECHECK_S = 1.0
_MAX_TOPICS = 10_000


class ShardHints:
    """Per topic, per shard: when to look again (``time.monotonic()`` seconds)."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self._at: dict[str, list[float]] = {}
        self._idle: dict[str, set[int]] = {}
        self._marks: dict[str, list[int]] = {}
        self._turn = 0

    def _of(self, topic: str) -> list[float]:
        at = self._at.get(topic)
        if at is None:
            if len(self._at) > _MAX_TOPICS:  # topics come and go: stay bounded
                self._at.clear()
                self._idle.clear()
                self._marks.clear()
            at = self._at[topic] = [0.0] * self.shards
            self._idle[topic] = set()
            self._marks[topic] = [0] * self.shards
        return at

    def stamp(self, topic: str, shard: int) -> int:
        """The marks of ``shard`` so far: noted when a reserve is sent, given
        back to ``seen`` with its reply."""
        self._of(topic)
        return self._marks[topic][shard]

    def due(self, topic: str) -> list[int]:
        """The shards to call now, the one waiting longest first (then in turn)."""
        at = self._of(topic)
        now = time.monotonic()
        self._turn = (self._turn + 1) % self.shards
        turn, shards = self._turn, self.shards
        ready = [shard for shard in range(shards) if at[shard] <= now]
        ready.sort(key=lambda shard: (at[shard], (shard - turn) % shards))
        return ready

    def seen(
        self, topic: str, shard: int, leased: int, asked: int, wake_s: float, stamp: int
    ) -> None:
        """What a reserve call on ``shard`` found: ``leased`` of ``asked`` jobs,
        and when nothing: ``wake_s``, the time until the shard's next change
        (negative: none known, only a wake token tells); ``stamp``: the shard's
        marks when the call was sent."""
        at = self._of(topic)
        idle = self._idle[topic]
        now = time.monotonic()
        idle.discard(shard)
        if leased > 0 or self._marks[topic][shard] != stamp:
            # more may be ready, or a mark came after the call was sent: look
            # again, after the shards due before it
            at[shard] = now
        elif wake_s >= 0:
            at[shard] = now + wake_s
        else:
            at[shard] = now + IDLE_RECHECK_S
            idle.add(shard)

    def mark(self, topic: str, shard: int) -> None:
        """Something changed on ``shard``: look at it in the next reserve."""
        at = self._of(topic)
        self._marks[topic][shard] += 1
        at[shard] = min(at[shard], time.monotonic())
        self._idle[topic].discard(shard)

    def next_wake(self, topic: str) -> float | None:
        """Seconds until a shard of ``topic`` is due a look (None: only a wake
        token tells). A shard seen empty counts only for a consumer that does
        not wait: one that waits hears of it through its bells."""
        at = self._of(topic)
        idle = self._idle[topic]
        times = [at[shard] for shard in range(self.shards) if shard not in idle]
        if not times:
            return None
        soonest = min(times)
        return max(soonest - time.monotonic(), 0.0) if math.isfinite(soonest) else None
