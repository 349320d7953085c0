"""The asks fetcher beyond the shared suite (``test_fetchers.py`` runs that
one on asks too, where asks can run).

Rules of this suite:

- asks 3 runs only on trio < 0.24 (anyio 3), so every test that fetches is
  skipped where ``load_asks`` fails: run them with ``nox -s asks``. The pure
  tests (error mapping, URL checks) and the "asks is missing" test run
  everywhere they apply.
- Servers are ``serve_site`` or a raw trio server from ``raw_server``, both
  on 127.0.0.1 (or ::1), port 0, started by the tests; nothing else is
  contacted. Every I/O test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import socket
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import anyio
import h11
import pytest
import trio

from trio_crawl.core.http import FetchConfig
from trio_crawl.errors import FetchError
from trio_crawl.fetch import asks as _fetch_asks
from trio_crawl.fetch.asks import (
    AsksFetcherStatistics,
    error_kind,
    load_asks,
    open_asks_fetcher,
)
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page


def _asks_problem() -> str | None:
    try:
        load_asks()
    except ImportError as exc:
        return str(exc)
    return None


ASKS_PROBLEM = _asks_problem()
needs_asks = pytest.mark.skipif(
    ASKS_PROBLEM is not None, reason=f"asks cannot run here ({ASKS_PROBLEM}); nox -s asks"
)

TEXT = b"<p>" + b"closing time " * 3000 + b"</p>"
HEAD_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok"


# -- a raw server for answers serve_site will not give ------------------------------


class RawServer:
    """Runs ``script(stream)`` for each TCP connection; counts connections."""

    def __init__(self, script: Callable[[trio.SocketStream], Awaitable[None]]) -> None:
        self.script = script
        self.connections = 0
        self.port = 0
        self.closed = trio.Event()  # set when a script has closed its connection

    def url(self, target: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{target}"

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            await self.script(stream)
        finally:
            await stream.aclose()
            self.closed.set()


@asynccontextmanager
async def raw_server(
    script: Callable[[trio.SocketStream], Awaitable[None]],
) -> AsyncIterator[RawServer]:
    server = RawServer(script)
    async with trio.open_nursery() as nursery:
        serve = partial(trio.serve_tcp, server._handle, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


async def read_head(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(4096)
        if not chunk:
            break
        data += chunk
    return data


def answer(raw: bytes) -> Callable[[trio.SocketStream], Awaitable[None]]:
    """A script that reads one request head, sends ``raw`` and closes."""

    async def script(stream: trio.SocketStream) -> None:
        await read_head(stream)
        await stream.send_all(raw)

    return script


async def fetch_error(url: str, **config: object) -> FetchError:
    async with open_asks_fetcher(FetchConfig(**config)) as fetcher:  # type: ignore[arg-type]
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(url)
        assert fetcher.statistics().busy == 0
    return info.value


# -- pure: the error mapping and URL checks ----------------------------------------


def test_error_kind_maps_each_family_and_leaves_bugs_alone() -> None:
    def named(module: str, name: str, *bases: type[BaseException]) -> type[BaseException]:
        return type(name, bases or (Exception,), {"__module__": module})

    connectivity = named("asks.errors", "ConnectivityError")
    request_timeout = named("asks.errors", "RequestTimeout", connectivity)
    bad_response = named("asks.errors", "BadHttpResponse")
    assert error_kind(request_timeout()) == "timeout"
    assert error_kind(connectivity()) == "connect"
    assert error_kind(bad_response("Invalid HTTP response from server.")) == "protocol"
    for said in (
        "can't handle event type ConnectionClosed when role=SERVER and state=SEND_RESPONSE",
        "peer unexpectedly closed connection",
    ):
        hung_up = bad_response("Invalid HTTP response from server.")
        hung_up.__cause__ = h11.RemoteProtocolError(said)
        assert error_kind(hung_up) == "reset"

    assert error_kind(trio.TooSlowError()) is None  # errors.translated_errors knows it
    assert error_kind(TimeoutError()) == "timeout"
    assert error_kind(OSError("All connection attempts failed")) == "connect"
    assert error_kind(ConnectionRefusedError()) == "connect"
    assert error_kind(socket.gaierror(-2, "Name or service not known")) == "connect"
    assert error_kind(ConnectionResetError()) == "reset"
    assert error_kind(BrokenPipeError()) == "reset"
    assert error_kind(anyio.BrokenResourceError()) == "reset"
    assert error_kind(anyio.EndOfStream()) == "reset"
    assert error_kind(h11.RemoteProtocolError("incomplete chunked read")) == "protocol"
    assert error_kind(h11.LocalProtocolError("bad header")) == "protocol"
    assert error_kind(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")) == (
        "protocol"
    )
    assert error_kind(zlib.error("bad")) == "decode"
    assert error_kind(named("brotli", "error")()) == "decode"

    assert error_kind(ValueError("a bug")) is None
    assert error_kind(KeyError("a bug")) is None
    assert error_kind(anyio.ClosedResourceError()) is None  # using a closed socket is our bug
    assert error_kind(named("asks.errors", "TooManyRedirects")()) is None  # never follows


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1:8080/a?b", "127.0.0.1:8080"),
        ("https://user:pw@example.test/", "example.test"),
        ("http://[::1]:9000/", "[::1]:9000"),
    ],
)
def test_host_header(url: str, host: str) -> None:
    assert _fetch_asks._host_header(url) == host


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1/file", "file:///etc/hostname", "http:///x"])
def test_only_http_urls_with_a_host_are_fetched(url: str) -> None:
    with pytest.raises(FetchError, match=r"^connect: cannot fetch .*only http\(s\) URLs") as info:
        _fetch_asks._host_header(url)
    assert info.value.kind == "connect"


@pytest.mark.skipif(ASKS_PROBLEM is None, reason="asks runs here")
async def test_without_asks_opening_says_what_to_install() -> None:
    with pytest.raises(ImportError, match=r"needs .*trio < 0\.24") as info:
        async with open_asks_fetcher(FetchConfig()):
            pass  # pragma: no cover
    assert "nox session 'asks'" in str(info.value)


# -- fetching --------------------------------------------------------------------


@needs_asks
async def test_keep_alive_small_skipped_bodies_and_statistics() -> None:
    routes = {"/": page(), "/style.css": Response(body=b"p{}" * 100, content_type="text/css")}
    with serve_site(Site(routes)) as fresh, trio.fail_after(10):
        async with open_asks_fetcher(FetchConfig(user_agent="ua/7")) as fetcher:
            for _ in range(10):
                assert (await fetcher.fetch(fresh.url("/style.css"))).body_skipped
                assert (await fetcher.fetch(fresh.url("/"))).status == 200
            assert fetcher.statistics() == AsksFetcherStatistics(busy=0, idle=1, closed=False)
        assert fetcher.statistics() == AsksFetcherStatistics(busy=0, idle=0, closed=True)
    assert fresh.connections == 1
    sent = fresh.log[-1].headers
    assert (sent["user-agent"], sent["connection"]) == ("ua/7", "keep-alive")
    assert sent["host"] == f"127.0.0.1:{fresh.port}"


@needs_asks
async def test_big_unwanted_body_is_abandoned_with_its_connection() -> None:
    routes = {"/": page(), "/video": Response(body=bytes(500_000), content_type="video/mp4")}
    with serve_site(Site(routes)) as fresh, trio.fail_after(10):
        async with open_asks_fetcher(FetchConfig()) as fetcher:
            for _ in range(3):
                result = await fetcher.fetch(fresh.url("/video"))
                assert (result.status, result.body, result.body_skipped) == (200, b"", True)
                assert (await fetcher.fetch(fresh.url("/"))).status == 200
    assert [entry.connection_id for entry in fresh.log] == [1, 2, 2, 3, 3, 4]


@needs_asks
async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    """asks would send the next request on it and fail; we drop it first."""
    hang_up = trio.Event()

    async def script(stream: trio.SocketStream) -> None:
        await read_head(stream)
        await stream.send_all(HEAD_OK)  # nothing says close: the client keeps it
        await hang_up.wait()

    with trio.fail_after(10):
        async with raw_server(script) as server, open_asks_fetcher(FetchConfig()) as fetcher:
            assert (await fetcher.fetch(server.url())).body == b"ok"
            assert fetcher.statistics().idle == 1
            hang_up.set()
            await server.closed.wait()
            await trio.sleep(0.05)  # the FIN crosses the loopback
            assert (await fetcher.fetch(server.url())).body == b"ok"
    assert server.connections == 2


@needs_asks
async def test_idle_sockets_are_bounded_by_max_connections() -> None:
    with trio.fail_after(10):
        sites = [serve_site(Site({"/": page()})) for _ in range(4)]
        servers = [site.__enter__() for site in sites]
        try:
            async with open_asks_fetcher(FetchConfig(max_connections=2)) as fetcher:
                for server in servers:
                    await fetcher.fetch(server.url("/"))
                    assert fetcher.statistics().idle <= 2
                for server in (servers[3], servers[2], servers[0]):  # the two newest are kept
                    await fetcher.fetch(server.url("/"))
        finally:
            for site in sites:
                site.__exit__(None, None, None)
    assert [server.connections for server in servers] == [2, 1, 1, 1]


@needs_asks
async def test_repeated_headers_keep_the_last_value_but_cookies_all() -> None:
    headers = (
        ("X-Multi", "one"),
        ("X-Multi", "two"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
    )
    with serve_site(Site({"/": Response(body=b"<p>x</p>", headers=headers)})) as fresh:
        with trio.fail_after(10):
            async with open_asks_fetcher(FetchConfig()) as fetcher:
                result = await fetcher.fetch(fresh.url("/"))
    assert result.headers["x-multi"] == "two"  # a known limit of asks
    assert result.headers["set-cookie"] == "a=1, b=2"


@needs_asks
async def test_body_delimited_by_close_is_read_and_not_pooled() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n" + TEXT
    old = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + TEXT
    with trio.fail_after(10):
        for reply in (raw, old):
            async with (
                raw_server(answer(reply)) as server,
                open_asks_fetcher(FetchConfig()) as fetcher,
            ):
                assert (await fetcher.fetch(server.url())).body == TEXT
                assert fetcher.statistics().idle == 0


@needs_asks
async def test_an_answer_that_says_close_is_not_pooled_even_if_left_open() -> None:
    done = trio.Event()

    async def script(stream: trio.SocketStream) -> None:
        await read_head(stream)
        await stream.send_all(HEAD_OK.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        await done.wait()  # a server that says close but does not (yet)

    with trio.fail_after(10):
        async with raw_server(script) as server, open_asks_fetcher(FetchConfig()) as fetcher:
            assert (await fetcher.fetch(server.url())).body == b"ok"
            assert fetcher.statistics().idle == 0
            done.set()


@needs_asks
@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (b"", "reset"),  # closed without an answer
        (b"HTTP/1.1 200 OK\r\nContent-Le", "reset"),  # closed inside the head
        (b"NOT HTTP AT ALL\r\n\r\n", "protocol"),
        (b"HTTP/1.1 200 OK\r\nX-Bad: \xff\xfe\r\nContent-Length: 0\r\n\r\n", "protocol"),
    ],
    ids=["no-answer", "half-head", "garbage", "not-utf8-header"],
)
async def test_broken_answers(reply: bytes, kind: str) -> None:
    with trio.fail_after(10):
        async with raw_server(answer(reply)) as server:
            error = await fetch_error(server.url())
    assert error.kind == kind, error


@needs_asks
async def test_unsupported_urls_never_reach_asks() -> None:
    with trio.fail_after(5):
        error = await fetch_error("ftp://127.0.0.1:1/file")
    assert error.kind == "connect"


@needs_asks
async def test_ipv6_host_header() -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with serve_site(Site({"/": page()}), host="::1") as fresh, trio.fail_after(10):
        async with open_asks_fetcher(FetchConfig()) as fetcher:
            assert (await fetcher.fetch(fresh.url("/"))).status == 200
    assert fresh.log[-1].headers["host"] == f"[::1]:{fresh.port}"


@needs_asks
async def test_a_bug_is_loud_and_releases_its_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(headers: object) -> dict[str, str]:
        raise ZeroDivisionError("bug in header joining")

    with serve_site(Site({"/": page()})) as fresh, trio.fail_after(10):
        async with open_asks_fetcher(FetchConfig()) as fetcher:
            with monkeypatch.context() as patch:
                patch.setattr(_fetch_asks, "_joined_headers", broken)
                with pytest.raises(ZeroDivisionError, match=r"^bug in header joining$"):
                    await fetcher.fetch(fresh.url("/"))
            assert fetcher.statistics() == AsksFetcherStatistics(busy=0, idle=0, closed=False)
            assert (await fetcher.fetch(fresh.url("/"))).status == 200
    assert fresh.connections == 2


@needs_asks
async def test_close_during_a_fetch_and_fetch_after_close() -> None:
    routes = {"/": page(), "/slow": Response(body=b"<p>late</p>", delay=0.3)}
    with serve_site(Site(routes)) as fresh, trio.fail_after(10):
        async with open_asks_fetcher(FetchConfig()) as fetcher:
            await fetcher.fetch(fresh.url("/"))
            bodies: list[bytes] = []

            async def slow() -> None:
                bodies.append((await fetcher.fetch(fresh.url("/slow"))).body)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                await trio.sleep(0.1)
                assert fetcher.statistics().busy == 1
                await fetcher.aclose()
                await fetcher.aclose()  # idempotent
            assert bodies == [b"<p>late</p>"]  # the running fetch finished...
            assert fetcher.statistics() == AsksFetcherStatistics(busy=0, idle=0, closed=True)
            with pytest.raises(RuntimeError, match=r"^fetch\(\) on a closed AsksFetcher$"):
                await fetcher.fetch(fresh.url("/"))
    assert repr(fetcher) == "<AsksFetcher busy=0 idle=0 closed=True>"
