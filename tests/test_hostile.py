"""Hostile servers: answers real crawls meet, with every fetcher (issue #11).

Each case must end with the right ``FetchError`` kind (or result), promptly,
with memory bounded, and leave the fetcher usable. The answers are written
byte by byte by ``hostile_server.serve_hostile``; whole crawls through
``run_crawl`` cover what the engine decides (redirects, parsing, robots.txt),
and a crawl with 512 workers against a server that never answers checks that
open file descriptors stay bounded.

Every test is bounded by ``trio.fail_after``; time limits are small (1-2 s)
so each case ends in seconds.
"""

from __future__ import annotations

import functools
import gzip
import os
import random
import socket
import struct
import threading
import tracemalloc

import pytest
import trio

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.core.http import FetchConfig
from trio_crawl.core.models import FetchResult
from trio_crawl.errors import FetchError

from fetcher_factories import FETCHER_FACTORIES, FetcherFactory
from hostile_server import Answer, HostileServer, hanging_server_process, serve_hostile

try:
    import brotli
except ImportError:  # pragma: no cover
    brotli = None

MiB = 1024 * 1024
CAP = 1 * MiB
HTML = b"Content-Type: text/html\r\n"
PAGE = b"<!doctype html><p>fine</p>"


# -- the answers ---------------------------------------------------------------------


def fixed(raw: bytes, keep_alive: bool = True) -> Answer:
    def answer(sock: socket.socket, stop: threading.Event) -> bool:
        sock.sendall(raw)
        return keep_alive

    return answer


def then_hold(raw: bytes) -> Answer:
    """Send ``raw``, then keep the connection open, silent, until the end."""

    def answer(sock: socket.socket, stop: threading.Event) -> bool:
        sock.sendall(raw)
        stop.wait()
        return False

    return answer


def endless_body(sock: socket.socket, stop: threading.Event) -> bool:
    """A body with no length that never ends (delimited by a close that never comes)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + HTML + b"Connection: close\r\n\r\n<p>")
    chunk = b"a" * 65536
    while not stop.is_set():
        sock.sendall(chunk)
    return False


def one_byte_per_second(sock: socket.socket, stop: threading.Event) -> bool:
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Length: 100\r\n\r\n")
    while not stop.wait(1.0):
        sock.sendall(b"x")
    return False


def huge_header(sock: socket.socket, stop: threading.Event) -> bool:
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + HTML + b"X-Huge: " + b"h" * (4 * MiB))
    sock.sendall(b"\r\nContent-Length: 4\r\n\r\nbody")
    return False


def endless_head(sock: socket.socket, stop: threading.Event) -> bool:
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + HTML)
    n = 0
    while not stop.is_set():
        sock.sendall(b"".join(b"X-Header-%d: value\r\n" % (n + i) for i in range(1000)))
        n += 1000
    return False


@functools.cache
def brotli_bomb() -> bytes:
    """50 MiB of zeros, brotli-compressed to a few dozen bytes."""
    assert brotli is not None
    compressor = brotli.Compressor(quality=5)
    zeros = bytes(MiB)
    return b"".join([compressor.process(zeros) for _ in range(50)] + [compressor.finish()])


def encoded(body: bytes, coding: str) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Encoding: " + coding.encode() + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )


def reset(sock: socket.socket, stop: threading.Event) -> bool:
    """Read the request, answer nothing, and reset the connection (RST)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return False


@functools.cache
def truncated_gzip() -> bytes:
    """The first 7 KB of a gzipped 40 KB page: no last block, no trailer."""
    text = random.Random(18).randbytes(20_000).hex().encode()
    compressed = gzip.compress(b"<!doctype html><p>" + text)
    assert len(compressed) > 14_000
    return compressed[:7_000]


def routes() -> dict[str, Answer]:
    table: dict[str, Answer] = {
        "/ok": fixed(
            b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Length: %d\r\n\r\n" % len(PAGE) + PAGE
        ),
        "/endless": endless_body,
        "/drip": one_byte_per_second,
        "/huge-header": huge_header,
        "/endless-head": endless_head,
        # Content-Length larger than the body: the rest never comes
        "/cl-long-open": then_hold(
            b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Length: 1000\r\n\r\nshort"
        ),
        "/cl-long-closed": fixed(
            b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Length: 1000\r\n\r\nshort", keep_alive=False
        ),
        # Content-Length smaller than the body: the rest is garbage for the next answer
        "/cl-short": fixed(
            b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Length: 5\r\n\r\nhello, and a lot more",
        ),
        "/bad-chunk-size": fixed(
            b"HTTP/1.1 200 OK\r\n"
            + HTML
            + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            keep_alive=False,
        ),
        "/bad-chunk-length": fixed(
            b"HTTP/1.1 200 OK\r\n" + HTML + b"Transfer-Encoding: chunked\r\n\r\n"
            b"3\r\nhello world\r\n0\r\n\r\n",
            keep_alive=False,
        ),
        "/no-location": fixed(b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n"),
        "/control-location": fixed(
            b"HTTP/1.1 302 Found\r\nLocation: /ok\x01\x7f\x00x\r\nContent-Length: 0\r\n\r\n"
        ),
        "/control-location-soft": fixed(
            b"HTTP/1.1 302 Found\r\nLocation: /ok\x01x\r\nContent-Length: 0\r\n\r\n"
        ),
        "/fake-gzip": fixed(encoded(b"<p>plain bytes, not gzip</p>" * 10, "gzip")),
        # a compressed page cut short, its Content-Length the truncated size ...
        "/truncated-gzip": fixed(encoded(truncated_gzip(), "gzip")),
        # ... or delimited by the server closing the connection
        "/truncated-gzip-close": fixed(
            b"HTTP/1.1 200 OK\r\n"
            + HTML
            + b"Content-Encoding: gzip\r\nConnection: close\r\n\r\n"
            + truncated_gzip(),
            keep_alive=False,
        ),
        # status lines that are not HTTP/1.x: the answer is not an answer
        "/http09-page": fixed(b"<html>\r\n\r\n<p>HTTP/0.9: a body, no head</p>", keep_alive=False),
        "/status-abc": fixed(b"HTTP/1.1 abc\r\nContent-Length: 0\r\n\r\n", keep_alive=False),
        "/status-2000": fixed(b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", keep_alive=False),
        "/status-huge": fixed(
            b"HTTP/1.1 999999999999 OK\r\nContent-Length: 0\r\n\r\n", keep_alive=False
        ),
        "/http09-line": fixed(b"<p>HTTP/0.9: a body, no head</p>", keep_alive=False),
        "/reset": reset,
    }
    if brotli is not None:
        table["/brotli-bomb"] = fixed(encoded(brotli_bomb(), "br"), keep_alive=False)
    return table


@pytest.fixture(scope="module")
def hostile() -> HostileServer:  # type: ignore[misc]
    with serve_hostile(routes()) as server:
        yield server


@pytest.fixture(params=FETCHER_FACTORIES, ids=[name for name, _ in FETCHER_FACTORIES])
def open_fetcher(request: pytest.FixtureRequest) -> FetcherFactory:
    factory: FetcherFactory = request.param[1]
    return factory


async def outcome(
    factory: FetcherFactory, url: str, *, then: str | None = None, **config: object
) -> FetchResult | FetchError:
    """What one fetch of ``url`` gives; with ``then``, the same fetcher must
    then fetch that URL fine (it stayed usable)."""
    async with factory(FetchConfig(**config)) as fetcher:  # type: ignore[arg-type]
        try:
            got: FetchResult | FetchError = await fetcher.fetch(url)
        except FetchError as exc:
            got = exc
        if then is not None:
            after = await fetcher.fetch(then)
            assert (after.status, after.body) == (200, PAGE)
    return got


def kind(got: FetchResult | FetchError) -> str:
    return got.kind if isinstance(got, FetchError) else f"status {got.status}"


# -- one fetch against each hostile answer -------------------------------------------------


@pytest.mark.parametrize(
    ("target", "expected", "seconds"),
    [
        ("/endless", "too_large", 10),
        ("/drip", "timeout", 4),
        ("/huge-header", "protocol", 10),
        ("/endless-head", "protocol", 10),
        ("/cl-long-open", "timeout", 4),
        ("/cl-long-closed", "protocol", 4),
        ("/bad-chunk-size", "protocol", 4),
        ("/bad-chunk-length", "protocol", 4),
        ("/fake-gzip", "decode", 4),
        ("/truncated-gzip", "decode", 4),
        ("/truncated-gzip-close", "decode", 4),
        ("/http09-page", "protocol", 4),
        ("/status-abc", "protocol", 4),
        ("/status-2000", "protocol", 4),
        ("/status-huge", "protocol", 4),
    ],
)
async def test_hostile_answer_ends_with_the_right_kind(
    open_fetcher: FetcherFactory,
    hostile: HostileServer,
    target: str,
    expected: str,
    seconds: float,
) -> None:
    with trio.fail_after(seconds):
        start = trio.current_time()
        got = await outcome(
            open_fetcher, hostile.url(target), then=hostile.url("/ok"), timeout=1.5, max_bytes=CAP
        )
    assert kind(got) == expected, got
    assert trio.current_time() - start < seconds


async def test_a_one_line_http09_answer_is_a_protocol_error(
    open_fetcher: FetcherFactory, hostile: HostileServer
) -> None:
    """Bytes that are no status line, then the close: the server answered,
    badly. Not ``connect`` (the start URL would exit 4), and not ``reset``."""
    with trio.fail_after(5):
        got = await outcome(
            open_fetcher, hostile.url("/http09-line"), then=hostile.url("/ok"), timeout=2
        )
    assert kind(got) == "protocol", got


async def test_a_reset_on_a_reused_connection_is_one_request(open_fetcher: FetcherFactory) -> None:
    """libcurl sends a request again, silently, when a kept-alive connection
    dies before any answer: the server must see one request per fetch (the
    crawler's ``--retries`` decides about more), and keep-alive must stay."""
    with serve_hostile(routes()) as server, trio.fail_after(10):
        async with open_fetcher(FetchConfig(timeout=2)) as fetcher:
            for _ in range(3):
                ok = await fetcher.fetch(server.url("/ok"))  # a connection to reuse
                assert (ok.status, ok.body) == (200, PAGE)
                with pytest.raises(FetchError) as info:
                    await fetcher.fetch(server.url("/reset"))
                assert info.value.kind == "reset"
            after = await fetcher.fetch(server.url("/ok"))
            assert (after.status, after.body) == (200, PAGE)
        targets = list(server.targets)
    assert targets.count("/reset") == 3, targets
    assert targets == ["/ok", "/reset"] * 3 + ["/ok"]


async def test_a_short_content_length_does_not_poison_the_connection(
    open_fetcher: FetcherFactory, hostile: HostileServer
) -> None:
    """The bytes past Content-Length must not be read as the next answer."""
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(timeout=2)) as fetcher:
            for _ in range(3):
                short = await fetcher.fetch(hostile.url("/cl-short"))
                assert (short.status, short.body) == (200, b"hello")
                after = await fetcher.fetch(hostile.url("/ok"))
                assert (after.status, after.body) == (200, PAGE)


async def test_a_redirect_without_location_is_an_answer(
    open_fetcher: FetcherFactory, hostile: HostileServer
) -> None:
    with trio.fail_after(5):
        got = await outcome(open_fetcher, hostile.url("/no-location"), then=hostile.url("/ok"))
    assert isinstance(got, FetchResult)
    assert got.status == 302 and "location" not in got.headers


async def test_control_characters_in_location(
    open_fetcher: FetcherFactory, hostile: HostileServer
) -> None:
    """A NUL or other control character in a header: httpx (h11) refuses the
    head as malformed, libcurl refuses NUL too. Either way: ``protocol``."""
    with trio.fail_after(5):
        got = await outcome(
            open_fetcher, hostile.url("/control-location"), then=hostile.url("/ok")
        )
    assert kind(got) == "protocol", got


@pytest.mark.skipif(brotli is None, reason="brotli not installed")
async def test_a_brotli_bomb_is_stopped_early(
    open_fetcher: FetcherFactory, hostile: HostileServer
) -> None:
    with trio.fail_after(20):
        async with open_fetcher(FetchConfig(max_bytes=CAP)) as fetcher:
            await fetcher.fetch(hostile.url("/ok"))  # warm up pools and imports first
            tracemalloc.start()
            try:
                with pytest.raises(FetchError) as info:
                    await fetcher.fetch(hostile.url("/brotli-bomb"))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert info.value.kind == "too_large"
    assert peak < 8 * CAP, f"peak {peak / MiB:.1f} MiB while refusing a 50 MiB bomb"


# -- whole crawls: what the engine makes of it -----------------------------------------------

CRAWL_BACKENDS = pytest.mark.parametrize("backend", ["curl", "httpx"])


async def crawl(start: str, **options: object) -> list[CrawlRecord]:
    records: list[CrawlRecord] = []
    await run_crawl([start], on_record=records.append, **options)
    return records


def link_page(n: int) -> bytes:
    links = b"".join(b'<a href="/l/%d">%d</a>\n' % (i, i) for i in range(n))
    return b"<!doctype html><html><body>" + links + b"</body></html>"


def nested_page(depth: int) -> bytes:
    return (
        b"<!doctype html><html><body>"
        + b"<div>" * depth
        + b'<a href="/deep">deep</a>'
        + b"</div>" * depth
        + b"</body></html>"
    )


def page_answer(body: bytes) -> Answer:
    return fixed(b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Length: %d\r\n\r\n" % len(body) + body)


@CRAWL_BACKENDS
async def test_crawl_records_a_redirect_without_location_as_bad_redirect(backend: str) -> None:
    with serve_hostile(routes()) as server, trio.fail_after(20):
        records = await crawl(
            server.url("/no-location"), backend=backend, ignore_robots=True, timeout=2, retries=0
        )
    assert [(r.status, r.error.kind if r.error else None) for r in records] == [
        (302, "bad_redirect")
    ]


@CRAWL_BACKENDS
async def test_crawl_survives_control_characters_in_location(backend: str) -> None:
    with serve_hostile(routes()) as server, trio.fail_after(20):
        records = await crawl(
            server.url("/control-location"), backend=backend, ignore_robots=True, timeout=2,
            retries=0,
        )  # fmt: skip
    assert len(records) == 1
    assert records[0].error is not None and records[0].error.kind == "protocol"


@CRAWL_BACKENDS
async def test_crawl_follows_a_location_with_a_soft_control_character(backend: str) -> None:
    """Without NUL or DEL, both HTTP stacks pass the value on; the URL parser
    percent-encodes the control character, as a browser does."""
    with serve_hostile(routes()) as server, trio.fail_after(20):
        records = await crawl(
            server.url("/control-location-soft"), backend=backend, ignore_robots=True,
            timeout=2, retries=0,
        )  # fmt: skip
    got = [(r.url.removeprefix(server.base_url), r.status) for r in records]
    assert got == [("/control-location-soft", 302), ("/ok%01x", 404)]
    assert records[0].redirect == server.url("/ok%01x")


@CRAWL_BACKENDS
async def test_a_page_with_100000_links(backend: str) -> None:
    table = {"/": page_answer(link_page(100_000))}
    with serve_hostile(table) as server, trio.fail_after(60):
        records = await crawl(server.url("/"), backend=backend, ignore_robots=True, max_depth=0)
    assert [(r.status, r.error, r.links) for r in records] == [(200, None, 100_000)]


@CRAWL_BACKENDS
async def test_a_page_with_100000_nested_tags(backend: str) -> None:
    table = {"/": page_answer(nested_page(100_000)), "/deep": page_answer(PAGE)}
    with serve_hostile(table) as server, trio.fail_after(60):
        records = await crawl(server.url("/"), backend=backend, ignore_robots=True)
    first = next(r for r in records if r.url == server.url("/"))
    print(f"links found under 100,000 nested tags: {first.links}")
    assert (first.status, first.error) == (200, None)
    assert len(records) == 1 + first.links  # the deep link, if the parser got that far


@CRAWL_BACKENDS
async def test_a_50_mb_robots_txt_does_not_stop_the_crawl(backend: str) -> None:
    """Google reads the first 500 KiB of a robots.txt and ignores the rest;
    robots/policy.py does the same with whatever the fetcher hands over. A file
    over ``max_bytes`` is never handed over (``too_large``): it counts as
    "unavailable" (RFC 9309 2.3.1.3: allow all), not "unreachable" (which
    would disallow the whole host), so the crawl goes on, without waiting."""
    rules = b"User-agent: *\nDisallow: /private\n"
    filler = b"# " + b"x" * 100 + b"\n"
    body_length = len(rules) + len(filler) * (50 * MiB // len(filler))

    def robots(sock: socket.socket, stop: threading.Event) -> bool:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % body_length + rules)
        block = filler * 1000
        sent = len(rules)
        while sent < body_length and not stop.is_set():
            piece = block[: body_length - sent]
            sock.sendall(piece)
            sent += len(piece)
        return True

    table = {
        "/robots.txt": robots,
        "/": page_answer(b'<a href="/private/x">p</a><a href="/public">q</a>'),
        "/public": page_answer(PAGE),
        "/private/x": page_answer(PAGE),
    }
    with serve_hostile(table) as server, trio.fail_after(60):
        records = await crawl(server.url("/"), backend=backend, timeout=10, retries=0)
        targets = list(server.targets)
    got = {
        r.url.removeprefix(server.base_url): r.error.kind if r.error else r.status for r in records
    }
    # The rules in the first bytes were never handed over: nothing is disallowed.
    assert got == {"/": 200, "/public": 200, "/private/x": 200}
    assert targets.count("/robots.txt") == 1


@CRAWL_BACKENDS
async def test_resets_at_64_workers_are_requested_at_most_1_plus_retries(backend: str) -> None:
    """The manual's promise (docs/manual/politeness.md, "Retries"), counted by
    the server: with 64 workers keeping connections alive, every URL that is
    reset is requested ``1 + retries`` times, never more, and every page that
    answers is fetched once."""
    n = 150
    links = b"".join(b'<a href="/ok/%d">o</a><a href="/r/%d">r</a>' % (i, i) for i in range(n))
    table: dict[str, Answer] = {"/": page_answer(links)}
    for i in range(n):
        table[f"/ok/{i}"] = page_answer(PAGE)
        table[f"/r/{i}"] = reset
    for retries in (0, 1):
        with serve_hostile(table) as server, trio.fail_after(60):
            records = await crawl(
                server.url("/"), backend=backend, workers=64, retries=retries, timeout=5,
                ignore_robots=True,
            )  # fmt: skip
            targets = list(server.targets)
        resets = [t for t in targets if t.startswith("/r/")]
        assert len(set(resets)) == n
        worst = max(resets.count(t) for t in set(resets))
        assert worst == 1 + retries, (retries, worst)
        assert len(resets) == n * (1 + retries)
        assert sorted(t for t in targets if t.startswith("/ok/")) == sorted(
            f"/ok/{i}" for i in range(n)
        )
        kinds = {r.error.kind for r in records if r.url.startswith(server.url("/r/")) and r.error}
        assert kinds == {"reset"}


# -- 512 workers against a server that never answers -----------------------------------------


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@CRAWL_BACKENDS
async def test_512_workers_against_a_server_that_never_answers(backend: str) -> None:
    urls = 1100  # more than two rounds of 512 workers: each worker's socket is reused
    before = open_fds()
    peak = before
    records: list[CrawlRecord] = []

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, open_fds())
            await trio.sleep(0.05)

    with hanging_server_process() as base, trio.fail_after(120):
        start_urls = [f"{base}/p/{i}" for i in range(urls)]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await run_crawl(
                start_urls,
                on_record=records.append,
                backend=backend,
                workers=512,
                timeout=1.0,
                connect_timeout=1.0,
                retries=0,
                ignore_robots=True,
            )
            nursery.cancel_scope.cancel()
    after = open_fds()
    print(f"open fds: {before} before, {peak} at the peak, {after} after")
    assert len(records) == urls
    assert {r.error.kind if r.error else None for r in records} == {"timeout"}
    assert peak - before <= 512 + 64, (before, peak)  # one socket per worker, and a few
    assert after - before <= 8, (before, after)  # and all of them closed at the end
