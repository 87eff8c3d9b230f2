"""The Redis backend on Redis Cluster (``redis+cluster://``): the operations
of core.py, their round trips routed by slot to the primaries (links/cluster.py),
and consumers woken by one bell per topic shard per process (bells.py).

A topic is spread over ``shards`` hash tags (16 by default), so over the
primaries; a job's shard is a hash of its id, so that get, delete and
deduplication stay one-shard calls, and every script runs on the keys of one
slot.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
import redis.asyncio

from chronoq.backends.base import AsyncBackend, Watcher
from chronoq.backends.redis.aio_cluster import AsyncClusterBackend
from chronoq.backends.redis.backend import RedisBackend
from chronoq.backends.redis.bells import Bells, Party
from chronoq.backends.redis.links.cluster import ClusterLink
from chronoq.backends.redis.links.cluster_aio import AsyncClusterLink
from chronoq.backends.redis.links.plan import Address
from chronoq.backends.redis.steps import errors
from chronoq.backends.redis.timers import TimerHolder
from chronoq.backends.redis.urls import (
    RedisOptions,
    cluster_path,
    hosts_of,
    read_options,
    redacted,
)
from chronoq.backends.url import StoreURL

__all__ = ["ClusterBackend", "ClusterWatcher"]

DEFAULT_SHARDS = 16


class ClusterWatcher(Watcher, TimerHolder):
    """A waiting consumer of a topic on a cluster: it waits for its bells."""

    def __init__(self, backend: ClusterBackend, topic: str, bells: Bells) -> None:
        TimerHolder.__init__(self)
        self._backend = backend
        self._topic = topic
        self._bells = bells
        self._party: Party | None = None
        bells.attach()

    def wait(self, timeout: float) -> bool:
        party = self._party = Party()
        try:
            return self._bells.wait(party, timeout)
        finally:
            self._party = None

    def interrupt(self) -> None:
        party = self._party
        if party is not None and party.event is not None:
            party.event.set()

    def close(self) -> None:
        self._bells.detach()
        self.hand_on(lambda timers, token: self._backend.hand_over(self._topic, timers, token))


class ClusterBackend(RedisBackend):
    """Jobs on Redis Cluster, each topic over ``shards`` slots."""

    def __init__(
        self,
        *,
        url: str,
        options: RedisOptions,
        seeds: list[Address],
        kwargs: dict[str, Any],
    ) -> None:
        """``kwargs``: redis-py's options for the connection to each node."""
        super().__init__(None, url=url, options=options, spread_slots=True)
        self._kwargs = kwargs
        self._redirect_budget = options.redirect_budget
        self._link = ClusterLink(
            seeds,
            lambda host, port: redis.Redis(host=host, port=port, **kwargs),
            self._scripts.source,
            redirect_budget=options.redirect_budget,
        )
        self._bells: dict[str, Bells] = {}
        self._bells_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: StoreURL) -> ClusterBackend:
        options = read_options(url, default_shards=DEFAULT_SHARDS)
        hosts = hosts_of(url, default_port=6379)
        cluster_path(url, hosts)
        kwargs = options.driver_kwargs()
        if hosts.username is not None:
            kwargs.setdefault("username", hosts.username)
        if hosts.password is not None:
            kwargs.setdefault("password", hosts.password)
        return cls(url=redacted(url.raw), options=options, seeds=hosts.addresses, kwargs=kwargs)

    def asyncio_backend(self, *, owned: bool) -> AsyncBackend | None:
        """The same cluster on redis.asyncio: its own connections, the same
        operations, and this backend's bells for its waiting consumers."""
        link = AsyncClusterLink(
            self._link.slots.seeds,
            lambda host, port: redis.asyncio.Redis(host=host, port=port, **self._kwargs),
            self._scripts.source,
            self._redirect_budget,
        )
        return AsyncClusterBackend(  # type: ignore[abstract]  # see fill_contract
            self._core, link, self.bells, owner=self if owned else None
        )

    def bells(self, topic: str) -> Bells:
        """The process's bells of ``topic`` (one per topic, for every waiter)."""
        with self._bells_lock:
            bells = self._bells.get(topic)
            if bells is None:
                bells = self._bells[topic] = Bells(
                    self._link,
                    self._core.wake_keys(topic),
                    lambda shard: self._core.hints.mark(topic, shard),
                )
        return bells

    def watch(self, topic: str) -> Watcher:
        return ClusterWatcher(self, topic, self.bells(topic))

    def hand_over(self, topic: str, shards: set[int], token: str) -> None:
        self._drive(self._core.hand_over(topic, shards, token))

    def close(self) -> None:
        with self._bells_lock:
            for bells in self._bells.values():
                bells.close()
            self._bells.clear()
        with errors(self.url):
            self._link.close()
