"""The termination protocol across shards on a real local Redis Cluster
(``tests/redis_cluster_fixture.py``: 3 primaries; needs redis-server and
redis-cli, and coredis).

The shard side runs as the Lua library ``frontiers/cluster/termination.lua``,
loaded on every primary; the detector is ``core.shard_termination.Detector``
fed by one ``tcs_probe`` call per shard. Worker tasks move a random link
graph between six shards (hosts hashed to shards), and some die holding a
lease mid-page (their leases expire and are reclaimed). The detector's
"done" is checked against the ground truth the test keeps: every reachable
page finished, every shard's queue and leases empty on the server.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
import redis_cluster_fixture
import trio
from redis_cluster_fixture import RedisCluster, ask
from test_shard_termination import CounterlessDetector

from trio_crawl.core.shard_termination import Detector, FailoverGuard, Shard
from trio_crawl.frontiers.cluster import termination as books

coredis = pytest.importorskip(
    "coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')"
)

redis_cluster = redis_cluster_fixture.redis_cluster
redis_cluster_with_replicas = redis_cluster_fixture.redis_cluster_with_replicas

SHARDS = 6
TTL_MS = 300
CRAWL = "tc-test"
#: Seconds the failover harness keeps asking the nodes before it stops unread.
NODES_PATIENCE = 20.0


def link_graph(seed: int, pages: int = 60) -> tuple[dict[str, list[str]], set[str]]:
    """Pages over 8 hosts with 0-4 links each; the pages reachable from the first."""
    rnd = random.Random(seed)
    urls = [f"http://h{rnd.randrange(8)}.test/p{i}" for i in range(pages)]
    graph = {url: rnd.sample(urls, rnd.randrange(5)) for url in urls}
    reachable, todo = set(), [urls[0]]
    while todo:
        url = todo.pop()
        if url not in reachable:
            reachable.add(url)
            todo.extend(graph[url])
    return graph, reachable


def shard_of_url(url: str) -> int:
    return books.shard_of(url.split("/")[2], SHARDS)


class Crawl:
    """Workers and a detector over the cluster, and the ground truth."""

    def __init__(self, client: Any, graph: dict[str, list[str]], dying: set[str]) -> None:
        self.client = client
        self.graph = graph
        self.dying = dying  # workers that die holding their second lease
        self.finished: set[str] = set()
        self.deaths = 0
        self.held: dict[str, str] = {}  # URL -> live worker holding its lease
        self.passes_at_last_release = 0
        self.detector = Detector(SHARDS)
        self.over = trio.Event()

    async def worker(self, name: str, first: int) -> None:
        leases = 0
        while not self.over.is_set():
            got = None
            for step in range(SHARDS):
                shard = (first + step) % SHARDS
                url, _ = await books.lease(self.client, CRAWL, shard, name, TTL_MS)
                if url is not None:
                    got = (shard, url)
                    break
            if got is None:
                await trio.sleep(0.005)  # an idle worker polls
                continue
            shard, url = got
            leases += 1
            self.held[url] = name
            targets: dict[int, list[str]] = defaultdict(list)
            for link in self.graph[url]:
                targets[shard_of_url(link)].append(link)
            for number, (target, links) in enumerate(sorted(targets.items())):
                if number == 1 and name in self.dying and leases == 2:
                    break  # killed mid-page, after its first admission
                await books.admit(self.client, CRAWL, target, links)
            if name in self.dying and leases == 2:
                del self.held[url]  # its lease will expire and be reclaimed
                self.deaths += 1
                return
            # every admission answered: now, and only now, the release
            released = await books.release(self.client, CRAWL, shard, name, url)
            del self.held[url]
            if released:
                self.finished.add(url)
                self.passes_at_last_release = self.detector.passes

    async def check_nodes(self) -> str | None:
        """The guard's verdict on the serving primaries. Mid-failover a node
        may not answer for a moment (longer on a loaded machine): read again
        for up to ``NODES_PATIENCE`` seconds before stopping unread."""
        assert self.guard is not None
        with trio.move_on_after(NODES_PATIENCE):
            while True:
                try:
                    return self.guard.check(await self.nodes())
                except (OSError, LookupError):
                    await trio.sleep(0.1)
        return "the cluster's nodes could not be read: stopping"

    async def detect(self) -> None:
        while not self.detector.done:
            shard = self.detector.next_shard
            if self.detector.observe(await books.probe(self.client, CRAWL, shard)):
                break
            if self.detector.next_shard == 0:
                await trio.sleep(0.002)  # between passes
        self.over.set()


async def server_books(client: Any, shard: int) -> tuple[int, int]:
    keys = books.shard_keys(CRAWL, shard)
    return int(await client.llen(keys[0])), int(await client.hlen(keys[2]))


@pytest.mark.parametrize("seed", [1, 2])
async def test_the_detector_ends_a_crawl_across_shards_of_a_real_cluster(
    redis_cluster: RedisCluster,
    seed: int,
) -> None:
    graph, reachable = link_graph(seed)
    start = next(iter(graph))
    # the shards really are spread over the cluster's primaries
    slots = {int(ask(redis_cluster.ports[0], "CLUSTER", "KEYSLOT", books.shard_keys(CRAWL, s)[0]))
             for s in range(SHARDS)}  # fmt: skip
    assert len({redis_cluster.primary_of_slot(slot) for slot in slots}) >= 2
    client = coredis.RedisCluster("127.0.0.1", redis_cluster.ports[0], decode_responses=False)
    with trio.fail_after(60):
        async with client:
            await books.load(client)
            # each call touches one slot: keys of two shards are refused
            with pytest.raises(coredis.exceptions.RedisError):
                keys = books.shard_keys(CRAWL, 0)[:4] + books.shard_keys(CRAWL, 1)[4:]
                await client.fcall("tcs_admit", keys, ["x"])
            # a shard whose books are gone is refused, never read as idle
            with pytest.raises(coredis.exceptions.RedisError, match="TCGONE"):
                await books.probe(client, CRAWL, 0)
            for shard in range(SHARDS):
                assert await books.open_shard(client, CRAWL, shard) == 0
            await books.admit(client, CRAWL, shard_of_url(start), [start])
            crawl = Crawl(client, graph, dying={"w1", "w3"})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crawl.detect)
                for i in range(4):
                    nursery.start_soon(crawl.worker, f"w{i}", i)
                # the killed workers' places are taken by new ones
                for i in range(4, 6):
                    nursery.start_soon(crawl.worker, f"w{i}", i)
            assert crawl.deaths == 2  # both died holding a lease, reclaimed since
            # done was said only when nothing was left: the ground truth...
            assert crawl.finished == reachable
            assert crawl.held == {}
            for shard in range(SHARDS):  # ...and the server's own books
                assert await server_books(client, shard) == (0, 0)
            # and no later than two full passes after the last release
            assert crawl.detector.passes <= crawl.passes_at_last_release + 3
            for reading in crawl.detector.last_pass:
                assert await books.seal(client, CRAWL, reading.shard, reading.activity)


def serving_nodes(cluster: RedisCluster) -> dict[int, str]:
    """Shard -> the node serving its slot now and that node's run id (which
    a restart changes): what ``FailoverGuard`` compares."""
    nodes = {}
    for shard in range(SHARDS):
        slot = int(
            ask(cluster.live_ports()[0], "CLUSTER", "KEYSLOT", books.shard_keys(CRAWL, shard)[0])
        )
        port = cluster.primary_of_slot(slot)
        run_id = next(
            line.split(":", 1)[1].strip()
            for line in ask(port, "INFO", "server").splitlines()
            if line.startswith("run_id:")
        )
        nodes[shard] = f"{ask(port, 'CLUSTER', 'MYID')}/{run_id}"
    return nodes


class FailoverCrawl(Crawl):
    """Workers that die on any failed call (its outcome unknown: the call
    may or may not have run), and a detector that retries a failed probe and
    asks the guard before it believes a "done"."""

    def __init__(self, client: Any, graph: dict[str, list[str]], cluster: RedisCluster) -> None:
        super().__init__(client, graph, dying=set())
        self.cluster = cluster
        self.guard: FailoverGuard | None = None
        self.stopped: str | None = None
        self.halfway = trio.Event()
        self.failed_calls = 0

    async def worker(self, name: str, first: int) -> None:
        try:
            await super().worker(name, first)
        except Exception:  # a failed call: this worker is gone, its lease expires
            self.failed_calls += 1
            for url, holder in list(self.held.items()):
                if holder == name:
                    del self.held[url]

    async def nodes(self) -> dict[int, str]:
        return await trio.to_thread.run_sync(serving_nodes, self.cluster)

    async def detect(self) -> None:
        assert self.guard is not None
        while not self.detector.done:
            if len(self.finished) >= 20:
                self.halfway.set()
            shard = self.detector.next_shard
            try:
                reading = await books.probe(self.client, CRAWL, shard)
            except Exception:
                await trio.sleep(0.05)  # the shard's node is down: ask again
                continue
            done = self.detector.observe(reading)
            if self.detector.next_shard == 0:  # a pass ended: did a primary change?
                self.stopped = await self.check_nodes()
                if self.stopped is not None:
                    break
            if done:
                break
        self.over.set()


async def test_a_primary_killed_mid_crawl_stops_it_and_never_ends_it_wrongly(
    redis_cluster_with_replicas: RedisCluster,
) -> None:
    cluster = redis_cluster_with_replicas
    graph, reachable = link_graph(5, pages=150)
    assert len(reachable) > 60  # a crawl still running when the primary dies
    start = next(iter(graph))
    client = coredis.RedisCluster(
        "127.0.0.1", cluster.ports[0], decode_responses=False, connect_timeout=1, stream_timeout=2
    )
    with trio.fail_after(90):
        async with client:
            await books.load(client)
            for shard in range(SHARDS):
                await books.open_shard(client, CRAWL, shard)
            await books.admit(client, CRAWL, shard_of_url(start), [start])
            crawl = FailoverCrawl(client, graph, cluster)
            crawl.guard = FailoverGuard(await crawl.nodes())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crawl.detect)
                for i in range(3):
                    nursery.start_soon(crawl.worker, f"w{i}", i)
                await crawl.halfway.wait()
                victim = cluster.primary_of_slot(
                    int(ask(cluster.ports[0], "CLUSTER", "KEYSLOT", books.shard_keys(CRAWL, 0)[0]))
                )
                cluster.kill(victim)  # SIGKILL; its replica takes over
                await crawl.over.wait()
                nursery.cancel_scope.cancel()
    # never a wrong "done": the crawl stopped, in one line, naming the change
    assert crawl.stopped is not None, (crawl.detector.done, len(crawl.finished))
    assert "\n" not in crawl.stopped and "primary changed" in crawl.stopped
    assert not (crawl.detector.done and crawl.finished != reachable)


async def test_the_lua_books_keep_the_model_and_catch_the_shuttle(
    redis_cluster: RedisCluster,
) -> None:
    """The shuttle run twice, by hand, through the Lua library and through
    the model (``core.shard_termination.Shard``) side by side: every probe
    reads what the model reads, and the detector fed by the real probes is
    not fooled where a counterless one is (so the Lua really bumps)."""
    model = [Shard(0), Shard(1)]
    exact, counterless = Detector(2), CounterlessDetector(2)
    client = coredis.RedisCluster("127.0.0.1", redis_cluster.ports[0], decode_responses=False)
    with trio.fail_after(30):
        async with client:
            await books.load(client)
            for shard in range(2):
                await books.open_shard(client, CRAWL, shard)

            async def read(shard: int) -> None:
                reading = await books.probe(client, CRAWL, shard)
                assert reading == model[shard].read()
                exact.observe(reading)
                counterless.observe(reading)

            async def shuttle(source: int, url: str, link: str) -> None:
                got, _ = await books.lease(client, CRAWL, source, "w", 60_000)
                assert got == url == model[source].lease("w")
                admitted = await books.admit(client, CRAWL, 1 - source, [link])
                assert admitted[0] == model[1 - source].admit([link])
                assert await books.release(client, CRAWL, source, "w", url)
                assert model[source].release("w", url)

            await books.admit(client, CRAWL, 1, ["a"])
            model[1].admit(["a"])
            await read(0)
            await shuttle(1, "a", "b")
            await read(1)
            await shuttle(0, "b", "c")
            await read(0)
            await shuttle(1, "c", "d")
            await read(1)
            assert counterless.done and not exact.done  # d is queued on shard 0
            # a lease whose worker died (time-to-live 0) is reclaimed by the
            # next probe, with a bump, as the model's reclaim
            got, _ = await books.lease(client, CRAWL, 0, "dead", 0)
            assert got == "d" == model[0].lease("dead")
            model[0].reclaim("dead")
            await read(0)
            await read(1)
            got, _ = await books.lease(client, CRAWL, 0, "w", 60_000)
            assert got == "d" == model[0].lease("w")
            assert not await books.release(client, CRAWL, 0, "dead", "d")  # not its lease
            assert await books.release(client, CRAWL, 0, "w", "d") and model[0].release("w", "d")
            for _ in range(4):  # two passes over two idle shards
                await read(exact.next_shard)
            assert exact.done
            # sealed with the counters read, a shard refuses new work
            assert not await books.seal(client, CRAWL, 0, 0)  # a counter that moved
            for reading in exact.last_pass:
                assert await books.seal(client, CRAWL, reading.shard, reading.activity)
            with pytest.raises(coredis.exceptions.RedisError, match="TCDONE"):
                await books.admit(client, CRAWL, 1, ["late"])
            with pytest.raises(coredis.exceptions.RedisError, match="TCDONE"):
                await books.lease(client, CRAWL, 0, "w", 60_000)
