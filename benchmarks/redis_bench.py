"""The ``redis:N`` rows of ``run.py``: one crawl in Redis, N worker processes.

``redis:N`` runs ``trio-crawl URL --redis ... --crawl-id ... --processes N -o OUT``
(the parent starts N workers on this machine and waits for them); its row is the
parent's wall time and the CPU of the parent and every worker (``os.wait4``
counts a process's reaped children). The outputs ``OUT.1 ... OUT.N`` are merged
for the exactness check. The redis-server is started here, on a free
127.0.0.1 port with persistence off, once per benchmark run; each crawl gets a
fresh crawl id. Its CPU time (``INFO cpu``) is reported beside each row: it
competes for the same cores.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy since boot (``/proc/stat``;
    0 where there is none): the runner subtracts a run's own CPU from the
    difference to show what other programs took during it."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def parse_tool(tool: str) -> int | None:
    """N for ``redis:N`` (None for another tool)."""
    name, _, count = tool.partition(":")
    if name != "redis" or not count.isdigit() or int(count) < 1:
        return None
    return int(count)


def available() -> str | None:
    """Why the Redis rows cannot run here (None: they can)."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    try:
        import coredis  # noqa: F401
    except ImportError:
        return "coredis is not installed (pip install 'trio-crawl[redis]')"
    return None


@dataclass
class BenchRedis:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> bytes:
        parts = [a.encode() for a in args]
        wire = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(wire)
            chunks = []
            conn.settimeout(0.5)
            with contextlib.suppress(TimeoutError):
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    if chunk.endswith(b"\r\n") and len(chunk) < 65536:
                        break
        return b"".join(chunks)

    def cpu_seconds(self) -> float:
        """The server's user + system CPU so far (``INFO cpu``)."""
        info = self.command("INFO", "cpu").decode(errors="replace")
        total = 0.0
        for line in info.splitlines():
            name, _, value = line.partition(":")
            if name in ("used_cpu_sys", "used_cpu_user"):
                total += float(value)
        return total

    def used_memory(self) -> int:
        info = self.command("INFO", "memory").decode(errors="replace")
        for line in info.splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        return 0


@contextlib.contextmanager
def open_redis() -> Iterator[BenchRedis]:
    binary = shutil.which("redis-server")
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="trio-crawl-bench-redis-") as tmp:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--logfile", str(Path(tmp) / "redis.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        server = BenchRedis(port, process)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    if server.command("PING").startswith(b"+PONG"):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            yield server
        finally:
            process.kill()
            process.wait()


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
