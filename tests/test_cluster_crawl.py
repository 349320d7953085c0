"""A crawl on a real local Redis Cluster (``tests/redis_cluster_fixture.py``:
3 primaries; needs redis-server, redis-cli and coredis).

One crawl's keys share one hash tag (``tc:{ID}:``), so the whole crawl lives
in one slot on one primary, and its calls are the one-Redis calls routed by
that slot: the crawl must be exactly the single-process crawl, as on one
Redis (``test_redis.py``), with ``redis+cluster://`` or with a plain
``redis://`` URL naming any node (even one that does not serve the slot).
One cluster serves the whole module: each test crawls under ids of its own.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from redis_cluster_fixture import RedisCluster, _skip_without_tools, ask, start_cluster
from test_redis import check_exact, crawl_shared, pages_of, random_graph
from test_redis_cli import records, single_crawl, slow_site, start_worker, wait_all

from trio_crawl.frontiers.redis import check_crawl, keys_prefix, lua
from trio_crawl.testing import serve_site

from cli_helpers import run_cli as cli

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")


@dataclass
class Endpoint:
    """What ``crawl_shared`` needs of a server: the URL the workers use."""

    url: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    _skip_without_tools()
    started = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()


def cluster_url(cluster: RedisCluster, port: int | None = None) -> str:
    return f"redis+cluster://127.0.0.1:{port or cluster.ports[0]}"


def other_node(cluster: RedisCluster, crawl: str) -> int:
    """A primary that does not serve ``crawl``'s slot."""
    slot = int(ask(cluster.ports[0], "CLUSTER", "KEYSLOT", keys_prefix(crawl)))
    owner = cluster.primary_of_slot(slot)
    return next(p for p in cluster.ports if p != owner)


def has_library(port: int) -> bool:
    return ask(port, "FUNCTION", "LIST", "LIBRARYNAME", f"trio_crawl_{lua.VERSION}") != "*0"


@pytest.mark.parametrize("detected", [False, True])
async def test_a_crawl_on_a_cluster_equals_the_single_crawl(
    cluster: RedisCluster, detected: bool
) -> None:
    for seed in range(3):
        rng = random.Random(seed + 100 * detected)
        graph = random_graph(rng, rng.randint(20, 80))
        pages = pages_of(graph, rng)
        max_depth = rng.choice([None, 3])
        name = f"cluster-{detected}-{seed}-{rng.random()}"
        port = other_node(cluster, name)
        # A plain redis:// URL naming a node that does not serve the crawl's
        # slot: the server says it is a cluster node, the crawl follows the slot.
        url = f"redis://127.0.0.1:{port}/0" if detected else cluster_url(cluster, port)
        parts, _ = await crawl_shared(Endpoint(url), name, pages, 2, max_depth=max_depth)  # type: ignore[arg-type]
        check_exact([r for part in parts for r in part], graph, max_depth)
    assert all(has_library(p) for p in cluster.ports)


async def test_a_primary_that_lacks_the_library_gets_it(cluster: RedisCluster) -> None:
    name = f"flushed-{random.random()}"
    slot = int(ask(cluster.ports[0], "CLUSTER", "KEYSLOT", keys_prefix(name)))
    owner = cluster.primary_of_slot(slot)
    await crawl_shared(Endpoint(cluster_url(cluster)), "warm-" + name, {}, 1)  # type: ignore[arg-type]
    assert ask(owner, "FUNCTION", "FLUSH") == "+OK"
    assert not has_library(owner)
    rng = random.Random(7)
    graph = random_graph(rng, 30)
    pages = pages_of(graph, rng)
    parts, _ = await crawl_shared(Endpoint(cluster_url(cluster)), name, pages, 2)  # type: ignore[arg-type]
    check_exact([r for part in parts for r in part], graph)
    assert has_library(owner)


def test_a_database_other_than_0_on_a_cluster_node_is_refused(cluster: RedisCluster) -> None:
    # Before connecting, for a cluster URL; the node says it for a plain one.
    for url, reason in [
        (cluster_url(cluster) + "/3", "database 0 only"),
        (f"redis://127.0.0.1:{cluster.ports[1]}/3", "SELECT is not allowed in cluster mode"),
    ]:
        result = cli("http://127.0.0.1:1/", "--redis", url, "--crawl-id", "x")
        assert result.returncode == 2, result
        assert result.stderr.strip().count("\n") == 0, result.stderr
        assert reason in result.stderr


def test_a_primary_that_may_evict_keys_is_refused_at_the_start(cluster: RedisCluster) -> None:
    port = cluster.ports[2]  # not the node the URL names: every primary counts
    assert ask(port, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == "+OK"
    try:
        result = cli("http://127.0.0.1:1/", "--redis", cluster_url(cluster), "--crawl-id", "x")
    finally:
        ask(port, "CONFIG", "SET", "maxmemory-policy", "noeviction")
    assert result.returncode == 2, result
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert f"allkeys-lru on 127.0.0.1:{port}" in result.stderr


@pytest.mark.parametrize("seed", range(1))
def test_two_cli_workers_one_killed_and_run_again_lose_nothing(
    cluster: RedisCluster, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    name = f"kill-{seed}-{rng.random()}"
    hold = threading.Event()
    hold.set()  # for the single-process crawl
    with serve_site(slow_site(120, 0.02, hold)) as server:
        url = server.url("/")
        expected = {r["url"] for r in single_crawl(url, tmp_path, "-w", "4")}
        hold.clear()  # the crawl cannot end before the kill: /hold answers after it
        before = len(server.log)
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = [
            url,
            "--redis",
            cluster_url(cluster),
            "--crawl-id",
            name,
            "-w",
            "4",
            "--lease",
            "2",
        ]
        workers = [start_worker(*common, "-o", str(out)) for out in outputs]
        wanted = rng.randint(3, 20)
        deadline = time.monotonic() + 30
        while (
            len(records(outputs[0])) < wanted
            and len({r.target for r in server.log[before:]}) < len(expected) + 1
            and time.monotonic() < deadline
        ):
            time.sleep(0.005)
        workers[0].send_signal(signal.SIGKILL)
        hold.set()
        codes, _ = wait_all(workers)
        assert codes == [-signal.SIGKILL, 0]
        again = cli(*common, "-o", str(outputs[0]))  # the same command: its leases back
        assert again.returncode == 0, again.stderr
    assert trio.run(check_crawl, cluster_url(cluster), name) == []
    status = cli("--redis", cluster_url(cluster), "--crawl-id", name, "--status")
    assert status.returncode == 0 and "done" in status.stdout, status
    deleted = cli("--redis", cluster_url(cluster), "--crawl-id", name, "--delete-crawl")
    assert deleted.returncode == 0, deleted.stderr
    slot = int(ask(cluster.ports[0], "CLUSTER", "KEYSLOT", keys_prefix(name)))
    assert ask(cluster.primary_of_slot(slot), "CLUSTER", "COUNTKEYSINSLOT", str(slot)) == "0"
    got = [r for out in outputs for r in records(out)]
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    for u, n in counts.items():
        if n > 1:  # fetched again after the kill: the later records say so
            assert sum(bool(r.get("refetched")) for r in got if r["url"] == u) >= n - 1
