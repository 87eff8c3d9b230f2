"""Waking consumers of a Redis store without polling (docs/contract.md §6).

Scripts push tokens onto each shard's ``wake`` list when they make jobs
available; a waiting consumer blocks in BLPOP on those lists, so each token
wakes one consumer, not all of them. The due-time wake-up is timed here, in
the client: an idle redis-server ends a blocking command's timeout only on its
``hz`` tick (every 100 ms by default), so the server's timeout is only a
backstop; when our own timer fires first, ``CLIENT UNBLOCK`` ends the BLPOP at
once and keeps the connection.

Only one waiter per shard times the next due job (the reserve script hands it
the shard's timer); the others sleep until a token wakes them, or until that
timer would lapse if its holder died. When the holder stops waiting it hands
the timer on (``close``), so a due time wakes one consumer, not all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from chronoq.backends.base import Watcher
from chronoq.backends.redis.links.single import Link
from chronoq.backends.redis.steps import errors
from chronoq.backends.redis.timers import TimerHolder

__all__ = ["RedisWatcher", "blocking_pop", "woken"]

_BACKSTOP_S = 1.0  # the server gives up this long after our own timer


def blocking_pop(wake_keys: list[str], timeout: float) -> list[tuple[Any, ...]]:
    """What a waiter sends: its connection's id (to unblock it), then BLPOP."""
    return [("CLIENT", "ID"), ("BLPOP", *wake_keys, f"{timeout + _BACKSTOP_S:.3f}")]


def woken(keys: list[str], on_wake: Callable[[int], None] | None) -> None:
    """Tell ``on_wake`` that a BLPOP over the shards' wake lists popped a token.
    Every shard is marked, not only the one whose token it was: one BLPOP
    serves its lists in key order, so a token on a later shard can wait
    behind the earlier ones' (seen in bench/cluster: jobs up to 0.9 s late)."""
    if on_wake is not None and len(keys) > 1:
        for shard in range(len(keys)):
            on_wake(shard)


class RedisWatcher(Watcher, TimerHolder):
    def __init__(
        self,
        client: redis.Redis,
        link: Link,
        wake_keys: list[str],
        url: str,
        hand_over: Callable[[set[int], str], None],
        on_wake: Callable[[int], None] | None = None,
    ) -> None:
        """``on_wake(shard)``: a token of that shard woke this waiter."""
        TimerHolder.__init__(self)
        self._on_wake = on_wake
        self._client = client
        self._link = link  # this thread's connection, for CLIENT UNBLOCK
        self._keys = wake_keys
        self._url = url
        self._hand_over = hand_over

    def close(self) -> None:
        self.hand_on(self._hand_over)

    def wait(self, timeout: float) -> bool:
        with errors(self._url):
            return self._wait(timeout)

    def _woken(self, reply: Any) -> bool:
        if reply is None:
            return False
        woken(self._keys, self._on_wake)
        return True

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)  # from now, not from the reply below
        pool = self._client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands(blocking_pop(self._keys, timeout)))
            client_id = conn.read_response()
            if conn.can_read(timeout=max(deadline - time.monotonic(), 0.0)):
                return self._woken(conn.read_response())
            self._link.call("CLIENT", "UNBLOCK", client_id)
            # nil after the unblock, or a token that arrived just before it
            return self._woken(conn.read_response())
        except BaseException:
            conn.disconnect()  # a half-read reply must not go back to the pool
            raise
        finally:
            pool.release(conn)
