"""The ceiling per shard of a Redis Cluster (issue 37, Part B item 9): the
replay of ``redis_replay.py`` on a cluster of 1, 2 and 3 primaries.

A crawl's keys share one hash tag, so a crawl lives in one slot, on one
primary: a cluster carries one crawl per primary at that primary's ceiling,
and this measures it. For each cluster size S it starts S fresh
redis-servers with ``--cluster-enabled yes`` (slots split evenly with
``CLUSTER ADDSLOTSRANGE``, joined with ``CLUSTER MEET``: ``redis-cli
--cluster create`` wants at least 3 primaries), picks S crawl ids whose
slots fall on S different primaries, and replays the synthetic site's
frontier traffic for all S crawls at once (``--clients`` replay clients
each, ``redis_replay.py --client``: each calls the primary that serves its
crawl's slot, as the cluster client routes it). Printed per primary: pages,
CPU per page (``INFO cpu``), bytes per URL (``INFO memory``: the peak over
the run, less the empty server's); and for the whole cluster the pages/s.

On a machine with fewer cores than S primaries plus their clients, the
pages/s do not grow with S (the processes share the cores): the CPU per page
per primary is the figure that carries over, and the cluster's ceiling is S
times one primary's.

    python benchmarks/cluster_replay.py [--shards 1,2,3] [--pages 20000] [--clients 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from redis_replay import link_graph
from servers import BenchRedis, redis_available

from trio_crawl.frontiers.redis import keys_prefix
from trio_crawl.frontiers.redis import lua as redis_lua

SLOTS = 16384


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


def _wait(check: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():  # type: ignore[operator]
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} after {timeout} s")
        time.sleep(0.05)


@contextlib.contextmanager
def open_cluster(primaries: int) -> Iterator[list[BenchRedis]]:
    """``primaries`` fresh cluster nodes, each serving an even share of the slots."""
    binary = shutil.which("redis-server")
    assert binary is not None
    nodes: list[BenchRedis] = []
    with tempfile.TemporaryDirectory(prefix="trio-crawl-bench-cluster-") as tmp:
        try:
            for _ in range(primaries):
                port = _free_pair()
                process = subprocess.Popen(
                    [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", tmp, "--cluster-enabled", "yes",
                     "--cluster-config-file", f"{tmp}/nodes-{port}.conf",
                     "--logfile", f"{tmp}/redis-{port}.log"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )  # fmt: skip
                node = BenchRedis(port, process)
                nodes.append(node)
                _wait(lambda n=node: n.command("PING").startswith(b"+PONG"), "no PONG")
            share = SLOTS // primaries
            for i, node in enumerate(nodes):
                high = SLOTS - 1 if i == primaries - 1 else (i + 1) * share - 1
                node.command("CLUSTER", "ADDSLOTSRANGE", str(i * share), str(high))
                if i:
                    node.command("CLUSTER", "MEET", "127.0.0.1", str(nodes[0].port))
            _wait(
                lambda: all(b"cluster_state:ok" in n.command("CLUSTER", "INFO") for n in nodes),
                "cluster not ok",
            )
            yield nodes
        finally:
            for node in nodes:
                node.process.kill()
                node.process.wait()


def slot_of(node: BenchRedis, key: str) -> int:
    return int(node.command("CLUSTER", "KEYSLOT", key).strip()[1:])


def crawl_per_primary(nodes: list[BenchRedis]) -> list[str]:
    """One crawl id per primary: its slot falls in that primary's share."""
    share = SLOTS // len(nodes)
    ids: list[str | None] = [None] * len(nodes)
    n = 0
    while None in ids:
        name = f"replay-{n}"
        owner = min(slot_of(nodes[0], keys_prefix(name)) // share, len(nodes) - 1)
        if ids[owner] is None:
            ids[owner] = name
        n += 1
    return [name for name in ids if name is not None]


def peak_memory(node: BenchRedis) -> int:
    info = node.command("INFO", "memory").decode(errors="replace")
    for line in info.splitlines():
        if line.startswith("used_memory_peak:"):
            return int(line.split(":")[1])
    return 0


def client_argv(node: BenchRedis, crawl: str, name: str, graph: Path, window: int) -> list[str]:
    """A replay client (``redis_replay.py --client``) of ``crawl``, calling
    ``node``, the primary that serves the crawl's slot."""
    return [
        sys.executable, str(Path(__file__).parent / "redis_replay.py"), "--client",
        "--url", node.url.removesuffix("/0"), "--crawl", crawl, "--name", name,
        "--graph", str(graph), "--window", str(window),
    ]  # fmt: skip


def run(
    primaries: int, graph_file: Path, clients: int, window: int, depth: dict[str, int]
) -> dict[str, object]:
    with open_cluster(primaries) as nodes:
        for node in nodes:
            node.command("FUNCTION", "LOAD", "REPLACE", redis_lua.LIBRARY)
        crawls = crawl_per_primary(nodes)
        memory0 = [node.used_memory() for node in nodes]
        cpu0 = [node.cpu_seconds() for node in nodes]
        procs = [
            (i, subprocess.Popen(client_argv(node, crawl, f"c{i}-{k}", graph_file, window),
                                 stdout=subprocess.PIPE))
            for i, (node, crawl) in enumerate(zip(nodes, crawls, strict=True))
            for k in range(clients)
        ]  # fmt: skip
        results = [(i, json.loads(proc.communicate()[0])) for i, proc in procs]
        cpu = [node.cpu_seconds() - c for node, c in zip(nodes, cpu0, strict=True)]
        memory = [peak_memory(node) - m for node, m in zip(nodes, memory0, strict=True)]
    taken: list[dict[str, int]] = [{} for _ in range(primaries)]
    twice = 0
    for i, result in results:
        twice += len(taken[i].keys() & result["taken"].keys())
        taken[i].update(result["taken"])
    span = max(r["last"] for _, r in results) - min(r["first"] for _, r in results)
    exact = not twice and all(t == depth for t in taken)
    pages = [len(t) for t in taken]
    return {"pages": pages, "cpu": cpu, "memory": memory, "span": span, "exact": exact}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", default="1,2,3", help="cluster sizes (primaries), comma-separated")
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--clients", type=int, default=1, help="replay clients per crawl")
    p.add_argument("--window", type=int, default=128, help="URLs a client takes per call")
    args = p.parse_args()
    why = redis_available()
    if why:
        sys.exit(why)
    graph, depth = link_graph(args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        graph_file = Path(tmp) / "graph.json"
        graph_file.write_text(json.dumps(graph))
        for primaries in (int(s) for s in args.shards.split(",")):
            got = run(primaries, graph_file, args.clients, args.window, depth)
            pages: list[int] = got["pages"]  # type: ignore[assignment]
            cpu: list[float] = got["cpu"]  # type: ignore[assignment]
            memory: list[int] = got["memory"]  # type: ignore[assignment]
            span: float = got["span"]  # type: ignore[assignment]
            exact = got["exact"]
            print(f"{primaries} primaries, one crawl of {len(depth):,} URLs on each, "
                  f"{args.clients} client(s) a crawl: {'exact' if exact else 'NOT EXACT'}; "
                  f"{sum(pages) / span:,.0f} pages/s for the cluster")  # fmt: skip
            for i in range(primaries):
                print(f"  primary {i + 1}: {pages[i]:,} pages, {cpu[i] / pages[i] * 1e6:.1f} us "
                      f"CPU a page ({pages[i] / cpu[i]:,.0f} pages/s a core), "
                      f"{memory[i] / pages[i]:.0f} B a URL at the peak")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
