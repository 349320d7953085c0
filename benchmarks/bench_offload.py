"""Where should page parsing run: on the event loop, in a thread, or in a process?

    python benchmarks/bench_offload.py [--pages 2000]

Two questions, measured with the crawler's own ``extract_links``:

1. Throughput for ordinary 15 KB pages (30 links): parse inline, through
   ``trio.to_thread.run_sync`` (lxml releases the GIL while parsing), or through
   ``trio_parallel.run_sync`` (a worker process: the page goes out, links come back).
2. Event-loop stall for one big page (~5 MB): the longest gap a 1 ms heartbeat
   task sees while the page is parsed inline versus in a thread.
"""

from __future__ import annotations

import argparse
import time

import trio

from trio_crawl.core.parse import extract_links

BASE = "http://bench.test/section/page.html"


def page_html(links: int, filler: int, seed: int = 0) -> bytes:
    parts = ["<!doctype html><html><head><title>t</title></head><body>"]
    for i in range(links):
        parts.append(f"<p>{'lorem ipsum ' * (filler // links // 12)}</p>")
        parts.append(f'<a href="../other/{(seed * 31 + i * 7) % 20000}.html#s{i}">link {i}</a>')
    parts.append("</body></html>")
    return "".join(parts).encode()


async def throughput(mode: str, bodies: list[bytes], workers: int) -> float:
    limiter = trio.CapacityLimiter(workers)
    start = time.perf_counter()

    async def one(body: bytes) -> None:
        if mode == "inline":
            extract_links(body, BASE, "text/html")
        elif mode == "thread":
            await trio.to_thread.run_sync(extract_links, body, BASE, "text/html", limiter=limiter)
        else:
            import trio_parallel

            await trio_parallel.run_sync(extract_links, body, BASE, "text/html", limiter=limiter)

    async with trio.open_nursery() as nursery:
        send, receive = trio.open_memory_channel[bytes](0)

        async def worker(receive: trio.MemoryReceiveChannel[bytes]) -> None:
            async with receive:
                async for body in receive:
                    await one(body)

        async with receive:
            for _ in range(workers):
                nursery.start_soon(worker, receive.clone())
        async with send:
            for body in bodies:
                await send.send(body)
    return len(bodies) / (time.perf_counter() - start)


async def stall(mode: str, body: bytes) -> tuple[float, float]:
    """(longest heartbeat gap in ms, parse wall time in ms)."""
    worst = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await trio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    async with trio.open_nursery() as nursery:
        nursery.start_soon(heartbeat)
        await trio.sleep(0.01)
        start = time.perf_counter()
        if mode == "inline":
            extract_links(body, BASE, "text/html")
        else:
            await trio.to_thread.run_sync(extract_links, body, BASE, "text/html")
        took = time.perf_counter() - start
        await trio.sleep(0.01)
        done = True
    return worst * 1000, took * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=2000)
    args = parser.parse_args()
    bodies = [page_html(30, 15_000, seed) for seed in range(args.pages)]
    print(f"{len(bodies)} pages of {len(bodies[0]):,} bytes, 30 links each")
    modes = ["inline", "thread"]
    try:
        import trio_parallel  # noqa: F401

        modes.append("process")
    except ImportError:
        print("(trio-parallel not installed: no process figures)")
    for mode in modes:
        for workers in (1, 2, 4):
            rate = await throughput(mode, bodies, workers)
            print(f"  {mode:8} workers={workers}: {rate:8,.0f} pages/s")
    big = page_html(20_000, 5_000_000)
    print(f"one page of {len(big) / 1e6:.1f} MB with 20,000 links:")
    for mode in ("inline", "thread"):
        gap, took = await stall(mode, big)
        print(f"  {mode:8}: parse {took:7.1f} ms, longest event-loop gap {gap:7.1f} ms")


if __name__ == "__main__":
    trio.run(main)
