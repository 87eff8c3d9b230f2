"""Waking the consumers of one process on Redis Cluster: one blocked
connection per topic shard, shared by every waiting consumer of the process
(threads, asyncio tasks, HTTP long polls).

A topic's shards live on several nodes, and one BLPOP cannot span slots. So a
*bell* per shard (a thread) blocks in BLPOP on that shard's wake list, on the
primary that serves it, while anybody in the process waits; each token it
pops rings for one waiting consumer (or is kept for the next one), and tells
the core that the shard is worth a look (its reserve hint). The due-time
wake-ups are timed by the consumers themselves (their wait's timeout), as on
one server, so a bell never has to be interrupted to re-time anything. When
nobody has waited for a while the bells stop; one that is stopped early (the
queue closes) is ended by ``CLIENT UNBLOCK`` sent to the node that holds it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import redis
from redis.exceptions import MovedError, ResponseError

from chronoq.backends.redis.links.cluster import ClusterLink
from chronoq.backends.redis.links.plan import Address, address_of, command_slot

__all__ = ["Bells", "Party"]

log = logging.getLogger("chronoq")

_BLOCK_S = 1.0  # one BLPOP's timeout: how often a bell checks that it is still wanted
_LINGER_S = 2.0  # a bell outlives its last waiter this long (waits come and go)
_MAX_KEPT = 64  # tokens kept for the next waiter (as many as a wake list holds)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Party:
    """One waiting consumer: a thread (an event) or an asyncio task (a future)."""

    __slots__ = ("event", "future", "loop", "rung")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.rung = False
        self.loop = loop
        self.event = threading.Event() if loop is None else None
        self.future: asyncio.Future[None] | None = None if loop is None else loop.create_future()

    def ring(self) -> None:
        self.rung = True
        if self.event is not None:
            self.event.set()
        elif self.loop is not None and self.future is not None:
            self.loop.call_soon_threadsafe(_settle, self.future)


class Bells:
    """The bells of one topic: its shards' wake lists, and the waiting parties."""

    def __init__(
        self, link: ClusterLink, wake_keys: list[str], on_ring: Callable[[int], None]
    ) -> None:
        self._link = link
        self._keys = wake_keys
        self._on_ring = on_ring
        self._lock = threading.Lock()
        self._parties: deque[Party] = deque()
        self._kept = 0
        self._users = 0
        self._last_use = 0.0
        self._running: dict[int, threading.Thread] = {}
        self._blocked: dict[int, tuple[Address, int]] = {}  # shard -> (node, client id)
        self._closed = False

    # -- the consumers' side --------------------------------------------------------------

    def attach(self) -> None:
        """A watcher begins: the bells ring from now on."""
        with self._lock:
            self._users += 1
            self._last_use = time.monotonic()
            for shard in range(len(self._keys)):
                if shard not in self._running and not self._closed:
                    thread = threading.Thread(
                        target=self._toll, args=(shard,), name=f"chronoq-bell-{shard}", daemon=True
                    )
                    self._running[shard] = thread
                    thread.start()

    def detach(self) -> None:
        with self._lock:
            self._users -= 1
            self._last_use = time.monotonic()

    def join(self, party: Party) -> bool:
        """Queue ``party`` for the next token; True when one was kept for it."""
        with self._lock:
            if self._kept > 0:
                self._kept -= 1
                return True
            self._parties.append(party)
            return False

    def leave(self, party: Party) -> bool:
        """``party`` stops waiting; True when it was rung meanwhile (it counts)."""
        with self._lock:
            if party.rung:
                return True
            if party in self._parties:
                self._parties.remove(party)
            return False

    def wait(self, party: Party, timeout: float) -> bool:
        """Block this thread until a token rings for ``party``, or ``timeout``
        seconds, or the party's event is set by another thread (an interrupt)."""
        if self.join(party):
            return True
        assert party.event is not None
        party.event.wait(max(timeout, 0.0))
        return self.leave(party)

    async def wait_async(self, timeout: float) -> bool:
        party = Party(asyncio.get_running_loop())
        if self.join(party):
            return True
        assert party.future is not None
        try:
            await asyncio.wait_for(asyncio.shield(party.future), timeout)
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            if self.leave(party):
                self.pass_on()  # the token was for this waiter: another one takes it
            raise
        return self.leave(party)

    # -- the bells' side ---------------------------------------------------------------------

    def _ring(self, shard: int) -> None:
        self._on_ring(shard)
        self.pass_on()

    def pass_on(self) -> None:
        """One token: to the longest waiting party, or kept for the next one."""
        with self._lock:
            if self._parties:
                self._parties.popleft().ring()
            else:
                self._kept = min(self._kept + 1, _MAX_KEPT)

    def _wanted(self, shard: int) -> bool:
        with self._lock:
            wanted = not self._closed and (
                self._users > 0 or time.monotonic() - self._last_use < _LINGER_S
            )
            if not wanted:
                self._running.pop(shard, None)
            return wanted

    def _toll(self, shard: int) -> None:
        """A bell's thread: BLPOP on the shard's wake list while it is wanted."""
        key = self._keys[shard]
        slot = command_slot(("BLPOP", key))
        pause = 0.0
        conn: Any = None
        node: Address | None = None
        while self._wanted(shard):
            try:
                serving = self._link.slots.node_of(slot)
                if serving is None:
                    self._link.refresh()
                    continue
                if serving != node or conn is None:
                    if conn is not None:
                        conn.disconnect()
                    node = serving
                    conn = self._link.node(node)[0].connection_pool.make_connection()
                conn.send_packed_command(
                    conn.pack_commands([("CLIENT", "ID"), ("BLPOP", key, _BLOCK_S)])
                )
                client_id = conn.read_response()
                self._blocked[shard] = (node, int(client_id))
                try:
                    reply = conn.read_response()
                finally:
                    self._blocked.pop(shard, None)
                pause = 0.0
                if reply is not None:
                    self._ring(shard)
            except MovedError as moved:  # the shard moved (a failover, a migration)
                self._link.slots.moved(moved.slot_id, address_of(moved))
            except (redis.RedisError, OSError) as exc:
                # the node is down or failing over: ring once, so that the
                # waiters' reserve reports it, then try again after a while
                if not isinstance(exc, ResponseError):
                    self._link.slots.stale = True
                if conn is not None:
                    conn.disconnect()
                    conn = None
                log.debug("bell of %s: %s", key, exc)
                self._ring(shard)
                pause = min(max(pause * 2, 0.05), 1.0)
                time.sleep(pause)
        if conn is not None:
            conn.disconnect()

    def close(self) -> None:
        """Stop the bells now: each blocked connection is unblocked on its own node."""
        with self._lock:
            self._closed = True
            blocked = list(self._blocked.values())
            for party in self._parties:
                party.ring()
        for node, client_id in blocked:
            try:
                self._link.node(node)[1].call("CLIENT", "UNBLOCK", client_id)
            except (redis.RedisError, OSError) as exc:
                log.debug("could not unblock a bell on %s:%s: %s", *node, exc)
