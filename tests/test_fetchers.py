"""The ``Fetcher`` contract, run against every implementation.

Rules of this suite:

- Each test takes the ``open_fetcher`` fixture, parametrized over
  ``fetcher_factories.FETCHER_FACTORIES``, so a new fetcher gets the whole
  suite by adding one entry there.
- Servers are ``serve_site`` on 127.0.0.1, port 0, started by the tests;
  nothing else is ever contacted.
- Every test is bounded by ``trio.fail_after``.
- Error kinds are asserted exactly; the mapping is documented in
  ``fetch/httpx.py`` and every fetcher must produce the same kinds:
  reset mid-body -> ``reset``; truncated body (chunked or Content-Length)
  -> ``protocol``; refused -> ``connect``; deadlines -> ``timeout``.

The last section tests httpx-only parts (``BodyDecoder``, ``error_kind``,
``HttpxFetcher`` with ``MockTransport``) directly.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import itertools
import random
import socket
import tracemalloc
import zlib
from collections.abc import Iterator

import httpcore2
import httpx2
import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_crawl.core.http import FetchConfig
from trio_crawl.errors import FetchError
from trio_crawl.fetch.decode import ACCEPT_ENCODING, BodyDecoder, is_decode_error
from trio_crawl.fetch.errors import to_fetch_error
from trio_crawl.fetch.httpx import HttpxFetcher, error_kind, open_httpx_fetcher
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Route, Site, SiteRequest, page, redirect

from fetcher_factories import FETCHER_FACTORIES, FetcherFactory

try:
    import brotli
except ImportError:  # pragma: no cover
    brotli = None

TEXT = b"<!doctype html><p>" + b"hello crawler " * 2000 + b"</p>"
MiB = 1024 * 1024
CAP = 1 * MiB  # max_bytes of the size tests


@functools.cache
def gzip_bomb() -> bytes:
    """50 MiB of zeros gzipped (about 50 KiB), built without holding 50 MiB."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(MiB)
    return b"".join([compressor.compress(zeros) for _ in range(50)] + [compressor.flush()])


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def echo_headers(request: SiteRequest) -> Response:
    lines = "".join(f"{k}: {v}\n" for k, v in sorted(request.headers.items()))
    return Response(body=lines.encode(), content_type="text/html")


def encoded(body: bytes, coding: str) -> Response:
    return Response(body=body, headers=(("Content-Encoding", coding),))


def make_site() -> Site:
    routes: dict[str, Route] = {
        "/page": Response(
            body=TEXT,
            headers=(("X-Test", "yes"), ("X-Multi", "one"), ("X-Multi", "two")),
        ),
        "/delayed": Response(body=b"late", delay=0.2),
        "/echo": echo_headers,
        "/image.png": Response(body=b"\x89PNG" + bytes(300_000), content_type="image/png"),
        "/gzip": Response(body=TEXT, gzip=True),
        "/gzip-chunked": Response(body=TEXT, gzip=True, chunked=True),
        "/deflate": encoded(zlib.compress(TEXT), "deflate"),
        "/deflate-raw": encoded(raw_deflate(TEXT), "deflate"),
        "/corrupt-gzip": encoded(b"this is not gzip data at all", "gzip"),
        "/moved": redirect("/page"),
        "/error": Response(status=500, body=b"<p>oops</p>"),
        "/big": Response(body=bytes(2 * MiB)),
        "/big-chunked": Response(body=bytes(2 * MiB), chunked=True),
        "/bomb": encoded(gzip_bomb(), "gzip"),
        "/slow-head": Response(body=b"never in time", delay=10),
        "/slow-drip": Response(body=bytes(64 * 1024), drip=0.05),
        "/reset": Response(body=bytes(200_000), reset_after=10_000),
        "/truncated": Response(body=bytes(200_000), truncate=True),
        "/truncated-chunked": Response(body=bytes(200_000), truncate=True, chunked=True),
    }
    if brotli is not None:
        routes["/br"] = encoded(brotli.compress(TEXT), "br")
    return Site(routes)


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with serve_site(make_site()) as running:
        yield running


@pytest.fixture(params=FETCHER_FACTORIES, ids=[name for name, _ in FETCHER_FACTORIES])
def open_fetcher(request: pytest.FixtureRequest) -> FetcherFactory:
    factory: FetcherFactory = request.param[1]
    return factory


@contextlib.contextmanager
def black_hole() -> Iterator[str]:
    """A URL whose TCP connect hangs: a listener with a full accept queue."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # fills the queue
            yield f"http://127.0.0.1:{port}/"


async def expect_error(factory: FetcherFactory, url: str, kind: str, **config: object) -> None:
    async with factory(FetchConfig(**config)) as fetcher:  # type: ignore[arg-type]
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(url)
    assert info.value.kind == kind, info.value


# -- answers -------------------------------------------------------------------


async def test_html_page_body_headers_elapsed(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            result = await fetcher.fetch(server.url("/page"))
            delayed = await fetcher.fetch(server.url("/delayed"))
    assert result.url == server.url("/page")
    assert result.status == 200
    assert result.body == TEXT
    assert not result.body_skipped
    assert result.content_type == "text/html; charset=utf-8"
    assert result.headers["x-test"] == "yes"
    assert result.headers["x-multi"] == "one, two"
    assert result.headers["content-length"] == str(len(TEXT))
    assert all(name == name.lower() for name in result.headers)
    assert 0 <= result.elapsed < 5
    assert delayed.body == b"late"
    assert 0.2 <= delayed.elapsed < 5


async def test_plain_http_is_http11(open_fetcher: FetcherFactory, server: SiteServer) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(http2=True)) as fetcher:  # no h2c on plain http
            page_result = await fetcher.fetch(server.url("/page"))
            skipped = await fetcher.fetch(server.url("/image.png"))
    assert page_result.http_version == skipped.http_version == "HTTP/1.1"


async def test_user_agent_and_extra_headers_are_sent(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(user_agent="test-agent/9")) as fetcher:
            result = await fetcher.fetch(server.url("/echo"), {"X-Extra": "42"})
    lines = set(result.body.decode().splitlines())
    assert "user-agent: test-agent/9" in lines
    assert "x-extra: 42" in lines
    assert any(line.startswith("accept-encoding: ") and "gzip" in line for line in lines)


async def test_non_html_body_is_skipped(open_fetcher: FetcherFactory, server: SiteServer) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            result = await fetcher.fetch(server.url("/image.png"))
    assert result.status == 200
    assert result.body_skipped
    assert result.body == b""
    assert result.content_type == "image/png"


async def test_non_html_body_is_read_when_not_html_only(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(html_only=False)) as fetcher:
            result = await fetcher.fetch(server.url("/image.png"))
    assert not result.body_skipped
    assert result.body == b"\x89PNG" + bytes(300_000)


@pytest.mark.parametrize("target", ["/gzip", "/gzip-chunked", "/deflate", "/deflate-raw", "/br"])
async def test_content_encodings_are_decoded(
    open_fetcher: FetcherFactory, server: SiteServer, target: str
) -> None:
    if target == "/br" and brotli is None:
        pytest.skip("brotli not installed")
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            result = await fetcher.fetch(server.url(target))
    assert result.status == 200
    assert result.body == TEXT


async def test_corrupt_gzip_is_a_decode_error(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(10):
        await expect_error(open_fetcher, server.url("/corrupt-gzip"), "decode")


async def test_redirect_is_returned_not_followed(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            result = await fetcher.fetch(server.url("/moved"))
    assert result.status == 301
    assert result.headers["location"] == "/page"
    assert result.url == server.url("/moved")
    assert result.body == b""


@pytest.mark.parametrize(("target", "status"), [("/nowhere", 404), ("/error", 500)])
async def test_error_statuses_are_results(
    open_fetcher: FetcherFactory, server: SiteServer, target: str, status: int
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            result = await fetcher.fetch(server.url(target))
    assert result.status == status
    assert result.body  # both answers have an HTML body


# -- bad input: refused the same way by every fetcher ---------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Bad": "1\r\nX-Smuggled: 2"},
        {"X-Bad": "1\nX-Smuggled: 2"},
        {"X-Bad": "1\r2"},
        {"X-Bad": "1\x002"},
        {"X-Bad\r\nX-Smuggled": "2"},
        {"X Bad": "1"},
        {"": "1"},
        {"X-Bad": "caf\u00e9"},
    ],
    ids=["crlf", "lf", "cr", "nul", "crlf-in-name", "space-in-name", "empty-name", "non-ascii"],
)
async def test_bad_request_headers_are_a_protocol_error(
    open_fetcher: FetcherFactory, server: SiteServer, headers: dict[str, str]
) -> None:
    """Issue #9, bug 5: curl raised a bare ValueError (ending the crawl) where
    httpx gave a ``protocol`` record; both raised UnicodeEncodeError on
    non-ASCII. Every fetcher now refuses such a request the same way, sends
    nothing, and stays usable."""
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig()) as fetcher:
            before = server.count("/echo")
            with pytest.raises(FetchError) as info:
                await fetcher.fetch(server.url("/echo"), headers)
            assert info.value.kind == "protocol", info.value
            assert server.count("/echo") == before
            good = await fetcher.fetch(server.url("/echo"), {"X-Good": " padded\t"})
    assert "x-good: padded" in good.body.decode().splitlines()


@pytest.mark.parametrize("tail", ["\r\nX-Smuggled: 1", "\x00", "\x7f", "\t"])
async def test_control_characters_in_the_url_are_a_connect_error(
    open_fetcher: FetcherFactory, server: SiteServer, tail: str
) -> None:
    with trio.fail_after(10):
        await expect_error(open_fetcher, server.url("/page") + tail, "connect")


# -- size caps -------------------------------------------------------------------


@pytest.mark.parametrize("target", ["/big", "/big-chunked"])
async def test_too_large(open_fetcher: FetcherFactory, server: SiteServer, target: str) -> None:
    with trio.fail_after(10):
        await expect_error(open_fetcher, server.url(target), "too_large", max_bytes=CAP)


async def test_body_at_the_cap_is_accepted(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_fetcher(FetchConfig(max_bytes=2 * MiB)) as fetcher:
            result = await fetcher.fetch(server.url("/big-chunked"))
    assert len(result.body) == 2 * MiB


async def test_gzip_bomb_is_stopped_early(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(20):
        async with open_fetcher(FetchConfig(max_bytes=CAP)) as fetcher:
            await fetcher.fetch(server.url("/page"))  # warm up pools and imports first
            tracemalloc.start()
            try:
                with pytest.raises(FetchError) as info:
                    await fetcher.fetch(server.url("/bomb"))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert info.value.kind == "too_large"
    assert peak < 8 * CAP, f"peak {peak / MiB:.1f} MiB while refusing a 50 MiB bomb"


# -- deadlines and broken connections ------------------------------------------


async def test_total_timeout_while_waiting_for_headers(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    with trio.fail_after(5):
        start = trio.current_time()
        await expect_error(open_fetcher, server.url("/slow-head"), "timeout", timeout=0.3)
        assert trio.current_time() - start < 3


async def test_total_timeout_on_a_slow_drip(
    open_fetcher: FetcherFactory, server: SiteServer
) -> None:
    # each 1 KiB arrives well within any read timeout; only the total can fire
    with trio.fail_after(5):
        start = trio.current_time()
        await expect_error(open_fetcher, server.url("/slow-drip"), "timeout", timeout=0.5)
        assert trio.current_time() - start < 3


async def test_connect_timeout(open_fetcher: FetcherFactory) -> None:
    with trio.fail_after(5), black_hole() as url:
        start = trio.current_time()
        await expect_error(open_fetcher, url, "timeout", connect_timeout=0.3, timeout=10)
        assert trio.current_time() - start < 3


async def test_reset_mid_body(open_fetcher: FetcherFactory, server: SiteServer) -> None:
    with trio.fail_after(10):
        await expect_error(open_fetcher, server.url("/reset"), "reset", html_only=False)


@pytest.mark.parametrize("target", ["/truncated", "/truncated-chunked"])
async def test_truncated_body_is_protocol_error(
    open_fetcher: FetcherFactory, server: SiteServer, target: str
) -> None:
    with trio.fail_after(10):
        await expect_error(open_fetcher, server.url(target), "protocol")


async def test_connection_refused(open_fetcher: FetcherFactory) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with trio.fail_after(10):
        await expect_error(open_fetcher, f"http://127.0.0.1:{port}/", "connect")


# -- connections -----------------------------------------------------------------


async def test_keep_alive_reuses_connections(open_fetcher: FetcherFactory) -> None:
    with serve_site(Site({"/": page("/x")})) as fresh, trio.fail_after(20):
        async with open_fetcher(FetchConfig()) as fetcher:
            for _ in range(100):
                result = await fetcher.fetch(fresh.url("/"))
                assert result.status == 200
    assert fresh.count("/") == 100
    assert fresh.connections <= 2


async def test_concurrent_fetches(open_fetcher: FetcherFactory) -> None:
    routes = {f"/p{i}": Response(body=b"page %d" % i, delay=0.05) for i in range(32)}
    bodies: dict[int, bytes] = {}
    with serve_site(Site(routes)) as fresh, trio.fail_after(20):
        async with open_fetcher(FetchConfig(max_connections=32)) as fetcher:

            async def one(i: int) -> None:
                bodies[i] = (await fetcher.fetch(fresh.url(f"/p{i}"))).body

            async with trio.open_nursery() as nursery:
                for i in range(32):
                    nursery.start_soon(one, i)
    assert bodies == {i: b"page %d" % i for i in range(32)}
    assert fresh.connections == 32


async def test_cancellation_at_random_points_leaks_nothing(open_fetcher: FetcherFactory) -> None:
    """Hundreds of fetches cancelled at random moments (waiting for a pool slot,
    connecting, waiting for headers, mid-body), then the pool must still run
    ``max_connections`` requests at once: a leaked slot would serialise one."""
    pool, hold = 4, 0.8
    routes = {
        "/fast": page("/a", "/b"),
        "/head": Response(body=b"<p>x</p>", delay=0.02),
        "/drip": Response(body=bytes(8 * 1024), drip=0.004),
        "/big": Response(body=bytes(4 * MiB)),
        "/hold": Response(body=b"held", delay=hold),
    }
    outcomes = {"cancelled": 0, "done": 0, "error": 0}
    with serve_site(Site(routes)) as fresh, black_hole() as stuck, trio.fail_after(60):
        urls = [fresh.url(t) for t in ("/fast", "/head", "/drip", "/big")] + [stuck]
        config = FetchConfig(max_connections=pool, timeout=10, html_only=False, max_bytes=8 * MiB)
        async with open_fetcher(config) as fetcher:

            async def worker(seed: int) -> None:
                rng = random.Random(seed)
                for i in range(50):
                    url = rng.choice(urls)
                    # One fetch in ten may finish (a busy machine cancels all
                    # the others before they do); the rest end at random points.
                    budget = 10.0 if i % 10 == 0 and url != stuck else rng.uniform(0, 0.04)
                    with trio.move_on_after(budget) as scope:
                        try:
                            await fetcher.fetch(url)
                        except FetchError:
                            outcomes["error"] += 1
                        else:
                            outcomes["done"] += 1
                    outcomes["cancelled"] += scope.cancelled_caught

            async with trio.open_nursery() as nursery:
                for seed in range(8):
                    nursery.start_soon(worker, seed)

            before = len(fresh.log)
            with trio.fail_after(hold * 6):
                async with trio.open_nursery() as nursery:
                    for _ in range(pool):
                        nursery.start_soon(fetcher.fetch, fresh.url("/hold"))
    arrivals = sorted(e.time for e in fresh.log[before:] if e.target == "/hold")
    assert len(arrivals) == pool
    assert arrivals[-1] - arrivals[0] < hold * 0.75, "requests waited for a pool slot"
    assert outcomes["cancelled"] >= 200, outcomes
    assert outcomes["done"] >= 10, outcomes
    assert {"/drip", "/big", "/head"} <= set(fresh.targets())


# -- httpx-only: decoder, error mapping, injected clients ----------------------


@settings(max_examples=60, deadline=None)
@example(body=TEXT, coding="deflate-raw", cuts=[1])  # the 2-byte sniff must wait for 2 bytes
@example(body=b"", coding="deflate", cuts=[])
@given(
    body=st.binary(max_size=5000) | st.just(TEXT),
    coding=st.sampled_from(["gzip", "deflate", "deflate-raw", "br", "identity", "x-unknown"]),
    cuts=st.lists(st.integers(min_value=0, max_value=6000), max_size=8),
)
def test_body_decoder_undoes_any_split(body: bytes, coding: str, cuts: list[int]) -> None:
    if coding == "br" and "br" not in ACCEPT_ENCODING:
        return
    wire = {
        "gzip": lambda b: gzip.compress(b),
        "deflate": zlib.compress,
        "deflate-raw": raw_deflate,
        "br": lambda b: brotli.compress(b) if brotli else b,
    }.get(coding, lambda b: b)(body)
    decoder = BodyDecoder("deflate" if coding == "deflate-raw" else coding)
    edges = sorted({0, len(wire), *(c for c in cuts if c < len(wire))})
    out = b"".join(
        piece for a, b in itertools.pairwise(edges) for piece in decoder.feed(wire[a:b])
    )
    assert out + b"".join(decoder.finish()) == body


@pytest.mark.parametrize("coding", ["gzip", "deflate", "deflate-raw", "br"])
def test_body_decoder_refuses_a_stream_cut_short(coding: str) -> None:
    """Issue #18 item 6: every proper prefix of a compressed body is corrupt,
    however it was split; an empty body (a 304, a HEAD answer) is not."""
    if coding == "br" and "br" not in ACCEPT_ENCODING:
        pytest.skip("this brotli cannot be bounded")
    wire = {
        "gzip": gzip.compress,
        "deflate": zlib.compress,
        "deflate-raw": raw_deflate,
        "br": lambda b: brotli.compress(b) if brotli else b,
    }[coding](TEXT)
    name = "deflate" if coding == "deflate-raw" else coding
    for cut in sorted({1, 2, len(wire) // 3, len(wire) // 2, len(wire) - 4, len(wire) - 1}):
        decoder = BodyDecoder(name)
        with pytest.raises(Exception) as info:
            b"".join([*decoder.feed(wire[:cut]), *decoder.finish()])
        assert is_decode_error(info.value), (cut, info.value)
    empty = BodyDecoder(name)
    assert b"".join([*empty.feed(b""), *empty.finish()]) == b""


def test_body_decoder_chains_codings_and_bounds_each_step() -> None:
    inner = gzip.compress(TEXT)
    decoder = BodyDecoder("gzip, deflate")  # gzip applied first, so undone last
    assert b"".join([*decoder.feed(zlib.compress(inner)), *decoder.finish()]) == TEXT
    bomb = BodyDecoder("gzip")
    pieces = iter(bomb.feed(gzip_bomb()[:20_000]))
    sizes = [len(next(pieces)) for _ in range(10)]  # a generator: stopping early is free
    assert max(sizes) <= 64 * 1024


def test_error_kind_maps_each_family_and_leaves_bugs_alone() -> None:
    request = httpx2.Request("GET", "http://127.0.0.1/")
    assert error_kind(httpx2.ConnectTimeout("x", request=request)) == "timeout"
    assert error_kind(httpx2.PoolTimeout("x", request=request)) == "timeout"
    assert error_kind(httpx2.ConnectError("refused", request=request)) == "connect"
    assert error_kind(httpx2.ReadError("reset", request=request)) == "reset"
    assert error_kind(httpx2.RemoteProtocolError("bad chunk", request=request)) == "protocol"
    disconnected = httpx2.RemoteProtocolError("Server disconnected without sending a response.")
    assert error_kind(disconnected) == "reset"
    assert error_kind(httpx2.DecodingError("x", request=request)) == "decode"
    assert error_kind(zlib.error("bad")) == "decode"
    assert error_kind(trio.TooSlowError()) is None  # the shared path's business, not ours
    deadline = to_fetch_error(trio.TooSlowError(), error_kind, 2.5)
    assert deadline is not None
    assert str(deadline) == "timeout: no complete answer within the 2.5 s total deadline"
    assert error_kind(ValueError("a bug")) is None
    assert error_kind(httpx2.StreamClosed()) is None  # misuse of httpx is our bug

    # plain httpx: same class names, another module
    class TransportError(Exception):
        __module__ = "httpx._exceptions"

    class TimeoutException(TransportError):
        __module__ = "httpx._exceptions"

    class ReadTimeout(TimeoutException):
        __module__ = "httpx._exceptions"

    assert error_kind(ReadTimeout("slow")) == "timeout"
    assert error_kind(httpcore2.ReadError("escaped httpx")) == "reset"


def mock_client(handler: object, **kwargs: object) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler), **kwargs)  # type: ignore[arg-type]


async def test_injected_client_gets_our_headers_and_no_redirects() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(302, headers={"Location": "/elsewhere"})

    client = mock_client(handler, follow_redirects=True)
    with trio.fail_after(5):
        async with open_httpx_fetcher(FetchConfig(user_agent="ua/1"), client) as fetcher:
            result = await fetcher.fetch("http://127.0.0.1:1/start")
        assert not client.is_closed  # not ours to close
        await client.aclose()
    assert result.status == 302
    assert len(seen) == 1
    assert seen[0].headers["user-agent"] == "ua/1"
    assert seen[0].headers["accept-encoding"] == ACCEPT_ENCODING


async def test_owned_client_is_closed_and_aclose_is_idempotent() -> None:
    client = mock_client(lambda request: httpx2.Response(200, html="hi"))
    fetcher = HttpxFetcher(FetchConfig(), client, owns_client=True)
    with trio.fail_after(5):
        assert (await fetcher.fetch("http://127.0.0.1:1/")).body == b"hi"
        await fetcher.aclose()
        await fetcher.aclose()
    assert client.is_closed


async def test_unknown_exceptions_escape_fetch() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise ValueError("bug in the transport")

    fetcher = HttpxFetcher(FetchConfig(), mock_client(handler))
    with trio.fail_after(5), pytest.raises(ValueError, match=r"^bug in the transport$"):
        await fetcher.fetch("http://127.0.0.1:1/")


async def test_declared_oversize_is_refused_before_reading() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"Content-Length": str(5 * CAP)}, content=b"")

    fetcher = HttpxFetcher(FetchConfig(max_bytes=CAP), mock_client(handler))
    with trio.fail_after(5), pytest.raises(FetchError, match=r"^too_large: Content-Length"):
        await fetcher.fetch("http://127.0.0.1:1/")


async def test_not_modified_with_a_big_content_length_is_fine() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(304, headers={"Content-Length": str(5 * CAP)})

    fetcher = HttpxFetcher(FetchConfig(max_bytes=CAP), mock_client(handler))
    with trio.fail_after(5):
        result = await fetcher.fetch("http://127.0.0.1:1/")
    assert (result.status, result.body) == (304, b"")


async def test_small_skipped_bodies_keep_the_connection() -> None:
    routes = {"/": page(), "/style.css": Response(body=b"p{}" * 100, content_type="text/css")}
    with serve_site(Site(routes)) as fresh, trio.fail_after(10):
        async with open_httpx_fetcher(FetchConfig()) as fetcher:
            for _ in range(20):
                assert (await fetcher.fetch(fresh.url("/style.css"))).body_skipped
                await fetcher.fetch(fresh.url("/"))
    assert fresh.connections == 1
