"""The stores the cluster benchmark compares, and what their servers spent: one private
redis-server (bench/servers.py) reached as ``shards=1`` and ``shards=16``, and two local Redis
Clusters of 3 primaries (tests/topologies.py), without and with a replica each; every server
pinned to one CPU.

Server cost is read from each node itself: INFO CPU (used_cpu_user + used_cpu_sys, the whole
process) and INFO commandstats (FCALL calls, after CONFIG RESETSTAT)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis
from redis.crc import key_slot
from servers import private_server

from chronoq.backends.redis.keys import shard_keys
from tests.topologies import ClusterNode, RedisCluster

__all__ = ["Meter", "Store", "Usage", "open_stores", "primary_of_slot", "shard_slots"]

PREFIX = "chronoq"  # chronoq's default key prefix


def node(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port)


def cpu_seconds(client: redis.Redis) -> float:
    info = cast(dict[str, Any], client.info("cpu"))
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def fcalls(client: redis.Redis) -> int:
    stats = cast(dict[str, dict[str, int]], client.info("commandstats"))
    names = ("cmdstat_fcall", "cmdstat_fcall_ro")
    return sum(int(stats.get(name, {}).get("calls", 0)) for name in names)


@dataclass
class Store:
    """One way to reach Redis: its URL, the ports of its primaries and of its replicas."""

    key: str
    label: str
    url: str
    primaries: list[int]
    replicas: list[int] = field(default_factory=list)

    def flush(self) -> None:
        """Empty every primary (synchronously: no lazy free spills into the next phase)."""
        for port in self.primaries:
            with node(port) as client:
                client.flushall(asynchronous=False)

    def slot_map(self) -> list[tuple[int, int, int]]:
        """(first slot, last slot, primary port) of a cluster; one range for a single node."""
        if not self.replicas:
            return [(0, 16383, self.primaries[0])]
        with node(self.primaries[0]) as client:
            rows = client.execute_command("CLUSTER", "SLOTS")
        return sorted((int(r[0]), int(r[1]), int(r[2][1])) for r in rows)


@dataclass(frozen=True)
class Usage:
    """What each server spent during a phase: CPU seconds and FCALL calls per primary port,
    and the replicas' CPU seconds summed."""

    cpu: dict[int, float]
    calls: dict[int, int]
    replica_cpu: float

    @property
    def total_cpu(self) -> float:
        return sum(self.cpu.values())

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


class Meter:
    """Reads a store's servers before and after a phase."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.clients = {port: node(port) for port in store.primaries + store.replicas}
        self._before: dict[int, float] = {}

    def start(self) -> None:
        for client in self.clients.values():
            client.config_resetstat()
        self._before = {port: cpu_seconds(c) for port, c in self.clients.items()}

    def stop(self) -> Usage:
        spent = {port: cpu_seconds(c) - self._before[port] for port, c in self.clients.items()}
        primaries = self.store.primaries
        return Usage(
            cpu={port: spent[port] for port in primaries},
            calls={port: fcalls(self.clients[port]) for port in primaries},
            replica_cpu=sum(spent[port] for port in self.store.replicas),
        )

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def shard_slots(topic: str, shards: int) -> list[int]:
    """The slot of each shard of ``topic`` on a cluster (its hash tag, spread: keys.py)."""
    return [
        key_slot(shard_keys(PREFIX, topic, shard, shards=shards, spread=True)[0].encode())
        for shard in range(shards)
    ]


def primary_of_slot(slot_map: list[tuple[int, int, int]], slot: int) -> int:
    for first, last, port in slot_map:
        if first <= slot <= last:
            return port
    raise LookupError(f"slot {slot} is not served")


def pin(pid: int, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(pid, {cpu})


@contextmanager
def open_stores(workdir: Path, server_cpu: int | None) -> Iterator[list[Store]]:
    """The three stores, every redis-server on ``server_cpu``; all stopped on exit."""
    with ExitStack() as stack:
        (workdir / "single").mkdir()
        url = stack.enter_context(private_server(workdir / "single", server_cpu))
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        bare = stack.enter_context(cluster(workdir / "cluster0", 0, server_cpu))
        full = stack.enter_context(cluster(workdir / "cluster", 1, server_cpu))
        yield [
            Store("node1", "1 node, shards=1", url, [port]),
            Store("node16", "1 node, shards=16", f"{url}?shards=16", [port]),
            Store("cluster0", "cluster, 3 primaries, no replicas", bare.url, ports(bare.nodes)),
            Store(
                "cluster",
                "cluster, 3 primaries + 3 replicas",
                full.url,
                ports(full.primaries()),
                ports(full.replicas()),
            ),
        ]


def ports(nodes: list[ClusterNode]) -> list[int]:
    return [member.port for member in nodes]


@contextmanager
def cluster(workdir: Path, replicas: int, cpu: int | None) -> Iterator[RedisCluster]:
    """A cluster of 3 primaries with ``replicas`` replicas each, every node on ``cpu``."""
    workdir.mkdir()
    started = RedisCluster(workdir, replicas_per_master=replicas)
    try:
        for member in started.nodes:
            assert member.process is not None
            pin(member.process.pid, cpu)
        yield started
    finally:
        started.stop()
