"""The ``redis:N`` rows of ``run.py``: one crawl in Redis, N worker processes.

``redis:N`` runs ``trio-crawl URL --redis ... --crawl-id ... --processes N -o OUT``
(the parent starts N workers on this machine and waits for them); its row is the
parent's wall time and the CPU of the parent and every worker (``os.wait4``
counts a process's reaped children). The outputs ``OUT.1 ... OUT.N`` are merged
for the exactness check. The redis-server is started once per benchmark run
(``servers.open_redis``: a free 127.0.0.1 port, persistence off); each crawl gets
a fresh crawl id. Its CPU time (``INFO cpu``) is reported beside each row: it
competes for the same cores.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from servers import BenchRedis


def parse_tool(tool: str) -> int | None:
    """N for ``redis:N`` (None for another tool)."""
    name, _, count = tool.partition(":")
    if name != "redis" or not count.isdigit() or int(count) < 1:
        return None
    return int(count)


def command(base: list[str], redis: BenchRedis, processes: int, output: Path) -> list[str]:
    """The trio-crawl command line of one ``redis:N`` run."""
    crawl_id = f"bench-{uuid.uuid4().hex[:10]}"
    return [
        *base,
        "--redis",
        redis.url,
        "--crawl-id",
        crawl_id,
        "--processes",
        str(processes),
        "-o",
        str(output),
    ]


def outputs(output: Path, processes: int) -> list[Path]:
    """The files the N workers wrote (``out.jsonl`` -> ``out.1.jsonl`` ...)."""
    return [output.with_name(f"{output.stem}.{i}{output.suffix}") for i in range(1, processes + 1)]
