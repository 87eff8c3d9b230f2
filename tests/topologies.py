"""Real local Redis topologies for the tests: a Redis Cluster (primaries with replicas) and a
primary with a replica watched by one Sentinel, on free loopback ports (never the machine's
6379), with the moves the failover tests need: kill, restart, fail over, reshard.

They are real processes rather than mocks because what the backend must survive is the servers'
own behaviour (MOVED and ASK, a promotion's lost writes, a Sentinel's switch); every wait has a
deadline and a failure says what was awaited and shows the end of the nodes' logs.

Self-check (from the repository's root): ``python -m tests.topologies``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import redis
from redis.crc import key_slot

from .redis_server import RedisServer, StopsOnExit, free_port, redis_server_binary

__all__ = ["STARTED_PIDS", "ClusterNode", "Node", "RedisCluster", "SentinelServer", "SentinelSetup"]

SLOTS = 16384
# Every redis-server started here, so a test (or the self-check) can prove none outlived it.
STARTED_PIDS: list[int] = []
# Small: failure detection, and so a promotion, takes about two node timeouts.
CLUSTER_NODE_TIMEOUT_MS = 1000
# Syncs through an RDB file, not the socket (7.0's default): after a diskless sync the primary
# holds its new writes back until the replica's first REPLCONF ACK, up to a second later, while
# the replica already says its link is up, so a failover in that second loses them (and the
# default delay of diskless syncs, 5 s, would slow every start).
DISK_SYNC = ("--repl-diskless-sync", "no")

N = TypeVar("N", bound="Node")


def _redis_cli() -> str:
    binary = shutil.which("redis-cli")
    if binary is None:
        raise RuntimeError("redis-cli is not installed: run `make test` to install it")
    return binary


def _cmd(port: int, *args: Any, decode: bool = True, timeout: float = 2.0) -> Any:
    """One command on a fresh connection: nodes come and go, so no pooled connection is trusted
    (``decode=False`` for key names, which may be any bytes)."""
    with redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=decode,
    ) as client:
        return client.execute_command(*args)


def _info(port: int, section: str) -> dict[str, str]:
    # redis-py parses INFO into a dict, some values into numbers: all compared here as text
    return {str(k): str(v) for k, v in _cmd(port, "INFO", section).items()}


def _wait(what: str, check: Callable[[], bool], timeout: float, logs: Callable[[], str]) -> None:
    """Poll ``check`` until it holds; connection errors count as "not yet" (a node restarting,
    a replica syncing) but the last one is reported if time runs out."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            if check():
                return
            last_error = None
        except (redis.RedisError, OSError) as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            why = f" (last error: {last_error!r})" if last_error else ""
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}{why}\n{logs()}")
        time.sleep(0.05)


class Node(RedisServer):
    """A RedisServer whose start() sees at once when the process dies (a port taken since
    free_port() chose it, a bad config line) and reports its log, where RedisServer would poll
    for 10 s and say nothing; its stop() kills what does not stop in time."""

    def start(self) -> None:
        with open(self.dir / "stderr.log", "ab") as stderr:  # config errors never reach the log
            self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=stderr)
        STARTED_PIDS.append(self.process.pid)
        deadline = time.monotonic() + 10
        while True:
            code = self.process.poll()
            if code is not None:
                self.process = None
                raise RuntimeError(
                    f"redis-server on port {self.port} exited with {code}\n{self.log_tail()}"
                )
            if _answers_ping(self.port):
                return
            if time.monotonic() >= deadline:
                self.stop(kill=True)
                raise RuntimeError(
                    f"redis-server did not start on port {self.port}\n{self.log_tail()}"
                )
            time.sleep(0.02)

    def stop(self, kill: bool = False) -> None:
        process = self.process
        if process is None:
            return
        try:
            super().stop(kill=kill)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
            self.process = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        tail: list[str] = []
        for name in ("stderr.log", "redis.log"):
            path = self.dir / name
            if path.exists():
                tail += path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {self.dir} (port {self.port}) ---\n" + "\n".join(tail)

    def role(self) -> str:
        """The node's own word on its role now: "master" or "slave"."""
        return _info(self.port, "replication")["role"]

    def replica_link_up(self) -> bool:
        return _info(self.port, "replication").get("master_link_status") == "up"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} 127.0.0.1:{self.port} {self.dir.name}>"


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            # -LOADING while an AOF loads: not started yet
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _start_node(make: Callable[[], N], attempts: int = 3) -> N:
    """Start a node, again on other ports if its port was taken: free_port() only saw the port
    free, and a cluster node needs two."""
    for attempt in range(attempts):
        try:
            return make()
        except RuntimeError as exc:
            if attempt == attempts - 1 or "Address already in use" not in str(exc):
                raise
    raise AssertionError("unreachable")


def _logs(nodes: Iterable[Node], lines: int = 12) -> Callable[[], str]:
    return lambda: "\n".join(node.log_tail(lines) for node in nodes)


# -- Redis Cluster -------------------------------------------------------------------------------


class ClusterNode(Node):
    """One cluster node with its own bus port; ``id`` is its cluster node id, which outlives a
    restart (it is kept in the node's nodes.conf)."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        # the bus port is given: the default, port + 10000, is out of range for high ports
        self.cluster_port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "nodes.conf").unlink(missing_ok=True)  # a failed attempt's identity
        super().__init__(
            workdir,
            *("--cluster-enabled", "yes"),
            *("--cluster-config-file", str(workdir / "nodes.conf")),
            *("--cluster-port", str(self.cluster_port)),
            *("--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)),
            # a replica whose primary was killed must always be allowed to take over
            *("--cluster-replica-validity-factor", "0"),
            *DISK_SYNC,
            *extra,
        )
        try:
            self.id: str = _cmd(self.port, "CLUSTER", "MYID")
        except BaseException:
            self.stop(kill=True)  # not yet in any topology's list of nodes to stop
            raise


SlotMap = tuple[tuple[int, int, int, tuple[int, ...]], ...]


def _slot_map(port: int) -> SlotMap:
    """A node's CLUSTER SLOTS as (start, end, primary port, replica ports); ports, not addresses,
    as a node may not yet know its own address; replicas sorted, as their order is a node's own."""
    return tuple(
        sorted(
            (int(r[0]), int(r[1]), int(r[2][1]), tuple(sorted(int(x[1]) for x in r[3:])))
            for r in _cmd(port, "CLUSTER", "SLOTS")
        )
    )


class RedisCluster(StopsOnExit):
    """A Redis Cluster of ``masters`` primaries with ``replicas_per_master`` replicas each, built
    by ``redis-cli --cluster create`` (as an operator would) and ready when every node says
    cluster_state:ok, all agree on the slot map and every replica's link is up. ``extra`` adds
    config arguments to every node, e.g. ``("--appendonly", "yes")``."""

    def __init__(
        self,
        workdir: Path,
        masters: int = 3,
        replicas_per_master: int = 1,
        extra: Sequence[str] = (),
        timeout: float = 30.0,
    ) -> None:
        if masters < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 primaries")
        self.workdir = workdir
        self.nodes: list[ClusterNode] = []
        # primary port -> the slots it served when kill() killed it: failover_wait() looks there
        self._served_when_killed: dict[int, list[int]] = {}
        try:
            for n in range(masters * (1 + replicas_per_master)):
                self.nodes.append(_start_node(partial(ClusterNode, workdir / f"node-{n}", *extra)))
            self._create(replicas_per_master, timeout)
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        self.seeds = [node.port for node in self.primaries()]

    def _create(self, replicas: int, timeout: float) -> None:
        args = [_redis_cli(), "--cluster", "create"]
        args += [f"127.0.0.1:{node.port}" for node in self.nodes]
        args += ["--cluster-replicas", str(replicas), "--cluster-yes"]
        self._redis_cli(args, timeout)

    def _redis_cli(self, args: list[str], timeout: float) -> None:
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"{' '.join(args[1:4])} took over {timeout:g} s: {exc.stdout!r}\n{self._logs()}"
            ) from exc
        # redis-cli --cluster reports some failures ([ERR]) with exit status 0
        if done.returncode != 0 or "[ERR]" in done.stdout:
            raise RuntimeError(
                f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n"
                f"{self._logs()}"
            )

    def _logs(self) -> str:
        return _logs(self.nodes)()

    @property
    def url(self) -> str:
        """chronoq's URL of this cluster, seeded with the first primaries' addresses."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.seeds)

    def live(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.alive]

    def by_port(self, port: int) -> ClusterNode:
        for node in self.nodes:
            if node.port == port:
                return node
        raise LookupError(f"no node on port {port}")

    def primaries(self) -> list[ClusterNode]:
        """The live nodes that say they are primaries now (roles change with a failover)."""
        return [node for node in self.live() if node.role() == "master"]

    def replicas(self) -> list[ClusterNode]:
        return [node for node in self.live() if node.role() == "slave"]

    def slot_map(self, node: ClusterNode | None = None) -> SlotMap:
        return _slot_map((node or self.live()[0]).port)

    def node_for_slot(self, slot: int) -> ClusterNode:
        """The primary serving ``slot`` in the first live node's view."""
        for start, end, port, _ in self.slot_map():
            if start <= slot <= end:
                return self.by_port(port)
        raise LookupError(f"slot {slot} is not served")

    def node_for_key(self, key: str | bytes) -> ClusterNode:
        return self.node_for_slot(key_slot(key.encode() if isinstance(key, str) else key))

    def slots_of(self, node: ClusterNode) -> list[int]:
        return [
            slot
            for start, end, port, _ in self.slot_map()
            if port == node.port
            for slot in range(start, end + 1)
        ]

    def kill(self, node: ClusterNode) -> None:
        """kill -9, as a crash: no shutdown, no last fsync, no goodbye to the other nodes."""
        if node.alive and (served := self.slots_of(node)):
            self._served_when_killed[node.port] = served
        node.stop(kill=True)

    def kill_primary_of(self, key_or_slot: str | bytes | int) -> ClusterNode:
        """Kill the primary serving a key (or slot); returns it, for failover_wait()."""
        node = (
            self.node_for_slot(key_or_slot)
            if isinstance(key_or_slot, int)
            else self.node_for_key(key_or_slot)
        )
        self.kill(node)
        return node

    def restart(self, node: ClusterNode, timeout: float = 30.0) -> None:
        """Start a stopped node again (same port, same id) and wait until it has rejoined: a
        killed primary whose replica took over comes back as that replica's replica."""
        node.start()
        self.wait_ok(timeout)

    def _ok_now(self) -> bool:
        maps = set()
        for node in self.live():
            info = dict(
                line.split(":", 1)
                for line in _cmd(node.port, "CLUSTER", "INFO").splitlines()
                if ":" in line
            )
            if (
                info["cluster_state"] != "ok"
                or int(info["cluster_slots_ok"]) != SLOTS
                or int(info["cluster_known_nodes"]) != len(self.nodes)
            ):
                return False
            replication = _info(node.port, "replication")
            if replication["role"] == "slave" and replication["master_link_status"] != "up":
                return False
            maps.add(_slot_map(node.port))
        return len(maps) == 1

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every live node says cluster_state:ok with all slots served, all agree on
        who serves which slots, and every live replica's link to its primary is up."""
        _wait("the cluster to be ok", self._ok_now, timeout, self._logs)

    def failover_wait(self, old_primary: ClusterNode, timeout: float = 30.0) -> ClusterNode:
        """After kill(old_primary): wait until no live node thinks it serves a slot any more
        and the cluster is ok again; returns the replica promoted in its place. (The cluster stays
        "ok" until the failure is detected, so wait_ok() alone would return too soon.)"""
        served = self._served_when_killed.get(old_primary.port) or self.slots_of(old_primary)
        if not served:
            raise ValueError(f"{old_primary} served no slots")

        def moved() -> bool:
            return all(
                port != old_primary.port
                for node in self.live()
                for _, _, port, _ in _slot_map(node.port)
            )

        _wait(f"a replica to take over from {old_primary}", moved, timeout, self._logs)
        self.wait_ok(timeout)
        return self.node_for_slot(served[0])

    def reshard(
        self, from_node: ClusterNode, to_node: ClusterNode, slots: int, timeout: float = 60.0
    ) -> None:
        """Move ``slots`` slots and their keys between primaries with ``redis-cli --cluster
        reshard`` (which refuses a cluster with a slot unserved or half-moved)."""
        args = [_redis_cli(), "--cluster", "reshard", f"127.0.0.1:{from_node.port}"]
        args += ["--cluster-from", from_node.id, "--cluster-to", to_node.id]
        args += ["--cluster-slots", str(slots), "--cluster-yes", "--cluster-pipeline", "100"]
        self._redis_cli(args, timeout)
        self.wait_ok(timeout)

    def migrate_slot(self, slot: int, to_node: ClusterNode, timeout: float = 30.0) -> None:
        """Move one slot and its keys to the primary ``to_node`` by hand (the steps redis-cli
        takes), for a test that wants a given key's slot to move."""
        source = self.node_for_slot(slot)
        if source is to_node:
            return
        deadline = time.monotonic() + timeout
        _cmd(to_node.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", source.id)
        _cmd(source.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", to_node.id)
        while keys := _cmd(source.port, "CLUSTER", "GETKEYSINSLOT", slot, 100, decode=False):
            if time.monotonic() >= deadline:
                raise RuntimeError(f"slot {slot}'s keys still moving after {timeout:g} s")
            _cmd(source.port, "MIGRATE", "127.0.0.1", to_node.port, "", 0, 5000, "KEYS", *keys)
        # the new owner first, so that the slot is never served by nobody; then the rest
        for node in [to_node, source, *(n for n in self.primaries() if n not in (to_node, source))]:
            _cmd(node.port, "CLUSTER", "SETSLOT", slot, "NODE", to_node.id)
        self.wait_ok(max(1.0, deadline - time.monotonic()))

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(kill=True)  # nothing of a test cluster's data is worth a clean shutdown


# -- Sentinel ------------------------------------------------------------------------------------


class SentinelServer(Node):
    """``redis-server sentinel.conf --sentinel``: RedisServer's arguments cannot be used, as the
    config file (which the Sentinel rewrites with what it learns) must come first."""

    def __init__(self, workdir: Path, *conf: str) -> None:  # no super().__init__: see above
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `make test` to install it")
        self.port = free_port()
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "sentinel.conf"
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            f"logfile {self.dir / 'redis.log'}",
            *conf,
        ]
        config.write_text("\n".join(lines) + "\n")
        self.args = [binary, str(config), "--sentinel"]
        self.process = None
        self.start()


def _pairs(flat: list[Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}


class SentinelSetup(StopsOnExit):
    """A primary, its replica and one Sentinel watching them (quorum 1), quick to notice a
    failure (``down_after_ms``) and to settle after a failover. ``extra`` adds config arguments
    to both data nodes."""

    def __init__(
        self,
        workdir: Path,
        master_name: str = "mymaster",
        extra: Sequence[str] = (),
        down_after_ms: int = 1000,
        timeout: float = 30.0,
    ) -> None:
        self.workdir = workdir
        self.master_name = master_name
        self.nodes: list[Node] = []
        self.sentinel: SentinelServer | None = None
        try:
            primary = _start_node(lambda: Node(workdir / "primary", *DISK_SYNC, *extra))
            self.nodes.append(primary)
            replica = _start_node(lambda: Node(workdir / "replica", *DISK_SYNC, *extra))
            self.nodes.append(replica)
            # by command, not --replicaof: a restarted node must come back as a primary (as the
            # other does), not replicating from whichever node was the primary at the start
            _cmd(replica.port, "REPLICAOF", "127.0.0.1", primary.port)
            # the replica first: a Sentinel learns of replicas from the primary's INFO, which it
            # reads when it connects and then only every info period
            _wait("the replica's first sync", replica.replica_link_up, timeout, self._logs)
            self.sentinel = _start_node(
                lambda: SentinelServer(
                    workdir / "sentinel",
                    f"sentinel monitor {master_name} 127.0.0.1 {primary.port} 1",
                    f"sentinel down-after-milliseconds {master_name} {down_after_ms}",
                    # a promotion not done in this time is given up (and retried)
                    f"sentinel failover-timeout {master_name} 5000",
                )
            )
            # SENTINEL DEBUG (new in 7.0) sets periods that were fixed at compile time: INFO
            # every 250 ms, not 10 s, so that a reconfigured replica is seen as good soon (a
            # failover is refused until then); an old primary is made a replica 4 publish periods
            # after the switch (8 s by default); and after a stall (a loaded CI machine) the
            # Sentinel does nothing for the tilt period, 30 s by default
            periods = {"INFO-PERIOD": 250, "PUBLISH-PERIOD": 100, "TILT-PERIOD": 5000}
            self._ask("SENTINEL", "DEBUG", *(x for item in periods.items() for x in item))
            self._wait_settled(primary, timeout)
        except BaseException:
            self.stop()
            raise

    def _ask(self, *args: Any) -> Any:
        if self.sentinel is None:
            raise RuntimeError("the Sentinel is not running")
        return _cmd(self.sentinel.port, *args)

    def _logs(self) -> str:
        return _logs([*self.nodes, *([self.sentinel] if self.sentinel else [])])()

    @property
    def url(self) -> str:
        if self.sentinel is None:
            raise RuntimeError("the Sentinel is not running")
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{self.master_name}/0"

    def by_port(self, port: int) -> Node:
        for node in self.nodes:
            if node.port == port:
                return node
        raise LookupError(f"no node on port {port}")

    def primary_port(self) -> int:
        """The primary's port, as the Sentinel tells clients."""
        _, port = self._ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
        return int(port)

    def primary(self) -> Node:
        return self.by_port(self.primary_port())

    def replica(self) -> Node:
        primary = self.primary_port()
        return next(node for node in self.nodes if node.port != primary)

    def sentinel_replicas(self) -> list[dict[str, str]]:
        """SENTINEL REPLICAS: what the Sentinel knows of each replica (flags, link status)."""
        return [_pairs(r) for r in self._ask("SENTINEL", "REPLICAS", self.master_name)]

    def _settled(self, primary: Node) -> bool:
        """``primary`` is the Sentinel's primary and says so, no failover is under way, and every
        other live node replicates from it with its link up, in its own view and the Sentinel's."""
        if self.primary_port() != primary.port or primary.role() != "master":
            return False
        state = _pairs(self._ask("SENTINEL", "MASTER", self.master_name))
        if "failover_in_progress" in state["flags"]:
            return False
        known = {int(r["port"]): r for r in self.sentinel_replicas()}
        for node in self.nodes:
            if node is primary or not node.alive:
                continue
            replication = _info(node.port, "replication")
            seen = known.get(node.port)
            if (
                replication.get("master_port") != str(primary.port)
                or replication.get("master_link_status") != "up"
                or seen is None
                or seen["flags"] != "slave"
                or seen.get("master-link-status") != "ok"
                or seen.get("master-port") != str(primary.port)
            ):
                return False
        return True

    def _wait_settled(self, primary: Node, timeout: float) -> None:
        settled = partial(self._settled, primary)
        _wait(f"{primary} to be the settled primary", settled, timeout, self._logs)

    def failover(self, timeout: float = 30.0) -> Node:
        """SENTINEL FAILOVER, then wait until the replica is the primary (for the Sentinel and in
        its own eyes) and the old primary replicates from it; returns the new primary."""
        new = self.replica()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._ask("SENTINEL", "FAILOVER", self.master_name)
                break
            except redis.ResponseError as exc:
                # NOGOODSLAVE: the Sentinel's view of the replica is stale; INPROG: a failover
                # of its own is under way; both pass
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"SENTINEL FAILOVER refused: {exc}\n{self._logs()}") from exc
                time.sleep(0.1)
        self._wait_settled(new, max(1.0, deadline - time.monotonic()))
        return new

    def kill_primary(self) -> Node:
        """kill -9 the primary; returns it (for failover_wait() and restart())."""
        node = self.primary()
        node.stop(kill=True)
        return node

    def failover_wait(self, old_primary: Node, timeout: float = 30.0) -> Node:
        """After kill_primary(): wait until the Sentinel has promoted the replica and the failover
        is over; returns the new primary."""

        def promoted() -> bool:
            port = self.primary_port()
            return port != old_primary.port and self.by_port(port).role() == "master"

        _wait(f"the Sentinel to replace {old_primary}", promoted, timeout, self._logs)
        new = self.primary()
        self._wait_settled(new, timeout)
        return new

    def restart(self, node: Node, timeout: float = 30.0) -> None:
        """Start a stopped node again and wait until the Sentinel has made it a replica of the
        current primary (a killed primary comes back as a primary, and empty, until then)."""
        node.start()
        self._wait_settled(self.primary(), timeout)

    def stop(self) -> None:
        # the Sentinel first, so it does not fail over while the nodes go
        if self.sentinel is not None:
            self.sentinel.stop(kill=True)
        for node in self.nodes:
            node.stop(kill=True)


# -- self-check ----------------------------------------------------------------------------------


def _check_cluster(workdir: Path) -> None:
    from redis.cluster import ClusterNode
    from redis.cluster import RedisCluster as ClusterClient

    seed: Any = ClusterNode  # untyped in redis-py

    started = time.monotonic()
    with RedisCluster(workdir) as cluster:
        print(f"cluster: up in {time.monotonic() - started:.2f} s: {cluster.url}")
        print(f"  primaries {cluster.primaries()}, replicas {cluster.replicas()}")
        seeds = [seed("127.0.0.1", port) for port in cluster.seeds]
        client = ClusterClient(startup_nodes=seeds, decode_responses=True)
        keys = [f"key-{n}" for n in range(50)]
        for key in keys:
            client.set(key, key)
        assert all(client.get(key) == key for key in keys)

        started = time.monotonic()
        old = cluster.kill_primary_of("key-0")
        new = cluster.failover_wait(old)
        print(f"  kill {old} -> {new} promoted, ok in {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        cluster.restart(old)
        print(f"  restart {old}: {old.role()} again in {time.monotonic() - started:.2f} s")
        assert old.role() == "slave" and new.role() == "master"

        started = time.monotonic()
        target = next(n for n in cluster.primaries() if n is not new)
        cluster.reshard(new, target, 100)
        print(f"  reshard 100 slots in {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        slot = key_slot(b"key-1")
        target = next(n for n in cluster.primaries() if n is not cluster.node_for_slot(slot))
        cluster.migrate_slot(slot, target)
        assert cluster.node_for_slot(slot) is target
        print(f"  migrate slot {slot} in {time.monotonic() - started:.2f} s")

        client.close()
        client = ClusterClient(startup_nodes=seeds, decode_responses=True)
        # key-0 lived on the killed primary: lost unless its replica had it (it should)
        survived = sum(client.get(key) == key for key in keys)
        print(f"  {survived}/{len(keys)} keys read back after the failover")
        client.set("after", "yes")
        assert client.get("after") == "yes"
        client.close()


def _check_sentinel(workdir: Path) -> None:
    from redis.sentinel import Sentinel

    sentinel_client: Any = Sentinel  # untyped in redis-py
    started = time.monotonic()
    with SentinelSetup(workdir) as setup:
        assert setup.sentinel is not None
        print(f"sentinel: up in {time.monotonic() - started:.2f} s: {setup.url}")
        sentinel = sentinel_client([("127.0.0.1", setup.sentinel.port)], socket_timeout=1)
        primary = sentinel.master_for(setup.master_name, decode_responses=True)
        primary.set("k", "v")
        assert primary.get("k") == "v"

        for _ in range(2):  # there and back: the second needs the first to have settled
            started = time.monotonic()
            old = setup.primary()
            new = setup.failover()
            print(f"  failover {old} -> {new} in {time.monotonic() - started:.2f} s")
            assert setup.primary_port() == new.port and old.role() == "slave"
        primary = sentinel.master_for(setup.master_name, decode_responses=True)
        assert primary.get("k") == "v"

        started = time.monotonic()
        old = setup.kill_primary()
        new = setup.failover_wait(old)
        print(f"  kill {old} -> {new} promoted in {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        setup.restart(old)
        print(f"  restart {old}: a replica again in {time.monotonic() - started:.2f} s")
        primary = sentinel.master_for(setup.master_name, decode_responses=True)
        assert primary.get("k") == "v"
        primary.set("k2", "v2")
        assert primary.get("k2") == "v2"
        primary.close()
        for connection in sentinel.sentinels:
            connection.close()


def _main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="chronoq-topologies-") as tmp:
        _check_cluster(Path(tmp) / "cluster")
        _check_sentinel(Path(tmp) / "sentinel")
    left = [pid for pid in STARTED_PIDS if Path(f"/proc/{pid}").exists()]
    print(f"{len(STARTED_PIDS)} redis-server processes started, still running: {left or 'none'}")
    if left:
        raise SystemExit(1)


if __name__ == "__main__":
    _main()
