"""``CurlFetcher`` specifics; the shared contract is ``test_fetchers.py``.

Rules of this suite:

- ``Collector`` and ``error_kind`` are pure: tested directly, no sockets.
- I/O tests run against ``serve_site`` on 127.0.0.1, port 0, started here,
  and are bounded by ``trio.fail_after``. Nothing else is contacted.
- Tests about driving libcurl run with both socket watchers (``epoll`` and
  ``tasks``), since either can be the one in use.
- After anything that cancels or fails, the pool must be full again
  (``statistics().handles_free == handles``) and the fetcher still usable.
"""

from __future__ import annotations

import gzip
import math
import random
import socket
import zlib
from collections.abc import Iterator

import pycurl
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.core.http import FetchConfig
from trio_crawl.core.models import FetchResult
from trio_crawl.errors import FetchError
from trio_crawl.fetch.curl import (
    Collector,
    CurlError,
    CurlFetcher,
    WatcherName,
    error_kind,
    find_ca_bundle,
    open_curl_fetcher,
)
from trio_crawl.fetch.curl.handle import Slot
from trio_crawl.fetch.curl.watch import EpollWatcher, TaskWatcher
from trio_crawl.fetch.errors import to_fetch_error
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Site, page

WATCHERS: list[WatcherName] = ["epoll", "tasks"]

PAGE = page("/a", "/b", title="small")
BIG_PAGE = Response(body=b"<!doctype html><p>" + b"x" * 15_000)


def make_site() -> Site:
    return Site(
        {
            "/": PAGE,
            "/big": BIG_PAGE,
            "/close": Response(body=b"<p>bye</p>", close=True),
            "/head": Response(body=b"<p>late</p>", delay=0.02),
            "/hold": Response(body=b"<p>held</p>", delay=0.3),
            "/drip": Response(body=bytes(8 * 1024), drip=0.004),
            "/slow": Response(body=b"<p>slow</p>", delay=5),
            "/reset": Response(body=bytes(100_000), reset_after=5_000),
            "/truncated": Response(body=bytes(100_000), truncate=True),
            "/css": Response(body=b"p{}" * 100, content_type="text/css"),
            "/video": Response(body=bytes(200_000), content_type="video/mp4", chunked=True),
            "/nocontent": Response(status=204, content_type="image/png"),
        }
    )


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with serve_site(make_site()) as running:
        yield running


@pytest.fixture(params=WATCHERS)
def watcher(request: pytest.FixtureRequest) -> WatcherName:
    name: WatcherName = request.param
    return name


def refused_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def assert_pool_full(fetcher: CurlFetcher) -> None:
    stats = fetcher.statistics()
    assert stats.handles_free == stats.handles
    assert stats.transfers == 0


# -- pure: error codes -------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (pycurl.E_OPERATION_TIMEDOUT, "Operation timed out", "timeout"),
        (pycurl.E_COULDNT_CONNECT, "Failed to connect", "connect"),
        (pycurl.E_COULDNT_RESOLVE_HOST, "Could not resolve host", "connect"),
        (pycurl.E_UNSUPPORTED_PROTOCOL, "Protocol not supported", "connect"),
        (pycurl.E_RECV_ERROR, "Connection reset by peer", "reset"),
        (pycurl.E_SEND_ERROR, "Broken pipe", "reset"),
        (pycurl.E_GOT_NOTHING, "Empty reply from server", "reset"),
        (pycurl.E_RECV_ERROR, "chunk hex-length char not a hex digit", "protocol"),
        (pycurl.E_PARTIAL_FILE, "transfer closed with 5 bytes remaining", "protocol"),
        (pycurl.E_FTP_WEIRD_SERVER_REPLY, "Invalid status line", "protocol"),
        (pycurl.E_HTTP2, "HTTP/2 framing", "protocol"),
        (pycurl.E_BAD_CONTENT_ENCODING, "Error while processing content", "decode"),
        (pycurl.E_FILESIZE_EXCEEDED, "Maximum file size exceeded", "too_large"),
        (pycurl.E_SSL_CONNECT_ERROR, "TLS handshake", "tls"),
        (pycurl.E_PEER_FAILED_VERIFICATION, "SSL certificate problem", "tls"),
        (pycurl.E_SSL_CACERT_BADFILE, "error setting certificate file", "tls"),
        (pycurl.E_OUT_OF_MEMORY, "unknown to the table", "protocol"),
    ],
)
def test_error_kind(code: int, message: str, kind: str) -> None:
    assert error_kind(CurlError(code, message)) == kind


def test_an_unsupported_protocol_after_the_request_is_the_servers() -> None:
    """libcurl gives an HTTP/0.9 answer the code of an unknown URL scheme."""
    message = "Received HTTP/0.9 when not allowed"
    assert error_kind(CurlError(pycurl.E_UNSUPPORTED_PROTOCOL, message)) == "connect"
    assert error_kind(CurlError(pycurl.E_UNSUPPORTED_PROTOCOL, message, sent=True)) == "protocol"
    assert error_kind(zlib.error("incomplete stream")) == "decode"


def test_only_curl_errors_are_translated() -> None:
    assert error_kind(pycurl.error(pycurl.E_COULDNT_CONNECT, "a misused handle")) is None
    assert error_kind(ValueError("a bug")) is None


# -- pure: one response from curl's callbacks ----------------------------------------


def feed_head(collector: Collector, *lines: bytes) -> bool:
    return all(collector.header_line(line) for line in lines)


def test_collector_joins_repeats_lowercases_and_unfolds() -> None:
    c = Collector(max_bytes=100, html_only=True)
    assert feed_head(
        c,
        b"HTTP/1.1 200 OK\r\n",
        b"Content-Type: text/html\r\n",
        b"Set-Cookie: a=1\r\n",
        b"set-cookie: b=2\r\n",
        b"X-Long: first\r\n",
        b"  second\r\n",
        b"X-Bytes: caf\xe9\r\n",
        b"\r\n",
    )
    assert c.status == 200
    assert c.headers == {
        "content-type": "text/html",
        "set-cookie": "a=1, b=2",
        "x-long": "first second",
        "x-bytes": "café",
    }
    assert c.body(b"<p>") and c.body(b"hi</p>")
    result = c.outcome("http://h/", 0, "", 0.5)
    assert result == FetchResult("http://h/", 200, c.headers, b"<p>hi</p>", 0.5, False, "HTTP/1.1")


def _reference_fields(lines: list[bytes]) -> tuple[dict[str, str], list[str]] | None:
    """The head's fields and Set-Cookie values read line by line, each line
    UTF-8 or else Latin-1: what ``Collector`` must give however it batches
    the work (None: the head is refused, two different Locations)."""
    headers: dict[str, str] = {}
    cookies: list[str] = []
    last: str | None = None
    for line in lines:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = line.decode("latin-1")
        text = text.rstrip("\r\n")
        if text[:1] in (" ", "\t"):
            if last is not None:
                headers[last] += " " + text.strip()
            continue
        name, sep, value = text.partition(":")
        if not sep:
            continue
        last, value = name.strip().lower(), value.strip()
        if last not in headers:
            headers[last] = value
        elif last != "location":
            headers[last] = f"{headers[last]}, {value}"
        elif headers[last] != value:
            return None
        if last == "set-cookie":
            cookies.append(value)
    return headers, cookies


#: Pieces of field lines: names, separators, a lone CR, Latin-1 and UTF-8
#: bytes, and characters ``str.splitlines`` would split at (FF, NEL).
_FIELD_PIECES = [
    *(b"A", b"a", b"Location", b"Set-Cookie", b":", b" ", b"\t", b"\r", b"x", b"/y"),
    *(b"\xe9", b"\xc3\xa9", b"\x0c", b"\xc2\x85", b"\x85"),
]


@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(_FIELD_PIECES), max_size=6),
            st.sampled_from([b"\r\n", b"\n"]),
        ),
        max_size=8,
    )
)
def test_collector_reads_a_head_as_line_by_line(fields: list[tuple[list[bytes], bytes]]) -> None:
    """Heads of random field lines (folds, repeats, lines without a colon,
    UTF-8 and Latin-1 bytes side by side, LF or CRLF) give what a line by
    line reading gives: the head's one-call decoding changes nothing."""
    lines = [b"".join(pieces) + end for pieces, end in fields]
    lines = [line for line in lines if line.strip()]  # a blank line ends the head
    c = Collector(max_bytes=100, html_only=False)
    done = feed_head(c, b"HTTP/1.1 200 OK\r\n", *lines, b"\r\n")
    expected = _reference_fields(lines)
    if expected is None:
        assert not done and c.abort == "failed"
    else:
        assert done and (c.headers, c.set_cookies) == expected


def test_collector_forgets_interim_heads_and_ignores_trailers() -> None:
    c = Collector(max_bytes=100, html_only=True)
    feed_head(c, b"HTTP/1.1 100 Continue\r\n", b"X-Interim: 1\r\n", b"\r\n")
    assert not c.head_done
    feed_head(c, b"HTTP/1.1 404 Not Found\r\n", b"Content-Length: 2\r\n", b"\r\n")
    assert c.head_done
    assert c.body(b"no")
    assert c.header_line(b"X-Trailer: late\r\n")
    assert c.status == 404
    assert c.headers == {"content-length": "2"}


def test_collector_reset_forgets_the_previous_response() -> None:
    c = Collector(max_bytes=100, html_only=True)
    feed_head(c, b"HTTP/1.1 200 OK\r\n", b"Content-Type: image/png\r\n", b"\r\n")
    assert not c.body(b"x" * 10)
    c.reset()
    assert (c.status, c.headers, c.chunks, c.skip, c.abort, c.head_done) == (
        0,
        {},
        [],
        False,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("length", "drained"), [(b"Content-Length: 300\r\n", True), (b"X-None: 1\r\n", False)]
)
def test_collector_skips_unwanted_bodies(length: bytes, drained: bool) -> None:
    c = Collector(max_bytes=100, html_only=True)
    assert feed_head(c, b"HTTP/1.1 200 OK\r\n", b"Content-Type: text/css\r\n", length, b"\r\n")
    assert c.skip
    assert c.body(b"p{}" * 100) is drained  # small and sized: read and dropped
    assert c.chunks == []
    # whatever became of the rest of the body, the answer is a skipped page
    result = c.outcome("http://h/x.css", pycurl.E_WRITE_ERROR, "Failure writing output", 0.1)
    assert isinstance(result, FetchResult)
    assert (result.status, result.body, result.body_skipped) == (200, b"", True)


def test_collector_does_not_skip_when_not_html_only() -> None:
    c = Collector(max_bytes=100, html_only=False)
    feed_head(c, b"HTTP/1.1 200 OK\r\n", b"Content-Type: image/png\r\n", b"\r\n")
    assert c.body(b"\x89PNG")
    result = c.outcome("http://h/i.png", 0, "", 0.1)
    assert isinstance(result, FetchResult)
    assert result.body == b"\x89PNG"
    assert not result.body_skipped


def test_collector_any_body_lasts_one_response() -> None:
    c = Collector(max_bytes=100, html_only=True)
    c.reset(any_body=True)
    feed_head(c, b"HTTP/1.1 200 OK\r\n", b"Content-Type: text/plain\r\n", b"\r\n")
    assert not c.skip
    assert c.body(b"User-agent: *")
    c.reset()
    feed_head(c, b"HTTP/1.1 200 OK\r\n", b"Content-Type: text/plain\r\n", b"\r\n")
    assert c.skip


def test_collector_caps_declared_and_counted_size() -> None:
    declared = Collector(max_bytes=100, html_only=True)
    assert not feed_head(declared, b"HTTP/1.1 200 OK\r\n", b"Content-Length: 101\r\n", b"\r\n")
    error = declared.outcome("http://h/", pycurl.E_WRITE_ERROR, "", 0.1)
    assert isinstance(error, FetchError)
    assert str(error) == "too_large: Content-Length 101 > max_bytes 100"

    counted = Collector(max_bytes=100, html_only=True)
    assert feed_head(counted, b"HTTP/1.1 200 OK\r\n", b"Content-Length: 100\r\n", b"\r\n")
    assert counted.body(b"x" * 60)
    assert not counted.body(b"x" * 41)  # decoded bytes past the cap, length notwithstanding
    error = counted.outcome("http://h/", pycurl.E_WRITE_ERROR, "", 0.1)
    assert isinstance(error, FetchError)
    assert str(error) == "too_large: more than 100 bytes once decoded"

    exact = Collector(max_bytes=100, html_only=True)
    feed_head(exact, b"HTTP/1.1 200 OK\r\n", b"\r\n")
    assert exact.body(b"x" * 100)

    # answers that never have a body do not count their Content-Length
    not_modified = Collector(max_bytes=100, html_only=True)
    assert feed_head(not_modified, b"HTTP/1.1 304 Not Modified\r\n", b"Content-Length: 101\r\n")
    assert feed_head(not_modified, b"\r\n")
    assert isinstance(not_modified.outcome("http://h/", 0, "", 0.1), FetchResult)


def test_collector_hands_curl_failures_back_for_translation() -> None:
    c = Collector(max_bytes=100, html_only=True)
    feed_head(c, b"HTTP/1.1 200 OK\r\n", b"\r\n")
    error = c.outcome("http://h/", pycurl.E_PARTIAL_FILE, "transfer closed", 0.1)
    assert isinstance(error, CurlError)
    assert (error.code, str(error)) == (pycurl.E_PARTIAL_FILE, "curl error 18: transfer closed")
    translated = to_fetch_error(error, error_kind, 30.0)
    assert translated is not None
    assert (translated.kind, translated.message) == ("protocol", "curl error 18: transfer closed")


@pytest.mark.parametrize(
    "line",
    [b"HTTP/1.1 2000 OK\r\n", b"HTTP/1.1 999999999999\r\n", b"HTTP/1.1 abc\r\n", b"HTTP/1.1\r\n"],
)
def test_collector_refuses_a_status_that_is_not_three_digits(line: bytes) -> None:
    c = Collector(max_bytes=100, html_only=True)
    assert not c.header_line(line)
    error = c.outcome("http://h/", pycurl.E_WRITE_ERROR, "", 0.1)
    assert isinstance(error, FetchError) and error.kind == "protocol", error


def test_collector_allows_one_request_per_transfer() -> None:
    c = Collector(max_bytes=100, html_only=True)
    assert c.request_sent()
    assert not c.request_sent()  # libcurl's silent resend on another connection
    error = c.outcome("http://h/", pycurl.E_ABORTED_BY_CALLBACK, "aborted", 0.1)
    assert isinstance(error, FetchError) and error.kind == "reset", error
    c.reset()
    assert c.request_sent()
    # a request after an answer (libcurl answering an auth challenge) is no resend
    assert c.header_line(b"HTTP/1.1 401 Unauthorized\r\n")
    assert c.request_sent()
    assert not c.request_sent()


def test_collector_decodes_and_refuses_a_truncated_stream() -> None:
    body = b"<p>" + b"hello " * 100
    wire = gzip.compress(body)
    head = (b"HTTP/1.1 200 OK\r\n", b"Content-Type: text/html\r\n", b"Content-Encoding: gzip\r\n")
    whole = Collector(max_bytes=1000, html_only=True)
    assert feed_head(whole, *head, b"\r\n") and whole.body(wire[:10]) and whole.body(wire[10:])
    result = whole.outcome("http://h/", 0, "", 0.1)
    assert isinstance(result, FetchResult) and result.body == body
    cut = Collector(max_bytes=1000, html_only=True)
    assert feed_head(cut, *head, b"\r\n") and cut.body(wire[: len(wire) // 2])
    truncated = cut.outcome("http://h/", 0, "", 0.1)
    assert isinstance(truncated, zlib.error), truncated
    assert error_kind(truncated) == "decode"
    bomb = Collector(max_bytes=1000, html_only=True)
    assert feed_head(bomb, *head, b"\r\n")
    assert not bomb.body(gzip.compress(bytes(100_000)))
    error = bomb.outcome("http://h/", pycurl.E_WRITE_ERROR, "", 0.1)
    assert isinstance(error, FetchError) and error.kind == "too_large"


def test_find_ca_bundle_prefers_python_then_system() -> None:
    # the configuration and the environment come first: tests/test_tls.py
    present = {"/py.pem", "/etc/ssl/cert.pem"}
    exists = present.__contains__
    assert find_ca_bundle("/py.pem", exists) == "/py.pem"
    assert find_ca_bundle("/gone.pem", exists) == "/etc/ssl/cert.pem"
    assert find_ca_bundle(None, exists) == "/etc/ssl/cert.pem"
    assert find_ca_bundle(None, lambda path: False) is None


# -- watching sockets ------------------------------------------------------------------


async def test_task_watcher_rewatch_before_its_tasks_ran() -> None:
    """curl often drops a socket and asks for it again within one scheduling
    batch (a kept-alive connection between two transfers). The first watch's
    task may then run after its replacement already waits on the fd: it must
    not try to wait too (trio would raise BusyResourceError). trio shuffles
    each batch, so repeating the sequence exercises both orders."""
    left, right = socket.socketpair()
    ready: list[int] = []

    def action(fd: int, bits: int) -> None:  # like curl: act once, then stop watching
        ready.append(bits)
        tasks.unwatch(fd)

    with left, right, trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            tasks = TaskWatcher(nursery, action)
            fd = left.fileno()
            for _ in range(30):
                tasks.watch(fd, pycurl.CSELECT_IN)
                tasks.unwatch(fd)
                tasks.watch(fd, pycurl.CSELECT_IN)
                await trio.testing.wait_all_tasks_blocked()
                assert len(tasks) == 1
                tasks.watch(fd, pycurl.CSELECT_OUT)  # a change of mind replaces the watch
                await trio.testing.wait_all_tasks_blocked()
                assert len(tasks) == 0
            assert ready == [pycurl.CSELECT_OUT] * 30  # a fresh socket is writable at once
            tasks.watch(fd, pycurl.CSELECT_IN)
            right.send(b"x")
            await trio.testing.wait_all_tasks_blocked()
            assert ready[30:] == [pycurl.CSELECT_IN]
            assert len(tasks) == 0


# -- driving libcurl ---------------------------------------------------------------------


async def test_keep_alive_reuses_one_connection(watcher: WatcherName) -> None:
    with serve_site(make_site()) as fresh, trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(), watcher=watcher) as fetcher:
            for _ in range(30):
                assert (await fetcher.fetch(fresh.url("/"))).body == PAGE.body
                # a small skipped body is drained, a bodiless one needs nothing
                assert (await fetcher.fetch(fresh.url("/css"))).body_skipped
                assert (await fetcher.fetch(fresh.url("/nocontent"))).status == 204
            assert_pool_full(fetcher)
    assert {entry.connection_id for entry in fresh.log} == {1}
    assert len(fresh.log) == 90


async def test_request_headers_are_sent_then_forgotten(server: SiteServer) -> None:
    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(user_agent="ua/2")) as fetcher:
            await fetcher.fetch(server.url("/"), {"X-Extra": "1", "X-Empty": ""})
            sent = server.log[-1].headers
            await fetcher.fetch(server.url("/"))
            plain = server.log[-1].headers
            with pytest.raises(FetchError, match=r"^protocol: invalid value of request header"):
                await fetcher.fetch(server.url("/"), {"X-Bad": "1\r\nX-Smuggled: 2"})
            assert_pool_full(fetcher)
    assert (sent["x-extra"], sent["x-empty"], sent["user-agent"]) == ("1", "", "ua/2")
    assert {"gzip", "deflate", "br"} <= {c.strip() for c in sent["accept-encoding"].split(",")}
    assert "x-extra" not in plain
    assert plain["user-agent"] == "ua/2"


async def test_any_body_reads_one_unwanted_body(watcher: WatcherName, server: SiteServer) -> None:
    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(), watcher=watcher) as fetcher:
            wanted = await fetcher.fetch(server.url("/video"), any_body=True)
            unwanted = await fetcher.fetch(server.url("/video"))
            assert_pool_full(fetcher)
    assert (wanted.body, wanted.body_skipped) == (bytes(200_000), False)
    assert (unwanted.body, unwanted.body_skipped) == (b"", True)


async def test_big_unwanted_body_is_abandoned_with_its_connection() -> None:
    with serve_site(make_site()) as fresh, trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig()) as fetcher:
            for _ in range(3):
                result = await fetcher.fetch(fresh.url("/video"))
                assert (result.status, result.body, result.body_skipped) == (200, b"", True)
                assert result.content_type == "video/mp4"
                assert (await fetcher.fetch(fresh.url("/"))).status == 200
            assert_pool_full(fetcher)
    ids = [entry.connection_id for entry in fresh.log]
    assert ids == [1, 2, 2, 3, 3, 4]  # each abandoned body closed its connection


async def test_many_concurrent_fetches_share_the_pool(
    watcher: WatcherName, server: SiteServer
) -> None:
    done: list[int] = []
    with trio.fail_after(20):
        config = FetchConfig(max_connections=8)
        async with open_curl_fetcher(config, watcher=watcher) as fetcher:

            async def one(i: int) -> None:
                result = await fetcher.fetch(server.url("/big" if i % 2 else "/head"))
                assert result.status == 200
                done.append(i)

            before = server.connections
            async with trio.open_nursery() as nursery:
                for i in range(200):
                    nursery.start_soon(one, i)
            assert_pool_full(fetcher)
            assert fetcher.statistics().sockets_watched <= 8
    assert sorted(done) == list(range(200))
    assert server.connections - before <= 8


async def test_fd_reuse_with_connection_close(watcher: WatcherName) -> None:
    """Every answer closes its connection, so curl closes and reopens sockets
    all the time and fd numbers are reused between socket callbacks."""
    with serve_site(make_site()) as fresh, trio.fail_after(20):
        async with open_curl_fetcher(FetchConfig(max_connections=16), watcher=watcher) as fetcher:

            async def worker() -> None:
                for _ in range(25):
                    result = await fetcher.fetch(fresh.url("/close"))
                    assert result.body == b"<p>bye</p>"

            async with trio.open_nursery() as nursery:
                for _ in range(16):
                    nursery.start_soon(worker)
            assert_pool_full(fetcher)
            assert fetcher.statistics().sockets_watched == 0
    assert fresh.connections == 400
    assert len(fresh.log) == 400


async def test_multi_stays_usable_after_every_kind_of_failure(
    watcher: WatcherName, server: SiteServer
) -> None:
    config = FetchConfig(timeout=0.3, max_connections=2, html_only=False)
    failures = [
        (server.url("/slow"), "timeout"),
        (server.url("/reset"), "reset"),
        (server.url("/truncated"), "protocol"),
        (refused_url(), "connect"),
        ("ftp://127.0.0.1:1/file", "connect"),  # other protocols are never fetched
        ("file:///etc/hostname", "connect"),
    ]
    with trio.fail_after(20):
        async with open_curl_fetcher(config, watcher=watcher) as fetcher:
            for url, kind in failures:
                with pytest.raises(FetchError) as info:
                    await fetcher.fetch(url)
                assert info.value.kind == kind, info.value
                assert (await fetcher.fetch(server.url("/"))).body == PAGE.body
            assert_pool_full(fetcher)


async def test_cancellation_stress_then_full_pool(
    watcher: WatcherName, server: SiteServer
) -> None:
    """Hundreds of fetches cancelled at random moments: waiting for a handle,
    connecting, waiting for the head, mid-drip, just after finishing. Then the
    pool is whole, and 32 concurrent fetches all succeed promptly.

    Whether a fetch with a few milliseconds of patience finishes depends on
    how busy the machine is, so the counts asserted are the ones that cannot
    depend on it: a fetch with no patience at all is always cancelled (its
    deadline has passed before its first checkpoint), and one with no deadline,
    among them, always finishes (a fast target, never ``/slow``).
    """
    rng = random.Random(1234)
    targets = ["/", "/head", "/drip", "/close", "/big", "/slow"]
    counts = {"cancelled": 0, "done": 0}
    must = {"cancelled": 0, "done": 0}
    config = FetchConfig(max_connections=8, timeout=10)
    with trio.fail_after(30):
        async with open_curl_fetcher(config, watcher=watcher) as fetcher:

            async def attempt(target: str, patience: float) -> None:
                with trio.move_on_after(patience) as scope:
                    await fetcher.fetch(server.url(target))
                counts["cancelled" if scope.cancelled_caught else "done"] += 1

            for _ in range(6):
                async with trio.open_nursery() as nursery:
                    for _ in range(60):
                        patience = rng.choice(
                            [0.0, rng.uniform(0, 0.002), rng.uniform(0, 0.05), math.inf]
                        )
                        target = rng.choice(targets[:-1] if patience == math.inf else targets)
                        if patience in (0.0, math.inf):
                            must["cancelled" if patience == 0.0 else "done"] += 1
                        nursery.start_soon(attempt, target, patience)
                assert_pool_full(fetcher)

            with trio.fail_after(5):
                async with trio.open_nursery() as nursery:
                    for i in range(32):
                        nursery.start_soon(fetcher.fetch, server.url("/big" if i % 2 else "/"))
            assert_pool_full(fetcher)
    assert must["cancelled"] >= 60 and must["done"] >= 60, must  # the mix is varied
    assert counts["cancelled"] >= must["cancelled"], (counts, must)
    assert counts["done"] >= must["done"], (counts, must)


async def test_cancel_after_completion_before_resuming(
    server: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver finishes the transfer and wakes the fetch, then the fetch's
    scope is cancelled before it runs again: the finished result is not lost
    (the wake-up is not a checkpoint), the handle is back, and the cancel
    lands at the caller's next checkpoint."""
    results: list[FetchResult] = []
    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(max_connections=1)) as fetcher:
            scope = trio.CancelScope()
            finish = fetcher._finish

            def finish_then_cancel(curl: object, code: int, message: str, now: float) -> None:
                finish(curl, code, message, now)
                scope.cancel()

            monkeypatch.setattr(fetcher, "_finish", finish_then_cancel)
            with scope:
                results.append(await fetcher.fetch(server.url("/")))
                assert_pool_full(fetcher)
                await trio.lowlevel.checkpoint()
            assert scope.cancelled_caught
            monkeypatch.undo()
            assert (await fetcher.fetch(server.url("/"))).status == 200
    assert [r.body for r in results] == [PAGE.body]


async def test_cancel_while_waiting_for_a_handle(server: SiteServer) -> None:
    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(max_connections=1)) as fetcher:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fetcher.fetch, server.url("/hold"))
                await trio.testing.wait_all_tasks_blocked()
                with trio.move_on_after(0.05) as scope:
                    await fetcher.fetch(server.url("/"))
                assert scope.cancelled_caught
                assert fetcher.statistics().handles_free == 0  # still held by /hold
            assert_pool_full(fetcher)
            assert (await fetcher.fetch(server.url("/"))).status == 200


async def test_waiting_for_a_handle_counts_against_the_timeout(
    server: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch that waits for a handle starts its transfer with what is left
    of the timeout it had when it was called, not a fresh one: its deadline
    is fixed before the wait. Checked on the deadline the transfer starts
    with, against the moments the test saw, so no timing is involved (a test
    that read libcurl's "timed out after N ms" failed on a busy machine)."""
    deadlines: list[float] = []  # of each transfer started, in order
    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(max_connections=1, timeout=5)) as fetcher:
            start = fetcher._start

            def recording_start(
                slot: Slot,
                url: str,
                headers: dict[str, str] | None,
                any_body: bool,
                deadline: float,
            ) -> None:
                deadlines.append(deadline)
                start(slot, url, headers, any_body, deadline)

            monkeypatch.setattr(fetcher, "_start", recording_start)
            results: list[FetchResult] = []

            async def waiter() -> None:
                results.append(await fetcher.fetch(server.url("/")))

            async with trio.open_nursery() as nursery:
                holder = trio.CancelScope()

                async def hold() -> None:
                    with holder:
                        await fetcher.fetch(server.url("/slow"))

                nursery.start_soon(hold)
                await trio.testing.wait_all_tasks_blocked()  # the handle is taken
                called = trio.current_time()
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()  # it waits for the handle
                assert len(deadlines) == 1
                freed = trio.current_time()
                holder.cancel()
            assert_pool_full(fetcher)
    assert [r.status for r in results] == [200]
    assert len(deadlines) == 2
    assert called < deadlines[1] - 5 < freed


async def test_no_free_handle_within_the_timeout_is_a_timeout(
    server: SiteServer, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_curl_fetcher(FetchConfig(max_connections=1, timeout=0.2)) as fetcher:
        await fetcher._pool.acquire()  # every handle busy, for ever
        with pytest.raises(FetchError, match=r"^timeout: no free handle within 0.2 s$"):
            await fetcher.fetch(server.url("/"))
        assert trio.current_time() == pytest.approx(0.2)
        fetcher._pool.release()
        assert_pool_full(fetcher)


async def test_fetch_after_close_and_close_during_fetch(
    watcher: WatcherName, server: SiteServer
) -> None:
    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(), watcher=watcher) as fetcher:
            errors: list[str] = []

            async def slow() -> None:
                with pytest.raises(RuntimeError) as info:
                    await fetcher.fetch(server.url("/slow"))
                errors.append(str(info.value))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                await trio.testing.wait_all_tasks_blocked()
                assert fetcher.statistics().transfers == 1
                await fetcher.aclose()
                await fetcher.aclose()  # idempotent
            assert errors == ["the CurlFetcher was closed while this fetch was running"]
            assert fetcher.statistics().closed
            with pytest.raises(RuntimeError, match=r"^fetch\(\) on a closed CurlFetcher$"):
                await fetcher.fetch(server.url("/"))
    with pytest.raises(RuntimeError, match=r"^fetch\(\) on a closed CurlFetcher$"):
        await fetcher.fetch(server.url("/"))


async def test_curls_timer_only_moves_the_drivers_deadline_earlier(
    watcher: WatcherName, autojump_clock: trio.testing.MockClock
) -> None:
    """A later timer (or none) leaves the parked driver's deadline where it
    was: moving it costs trio a re-registration, and libcurl moves its timer
    on every transfer. Woken early, the driver waits again; curl's timer is
    served when it is due, not before."""
    async with open_curl_fetcher(FetchConfig(), watcher=watcher) as fetcher:
        served: list[float] = []
        action = fetcher._socket_action

        def recording_action(fd: int, bits: int) -> None:
            if fd == pycurl.SOCKET_TIMEOUT:
                served.append(trio.current_time())
            action(fd, bits)

        fetcher._socket_action = recording_action  # type: ignore[method-assign]
        await trio.testing.wait_all_tasks_blocked()
        scope = fetcher._timer_scope
        assert scope is not None and scope.deadline == math.inf
        t0 = trio.current_time()
        fetcher._on_timer(2000)
        assert scope.deadline == t0 + 2
        fetcher._on_timer(5000)  # later: the deadline stays
        fetcher._on_timer(-1)  # none: the deadline stays
        assert scope.deadline == t0 + 2
        fetcher._on_timer(3000)
        await trio.sleep(10)
        assert served == [t0 + 3]  # woken at 2, the timer was not due
        assert fetcher._timer_scope is not None
        assert fetcher._timer_scope.deadline == math.inf


async def test_fetcher_needs_its_driver() -> None:
    fetcher = CurlFetcher(FetchConfig(max_connections=1))
    with pytest.raises(RuntimeError, match=r"^CurlFetcher is not running: create it with"):
        await fetcher.fetch("http://127.0.0.1:1/")
    await fetcher.aclose()


async def test_a_bug_in_a_callback_is_loud(
    server: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Collector, data: bytes) -> bool:
        raise ZeroDivisionError("bug in the body callback")

    with trio.fail_after(10):
        async with open_curl_fetcher(FetchConfig(max_connections=1)) as fetcher:
            with monkeypatch.context() as patch:
                patch.setattr(Collector, "body", broken)
                with pytest.raises(ZeroDivisionError, match=r"^bug in the body callback$"):
                    await fetcher.fetch(server.url("/"))
            assert_pool_full(fetcher)
            assert (await fetcher.fetch(server.url("/"))).status == 200


async def test_exceptions_leave_the_block_bare(server: SiteServer) -> None:
    with trio.fail_after(10):
        with pytest.raises(FetchError) as info:
            async with open_curl_fetcher(FetchConfig(timeout=0.2)) as fetcher:
                await fetcher.fetch(server.url("/slow"))
        assert info.value.kind == "timeout"
        with pytest.raises(KeyError, match=r"^'mine'$"):
            async with open_curl_fetcher(FetchConfig(), watcher="tasks"):
                raise KeyError("mine")


async def test_a_bug_in_the_driver_ends_the_block_loudly(
    server: SiteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: object, action: object) -> None:
        raise ZeroDivisionError("bug in the driver")

    monkeypatch.setattr(EpollWatcher, "dispatch", broken)
    with trio.fail_after(10), pytest.raises(ZeroDivisionError, match=r"^bug in the driver$"):
        async with open_curl_fetcher(FetchConfig(), watcher="epoll") as fetcher:
            await fetcher.fetch(server.url("/head"))  # its answer wakes the driver
    assert fetcher.statistics().closed
