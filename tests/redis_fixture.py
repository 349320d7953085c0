"""A real ``redis-server`` for the tests: one per test session, on a free
127.0.0.1 port, persistence off. Tests that need it skip, saying why, only
when no ``redis-server`` is installed (``.ci/run`` installs it on CI)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
)


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    password: str | None = None

    @property
    def url(self) -> str:
        auth = f"default:{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> str:
        """One command through a raw socket (no client library): the reply's
        first line, for simple replies and integers."""

        def encode(*args: str) -> bytes:
            parts = [a.encode() for a in args]
            return b"*%d\r\n" % len(parts) + b"".join(
                b"$%d\r\n%s\r\n" % (len(p), p) for p in parts
            )

        wire = (encode("AUTH", self.password) if self.password else b"") + encode(*args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(wire)
            reply = conn.recv(65536)
            if self.password:  # AUTH's +OK first, then the reply
                while reply.count(b"\r\n") < 2 and (more := conn.recv(65536)):
                    reply += more
                reply = reply.split(b"\r\n", 1)[1]
        return reply.split(b"\r\n", 1)[0].decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_redis(tmp: Path, *extra: str, password: str | None = None) -> RedisServer:
    """A redis-server of one's own; ``extra``: more of its options."""
    assert REDIS_SERVER is not None
    for _ in range(5):
        port = free_port()
        log = tmp / f"redis-{port}.log"
        process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(tmp),
                "--logfile", str(log),
                *(["--requirepass", password] if password else []),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        server = RedisServer(port, process, log, password)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if server.command("PING") == "+PONG":
                    return server
            except OSError:
                time.sleep(0.05)
        process.kill()
        process.wait()
    raise RuntimeError("redis-server did not start")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.process.kill()
        server.process.wait()


@pytest.fixture
def crawl_id() -> str:
    """A crawl id of its own for each test: the session's Redis is shared."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Start redis-servers of the test's own (options, password) and stop
    them after: for tests that break their server (OOM, FLUSHALL)."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    started: list[RedisServer] = []

    def start(*extra: str, password: str | None = None) -> RedisServer:
        server = start_redis(tmp_path_factory.mktemp("own"), *extra, password=password)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
        server.process.wait()
