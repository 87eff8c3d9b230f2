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
bell pops (bells.py) and which marks the shard. A consumer that does not
wait hears no token: for it, every shard is also looked at again
``IDLE_RECHECK_S`` after its last look, whatever its next known change (a
job delayed by an hour must not hide a job put there meanwhile). A waiting
consumer sleeps until the next known change only (``next_wake``).

A reply can be older than a mark: a reserve sent before a put, answered after
that put's token marked the shard. Each shard counts its marks, a reserve
notes the count when it sends (``stamp``), and a reply that a mark overtook
leaves the shard due: it must not bury the mark under "empty, look in a
second" (under load, a waiting consumer missed a job that way).
"""

from __future__ import annotations

import math
import threading
import time

__all__ = ["IDLE_RECHECK_S", "ShardHints"]

IDLE_RECHECK_S = 1.0
_MAX_TOPICS = 10_000


class _Topic:
    """One topic's shards: ``at`` the next known change (inf: none known),
    ``look`` the next look regardless, ``marks`` the marks so far."""

    __slots__ = ("at", "look", "marks")

    def __init__(self, shards: int) -> None:
        self.at = [0.0] * shards
        self.look = [0.0] * shards
        self.marks = [0] * shards


class ShardHints:
    """Per topic, per shard: when to look again (``time.monotonic()`` seconds).
    Used by the consumers' threads and the bells' threads at once: one lock."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self._topics: dict[str, _Topic] = {}
        self._lock = threading.Lock()
        self._turn = 0

    def _of(self, topic: str) -> _Topic:  # under the lock
        found = self._topics.get(topic)
        if found is None:
            if len(self._topics) > _MAX_TOPICS:  # topics come and go: stay bounded
                self._topics.clear()
            found = self._topics[topic] = _Topic(self.shards)
        return found

    def due(self, topic: str) -> list[int]:
        """The shards to call now, the one waiting longest first (then in turn)."""
        now = time.monotonic()
        with self._lock:
            one = self._of(topic)
            self._turn = (self._turn + 1) % self.shards
            turn, shards = self._turn, self.shards
            when = [min(one.at[shard], one.look[shard]) for shard in range(shards)]
        ready = [shard for shard in range(shards) if when[shard] <= now]
        ready.sort(key=lambda shard: (when[shard], (shard - turn) % shards))
        return ready

    def stamp(self, topic: str, shard: int) -> int:
        """The marks of ``shard`` so far: noted when a reserve is sent, given
        back to ``seen`` with its reply."""
        with self._lock:
            return self._of(topic).marks[shard]

    def seen(
        self, topic: str, shard: int, leased: int, asked: int, wake_s: float, stamp: int
    ) -> None:
        """What a reserve call on ``shard`` found: ``leased`` of ``asked`` jobs,
        and when nothing: ``wake_s``, the time until the shard's next change
        (negative: none known, only a wake token tells); ``stamp``: the shard's
        marks when the call was sent."""
        now = time.monotonic()
        with self._lock:
            one = self._of(topic)
            one.look[shard] = now + IDLE_RECHECK_S
            if leased > 0 or one.marks[shard] != stamp:
                # more may be ready, or a mark came after the call was sent: look
                # again, after the shards due before it
                one.at[shard] = now
            elif wake_s >= 0:
                one.at[shard] = now + wake_s
            else:
                one.at[shard] = math.inf

    def mark(self, topic: str, shard: int) -> None:
        """Something changed on ``shard``: look at it in the next reserve."""
        now = time.monotonic()
        with self._lock:
            one = self._of(topic)
            one.marks[shard] += 1
            one.at[shard] = min(one.at[shard], now)

    def next_wake(self, topic: str) -> float | None:
        """Seconds until the next known change on a shard of ``topic`` (None:
        only a wake token tells). For a consumer that waits: it hears of the
        rest through its bells."""
        with self._lock:
            soonest = min(self._of(topic).at)
        return max(soonest - time.monotonic(), 0.0) if math.isfinite(soonest) else None
