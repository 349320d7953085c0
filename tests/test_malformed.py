"""What the malformed-server campaign found (issue #36, item 10), one answer each.

Each failure is reproduced by one malformed answer, written byte by byte on a
raw socket (``hostile_server``), for every fetcher; whole crawls (curl and
httpx) check what the record says. The rules:

1. A header value never stops a crawl: ``Retry-After`` of 4,301 digits is a
   very long wait, capped like any other (it was "internal error:
   ValueError: Exceeds the limit (4300 digits)", exit 70).
2. ``Location`` is one URI: the same value twice is that value; two
   different values are ``protocol`` (as Chromium, Firefox and curl do). The
   joined string (``/y,%20/y``) was fetched and recorded.
3. A connection closed mid-head (``HTTP/1.1 200 OK``, then nothing) is
   ``reset``: curl recorded a complete 200 of size 0.
4. A status line must begin with ``HTTP/`` (RFC 9112's HTTP-name is
   case-sensitive): ``http/1.1 200 OK`` is ``protocol``; curl recorded
   status 0 and followed its links.
5. Every gzip member of a body is read; bytes after the last one that are
   no member are ``decode``: the links of the second member were lost.
6. A connection with bytes left over after an answer is not used again:
   httpx took them for the answer to the next request on it.

Every test is bounded by ``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import gzip
import socket
import threading
import zlib

import pytest
import trio

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.core.http import FetchConfig
from trio_crawl.core.models import FetchResult
from trio_crawl.core.retry import parse_retry_after
from trio_crawl.errors import FetchError
from trio_crawl.fetch.answer_end import AnswerEnd

from fetcher_factories import FETCHER_FACTORIES, FetcherFactory
from hostile_server import Answer, HostileServer, serve_hostile

HTML = b"Content-Type: text/html\r\n"
DIGITS = b"1" * 4301


def fixed(raw: bytes, keep_alive: bool = True) -> Answer:
    def answer(sock: socket.socket, stop: threading.Event) -> bool:
        sock.sendall(raw)
        return keep_alive

    return answer


def html(body: bytes, *extra: bytes, status: bytes = b"200 OK") -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\n" + HTML + b"".join(e + b"\r\n" for e in extra)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def links(*targets: str) -> bytes:
    return b"".join(b'<a href="%s">x</a>' % t.encode() for t in targets)


def gzipped(body: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\n" + HTML + b"Content-Encoding: gzip\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


TWO_MEMBERS = gzip.compress(links("/a")) + gzip.compress(links("/b"))
STRAY = html(b"stray", status=b"404 Not Found")

ROUTES: dict[str, Answer] = {
    "/ok": fixed(html(b"fine")),
    "/a": fixed(html(b"a")),
    "/b": fixed(html(b"b")),
    "/y": fixed(html(b"y")),
    "/z": fixed(html(b"z")),
    "/same-location": fixed(
        b"HTTP/1.1 302 Found\r\nLocation: /y\r\nLocation: /y\r\nContent-Length: 0\r\n\r\n"
    ),
    "/two-locations": fixed(
        b"HTTP/1.1 302 Found\r\nLocation: /y\r\nLocation: /z\r\nContent-Length: 0\r\n\r\n"
    ),
    "/cut-head": fixed(b"HTTP/1.1 200 OK\r\n", keep_alive=False),
    "/lower-case": fixed(html(links("/y")).replace(b"HTTP/1.1", b"http/1.1", 1)),
    "/lower-case-close": fixed(
        b"http/1.1 200 OK\r\n" + HTML + b"Connection: close\r\n\r\n" + links("/y"), False
    ),
    "/two-members": fixed(gzipped(TWO_MEMBERS)),
    "/member-and-garbage": fixed(gzipped(gzip.compress(links("/a")) + b"garbage")),
    "/member-and-zeros": fixed(gzipped(gzip.compress(links("/a")) + b"\0" * 8)),
    "/member-and-a-half": fixed(gzipped(TWO_MEMBERS[:-10])),
    "/deflate-and-garbage": fixed(
        html(zlib.compress(links("/a")) + b"xx", b"Content-Encoding: deflate")
    ),
    "/stray": fixed(html(b"ok") + STRAY),
    "/stray-chunked": fixed(
        b"HTTP/1.1 200 OK\r\n" + HTML + b"Transfer-Encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n" + STRAY
    ),
    "/stray-same": fixed(html(b"ok") + html(b"ok")),
    "/retry-after-503": fixed(
        b"HTTP/1.1 503 Busy\r\nRetry-After: " + DIGITS + b"\r\nContent-Length: 0\r\n\r\n"
    ),
    "/retry-after-429": fixed(
        b"HTTP/1.1 429 Slow\r\nRetry-After: " + DIGITS + b"\r\nContent-Length: 0\r\n\r\n"
    ),
}


@pytest.fixture(scope="module")
def server() -> HostileServer:  # type: ignore[misc]
    with serve_hostile(ROUTES) as running:
        yield running


@pytest.fixture(params=FETCHER_FACTORIES, ids=[name for name, _ in FETCHER_FACTORIES])
def factory(request: pytest.FixtureRequest) -> FetcherFactory:
    made: FetcherFactory = request.param[1]
    return made


async def fetch_once(factory: FetcherFactory, url: str, then: str) -> FetchResult | FetchError:
    """One fetch of ``url``; the same fetcher then fetches ``then`` fine."""
    with trio.fail_after(10):
        async with factory(FetchConfig(timeout=3)) as fetcher:
            try:
                got: FetchResult | FetchError = await fetcher.fetch(url)
            except FetchError as exc:
                got = exc
            after = await fetcher.fetch(then)
            assert (after.status, after.body) == (200, b"fine"), after
    return got


def kind(got: FetchResult | FetchError) -> str:
    return got.kind if isinstance(got, FetchError) else f"status {got.status}"


# -- 1: Retry-After ----------------------------------------------------------------------


def test_retry_after_of_any_length_is_a_capped_wait() -> None:
    assert parse_retry_after("1" * 4301, 0.0) == 1e9
    assert parse_retry_after("1" * 100_000, 0.0) == 1e9
    assert parse_retry_after("0" * 5000 + "7", 0.0) == 7.0
    assert parse_retry_after("000", 0.0) == 0.0
    assert parse_retry_after("999999999", 0.0) == 999999999.0
    assert parse_retry_after("Mon, 01 Jan " + "9" * 5000 + " 00:00:00 GMT", 0.0) is None


# -- 2: two Location headers -------------------------------------------------------------


async def test_the_same_location_twice_is_one(
    factory: FetcherFactory, server: HostileServer
) -> None:
    got = await fetch_once(factory, server.url("/same-location"), server.url("/ok"))
    assert isinstance(got, FetchResult), got
    assert (got.status, got.headers["location"]) == (302, "/y")


async def test_two_different_locations_are_a_protocol_error(
    factory: FetcherFactory, server: HostileServer
) -> None:
    got = await fetch_once(factory, server.url("/two-locations"), server.url("/ok"))
    assert kind(got) == "protocol", got


# -- 3 and 4: the head ---------------------------------------------------------------------


async def test_a_head_cut_after_its_status_line_is_a_reset(
    factory: FetcherFactory, server: HostileServer
) -> None:
    got = await fetch_once(factory, server.url("/cut-head"), server.url("/ok"))
    assert kind(got) == "reset", got


@pytest.mark.parametrize("target", ["/lower-case", "/lower-case-close"])
async def test_a_lower_case_status_line_is_a_protocol_error(
    factory: FetcherFactory, server: HostileServer, target: str
) -> None:
    got = await fetch_once(factory, server.url(target), server.url("/ok"))
    assert kind(got) == "protocol", got


# -- 5: gzip members -----------------------------------------------------------------------


async def test_every_gzip_member_is_read(factory: FetcherFactory, server: HostileServer) -> None:
    got = await fetch_once(factory, server.url("/two-members"), server.url("/ok"))
    assert isinstance(got, FetchResult), got
    assert got.body == links("/a") + links("/b")


@pytest.mark.parametrize(
    "target",
    ["/member-and-garbage", "/member-and-zeros", "/member-and-a-half", "/deflate-and-garbage"],
)
async def test_what_follows_the_last_member_is_no_silent_cut(
    factory: FetcherFactory, server: HostileServer, target: str
) -> None:
    got = await fetch_once(factory, server.url(target), server.url("/ok"))
    assert kind(got) == "decode", got


# -- 6: stray bytes on a kept-alive connection ---------------------------------------------


@pytest.mark.parametrize("target", ["/stray", "/stray-chunked", "/stray-same"])
async def test_bytes_after_an_answer_are_no_answer_to_the_next_request(
    factory: FetcherFactory, target: str
) -> None:
    with serve_hostile(ROUTES) as server, trio.fail_after(10):
        async with factory(FetchConfig(timeout=3)) as fetcher:
            first = await fetcher.fetch(server.url(target))
            assert (first.status, first.body) == (200, b"ok")
            after = await fetcher.fetch(server.url("/z"))
            assert (after.status, after.body) == (200, b"z")
            ok = await fetcher.fetch(server.url("/ok"))  # keep-alive still works
            assert (ok.status, ok.body) == (200, b"fine")
        assert server.targets == [target, "/z", "/ok"]


def test_the_end_of_an_answer_is_found_in_any_split() -> None:
    """``AnswerEnd`` against every way a read may cut the bytes."""
    sized = html(b"hello")
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;x=1\r\nhello\r\n10\r\n" + b"a" * 16 + b"\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n" + sized
    bodiless = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n"
    bare_lf = b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"
    empty = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    until_close = b"HTTP/1.1 200 OK\r\n\r\nwhatever"
    for raw, ends in [
        (sized, True),
        (chunked, True),
        (interim, True),
        (bodiless, True),
        (bare_lf, True),
        (empty, True),
        (until_close, False),
    ]:
        for extra in (b"", STRAY):
            data = raw + extra
            for step in range(1, len(data) + 1):
                answer = AnswerEnd()
                for at in range(0, len(data), step):
                    answer.feed(data[at : at + step])
                spare = ends and bool(extra)
                assert (answer.done, answer.spare) == (ends, spare), (raw, extra, step)
    head = AnswerEnd(head_request=True)
    head.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    assert (head.done, head.spare) == (True, False)


# -- whole crawls --------------------------------------------------------------------------

BACKENDS = pytest.mark.parametrize("backend", ["curl", "httpx"])


async def crawl(server: HostileServer, start: str, **options: object) -> dict[str, CrawlRecord]:
    records: list[CrawlRecord] = []
    with trio.fail_after(30):
        await run_crawl(
            [server.url(start)], on_record=records.append, ignore_robots=True, **options
        )
    by_path = {r.url.removeprefix(server.base_url): r for r in records}
    assert len(by_path) == len(records), records  # no duplicate
    return by_path


def error_kind(record: CrawlRecord) -> str | None:
    return None if record.error is None else record.error.kind


@BACKENDS
async def test_a_crawl_outlives_a_retry_after_of_4301_digits(backend: str) -> None:
    site = dict(ROUTES)
    site["/"] = fixed(html(links("/retry-after-503", "/retry-after-429", *"abcdefgh")))
    for name in "abcdefgh":
        site[f"/{name}"] = fixed(html(name.encode()))
    with serve_hostile(site) as server:
        records = await crawl(server, "/", backend=backend, retries=1, max_retry_after=0.1)
    assert error_kind(records["/retry-after-503"]) == "http_5xx"
    assert error_kind(records["/retry-after-429"]) == "http_429"
    assert records["/retry-after-503"].attempts == 2
    assert all(records[f"/{name}"].error is None for name in "abcdefgh")
    assert len(records) == 11


@BACKENDS
async def test_a_crawl_follows_one_location_and_refuses_two(backend: str) -> None:
    site = dict(ROUTES)
    site["/"] = fixed(html(links("/same-location", "/two-locations")))
    with serve_hostile(site) as server:
        records = await crawl(server, "/", backend=backend, retries=0)
    assert records["/same-location"].redirect == server.url("/y")
    assert error_kind(records["/two-locations"]) == "protocol"
    assert set(records) == {"/", "/same-location", "/two-locations", "/y"}


@BACKENDS
async def test_a_crawl_records_the_malformed_heads(backend: str) -> None:
    site = dict(ROUTES)
    site["/"] = fixed(html(links("/cut-head", "/lower-case")))
    with serve_hostile(site) as server:
        records = await crawl(server, "/", backend=backend, retries=0)
        targets = list(server.targets)
    assert error_kind(records["/cut-head"]) == "reset"
    assert error_kind(records["/lower-case"]) == "protocol"
    assert set(records) == {"/", "/cut-head", "/lower-case"}  # its links are not followed
    assert "/y" not in targets


@BACKENDS
async def test_a_crawl_reads_the_links_of_every_gzip_member(backend: str) -> None:
    with serve_hostile(ROUTES) as server:
        records = await crawl(server, "/two-members", backend=backend)
    assert set(records) == {"/two-members", "/a", "/b"}
    assert records["/two-members"].links == 2


@BACKENDS
async def test_a_crawl_records_each_url_with_its_own_answer(backend: str) -> None:
    site = dict(ROUTES)
    site["/"] = fixed(html(links("/stray", "/z")))
    with serve_hostile(site) as server:
        records = await crawl(server, "/", backend=backend, retries=0, workers=1)
    assert (records["/z"].status, records["/z"].size) == (200, 1)
    assert records["/stray"].status == 200
