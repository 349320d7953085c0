"""A primary of a real Redis Cluster killed mid-crawl, its replica taking
over (``tests/redis_cluster_fixture.py``: 3 primaries with a replica each;
needs redis-server, redis-cli and coredis).

Redis replicates asynchronously, so the promoted replica may lack the last
writes the dead primary acknowledged. The crawl must then never say "done"
early: each worker either ends a crawl that is exact, or stops with one
line (exit 75, no traceback), and the same commands run again finish it
with every URL in the union of the outputs.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
import redis_cluster_fixture
import trio
from redis_cluster_fixture import RedisCluster, ask
from test_redis_cli import records, single_crawl, slow_site, start_worker, wait_all

from trio_crawl.frontiers.redis import check_crawl, keys_prefix
from trio_crawl.testing import serve_site

from cli_helpers import run_cli as cli

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_cluster_with_replicas = redis_cluster_fixture.redis_cluster_with_replicas

EXIT_REDIS_LOST = 75


def serving(cluster: RedisCluster, slot: int) -> int | None:
    """The port of the primary serving ``slot``; None mid-failover."""
    try:
        return cluster.primary_of_slot(slot)
    except LookupError:
        return None


def test_a_primary_killed_mid_crawl_never_gives_a_wrong_done(
    redis_cluster_with_replicas: RedisCluster, tmp_path: Path
) -> None:
    cluster = redis_cluster_with_replicas
    name = "failover"
    slot = int(ask(cluster.ports[0], "CLUSTER", "KEYSLOT", keys_prefix(name)))
    primary = cluster.primary_of_slot(slot)
    entry = next(p for p in cluster.ports if p != primary)  # the workers' URL names another node
    url_of_cluster = f"redis+cluster://127.0.0.1:{entry}"
    hold = threading.Event()
    hold.set()  # for the single-process crawl
    with serve_site(slow_site(150, 0.02, hold)) as server:
        url = server.url("/")
        expected = {r["url"] for r in single_crawl(url, tmp_path, "-w", "4")}
        hold.clear()  # the crawl cannot end before the kill: /hold answers after it
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = [url, "--redis", url_of_cluster, "--crawl-id", name, "-w", "4", "--lease", "2"]
        workers = [start_worker(*common, "-o", str(out)) for out in outputs]
        deadline = time.monotonic() + 30
        # Both workers mid-crawl: each has written records.
        while min(len(records(o)) for o in outputs) < 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        cluster.kill(primary)
        hold.set()
        codes, _ = wait_all(workers)
        stderr = [w.stderr.read() if w.stderr else "" for w in workers]
        seen = {r["url"] for out in outputs for r in records(out)}
        for code, text in zip(codes, stderr, strict=True):
            assert "Traceback" not in text, text
            if code == 0:  # a "done" is right: every page is in the outputs
                assert seen == expected, expected - seen
            else:
                assert code == EXIT_REDIS_LOST, (code, text)
                errors = [line for line in text.splitlines() if "error:" in line]
                assert len(errors) == 1, text  # one line, which says how to resume
                assert "lost the connection to Redis" in errors[0], text
        deadline = time.monotonic() + 30
        while serving(cluster, slot) in (primary, None):  # until the replica takes over
            assert time.monotonic() < deadline, "no replica took over"
            time.sleep(0.05)
        cluster.wait_ok()
        for out in outputs:  # the same commands again finish the crawl
            again = cli(*common, "-o", str(out))
            assert again.returncode == 0, again.stderr
    assert trio.run(check_crawl, url_of_cluster, name) == []
    got = {r["url"] for out in outputs for r in records(out)}
    assert got == expected
    assert -signal.SIGKILL not in codes
