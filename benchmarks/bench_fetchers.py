"""Micro-benchmark of the fetchers: one 15 KB HTML page, fetched over and over.

Not a test. Measures, per fetcher, sequential fetches (one task) and
concurrent ones (16 tasks sharing one fetcher with ``max_connections=16``):
requests per second (wall clock) and CPU milliseconds per request in this
process (``time.process_time``, all threads; neither fetcher starts any).

The server is a tiny single-threaded raw-socket server (selectors, keep-alive,
a canned answer) in a child process, so it never competes for our GIL, and is
cheap next to any client. It binds 127.0.0.1, port 0, and only serves us.

Usage: python benchmarks/bench_fetchers.py [--requests N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager

import trio

from trio_crawl.core.http import FetchConfig
from trio_crawl.fetch.base import Fetcher
from trio_crawl.fetch.curl import open_curl_fetcher

BODY = b"<!doctype html><html><body>" + b"<p>lorem ipsum dolor</p>\n" * 600 + b"</body></html>"
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
    b"Content-Length: %d\r\n\r\n" % len(BODY)
) + BODY
CONCURRENCY = 16

FetcherFactory = Callable[[FetchConfig], AbstractAsyncContextManager[Fetcher]]


# -- the server (child process) -------------------------------------------------------


def serve() -> None:
    """Answer every request head with ANSWER, keep-alive, until stdin closes."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    print(listener.getsockname()[1], flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    pending: dict[socket.socket, bytes] = {}
    while True:
        for key, _ in selector.select():
            if key.fileobj is sys.stdin:
                return
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                selector.register(conn, selectors.EVENT_READ)
                pending[conn] = b""
                continue
            conn = key.fileobj  # type: ignore[assignment]
            try:
                data = conn.recv(65536)
            except OSError:
                data = b""
            if not data:
                selector.unregister(conn)
                pending.pop(conn, None)
                conn.close()
                continue
            buffer = pending[conn] + data
            heads = buffer.count(b"\r\n\r\n")
            pending[conn] = buffer[buffer.rfind(b"\r\n\r\n") + 4 :] if heads else buffer
            if heads:
                conn.sendall(ANSWER * heads)


@contextlib.contextmanager
def server_process() -> Iterator[str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield f"http://127.0.0.1:{port}/page.html"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()


# -- the clients ------------------------------------------------------------------------


def factories() -> dict[str, FetcherFactory]:
    def curl_with(watcher: str) -> FetcherFactory:
        @contextlib.asynccontextmanager
        async def factory(config: FetchConfig) -> AsyncIterator[Fetcher]:
            async with open_curl_fetcher(config, watcher=watcher) as fetcher:  # type: ignore[arg-type]
                yield fetcher

        return factory

    found: dict[str, FetcherFactory] = {
        "curl/epoll": curl_with("epoll"),
        "curl/tasks": curl_with("tasks"),
    }
    try:
        from trio_crawl.fetch.httpx import open_httpx_fetcher
    except ImportError:
        pass
    else:
        found["httpx"] = open_httpx_fetcher
    return found


async def measure(
    factory: FetcherFactory, url: str, requests: int, tasks: int
) -> tuple[float, float]:
    """(requests per second, CPU ms per request) for ``requests`` fetches by ``tasks`` tasks."""
    config = FetchConfig(max_connections=tasks)
    async with factory(config) as fetcher:

        async def worker(count: int) -> None:
            for _ in range(count):
                result = await fetcher.fetch(url)
                assert result.body == BODY

        async with trio.open_nursery() as nursery:  # warm-up: connections, imports
            for _ in range(tasks):
                nursery.start_soon(worker, 20)
        wall, cpu = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for _ in range(tasks):
                nursery.start_soon(worker, requests // tasks)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = requests // tasks * tasks
    return done / wall, cpu * 1000 / done


async def main(requests: int, rounds: int) -> None:
    with server_process() as url:
        print(f"{len(BODY)} byte page, {requests} requests per run, median of {rounds} rounds")
        print(f"{'fetcher':<12} {'mode':<14} {'req/s':>8} {'CPU ms/req':>11}")
        for name, factory in factories().items():
            for mode, tasks in (("sequential", 1), (f"{CONCURRENCY} concurrent", CONCURRENCY)):
                runs = [await measure(factory, url, requests, tasks) for _ in range(rounds)]
                rate = statistics.median(r for r, _ in runs)
                cpu = statistics.median(c for _, c in runs)
                print(f"{name:<12} {mode:<14} {rate:>8.0f} {cpu:>11.3f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--requests", type=int, default=3000)
        parser.add_argument("--rounds", type=int, default=3)
        args = parser.parse_args()
        trio.run(main, args.requests, args.rounds)
