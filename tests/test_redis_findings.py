"""What the Redis fault run found (issue #37 item 6), each against a real
redis-server and the real ``trio-crawl`` command line: ``--processes``
without ``-o``, a password in the workers' command lines, crawl ids that
share a key prefix, a worker killed by a signal, the warning of a worker
joining a crawl Redis lost, and the budgets' refusal worded in flags.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import redis_fixture
from cli_helpers import run_cli as cli
from redis_fixture import RedisServer

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id
own_redis = redis_fixture.own_redis

TIMEOUT = 90


@pytest.mark.parametrize("option", ["--max-hosts", "--max-pages-per-host"])
def test_the_refusal_of_budgets_names_the_flags(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path, option: str
) -> None:
    result = cli(
        "http://127.0.0.1:1/", "--redis", redis_server.url, "--crawl-id", crawl_id,
        option, "3", "-o", str(tmp_path / "out.jsonl"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "trio-crawl: error: --max-pages-per-host and --max-hosts cannot be combined with "
        "--redis yet: the budgets are kept in one process's memory\n"
    )
