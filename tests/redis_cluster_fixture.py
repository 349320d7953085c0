"""A real Redis Cluster for the tests: 3 primaries (or 3 primaries with one
replica each) on 127.0.0.1, persistence off, created with ``redis-cli
--cluster create`` and waited for (bounded) until every node says
``cluster_state:ok``. Beside ``redis_fixture.py``, whose one-server helpers
it reuses; tests that need it skip, saying why, without ``redis-server`` or
``redis-cli`` (Debian: ``apt-get install redis-server`` brings both).

A node's cluster bus listens on its port + 10000, so each node's port is
chosen with that one free too.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from redis_fixture import REDIS_SERVER, RedisServer

REDIS_CLI = shutil.which("redis-cli") or (
    "/usr/bin/redis-cli" if Path("/usr/bin/redis-cli").exists() else None
)
#: How long a node may be unreachable before its replica takes over (ms):
#: short, so that a failover trial ends in seconds.
NODE_TIMEOUT_MS = 1000


def _reply(conn: socket.socket) -> bytes:
    """One whole RESP reply: a bulk string's body, an integer's digits, or a
    simple reply's (or error's) line with its ``+`` (``-``)."""
    data = b""
    while b"\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    head, _, rest = data.partition(b"\r\n")
    if head[:1] == b":":
        return head[1:]
    if head[:1] != b"$" or head == b"$-1":
        return head
    size = int(head[1:])
    while len(rest) < size + 2:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("connection closed")
        rest += chunk
    return rest[:size]


def ask(port: int, *args: str, timeout: float = 5) -> str:
    """One command to the node on ``port``, through a raw socket: the whole
    reply as text (a bulk string's body, or a simple reply's line)."""
    parts = [a.encode() for a in args]
    wire = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(wire)
        return _reply(conn).decode()


def _free_pair() -> int:
    """A port P with P and its cluster bus port P + 10000 both free."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


@dataclass
class RedisCluster:
    nodes: list[RedisServer]
    replicas: int
    dir: Path
    killed: list[int] = field(default_factory=list)

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def live_ports(self) -> list[int]:
        return [n.port for n in self.nodes if n.process.poll() is None]

    def info(self, port: int) -> dict[str, str]:
        text = ask(port, "CLUSTER", "INFO")
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def primary_of_slot(self, slot: int) -> int:
        """The port of the node serving ``slot`` now, as a live node sees it."""
        for port in self.live_ports():
            try:
                text = ask(port, "CLUSTER", "NODES")
            except OSError:
                continue
            for line in text.splitlines():
                fields = line.split()
                if "master" not in fields[2] or "fail" in fields[2]:
                    continue
                for span in fields[8:]:
                    if span.startswith("["):
                        continue
                    low, _, high = span.partition("-")
                    if int(low) <= slot <= int(high or low):
                        return int(fields[1].split("@")[0].rsplit(":", 1)[1])
        raise LookupError(f"no primary serves slot {slot}")

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every live node says ``cluster_state:ok`` (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if all(self.info(p).get("cluster_state") == "ok" for p in self.live_ports()):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not ok after {timeout} s: {self.dir}")
            time.sleep(0.05)

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` (its replica, if any, takes over)."""
        node = next(n for n in self.nodes if n.port == port)
        node.process.kill()
        node.process.wait()
        self.killed.append(port)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.kill()
            node.process.wait()


def _start_node(tmp: Path) -> RedisServer:
    assert REDIS_SERVER is not None
    port = _free_pair()
    node_dir = tmp / str(port)
    node_dir.mkdir()
    log = node_dir / "redis.log"
    process = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(node_dir / "nodes.conf"),
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(node_dir),
            "--logfile", str(log),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    node = RedisServer(port, process, log)
    deadline = time.monotonic() + 10
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if ask(port, "PING") == "+PONG":
                return node
        except OSError:
            time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"cluster node on port {port} did not start: {log}")


def start_cluster(tmp: Path, replicas: int = 0) -> RedisCluster:
    """3 primaries, each with ``replicas`` replicas, all ``cluster_state:ok``."""
    assert REDIS_CLI is not None
    nodes: list[RedisServer] = []
    cluster = RedisCluster(nodes, replicas, tmp)
    try:
        for _ in range(3 * (1 + replicas)):
            nodes.append(_start_node(tmp))
        subprocess.run(
            [
                REDIS_CLI, "--cluster", "create",
                *(f"127.0.0.1:{p}" for p in cluster.ports),
                "--cluster-replicas", str(replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        cluster.wait_ok()
        if replicas:  # every replica attached and in sync before a trial kills its primary
            deadline = time.monotonic() + 30
            while sum(_synced_replicas(p) for p in cluster.ports) < 3 * replicas:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replicas did not sync: {tmp}")
                time.sleep(0.05)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _synced_replicas(port: int) -> int:
    text = ask(port, "INFO", "replication")
    return sum(1 for line in text.splitlines() if line.startswith("slave") and "online" in line)


def _skip_without_tools() -> None:
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip(
            "a Redis Cluster needs redis-server and redis-cli "
            "(Debian: apt-get install redis-server)"
        )


@pytest.fixture
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """3 primaries, no replicas: a fresh cluster for the test."""
    _skip_without_tools()
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_with_replicas(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """3 primaries with one replica each (6 nodes): for failover trials."""
    _skip_without_tools()
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"), replicas=1)
    try:
        yield cluster
    finally:
        cluster.stop()
