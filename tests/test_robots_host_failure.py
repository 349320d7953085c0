"""A host that cannot be talked to, found out by its robots.txt request (issue #36, item 1).

A TLS failure (a self-signed certificate, a bad ``--ca-bundle``, https sent
to an http port) was recorded as ``robots`` after a 10 s wait for a second
robots.txt request, with ``attempts: 0``, and the crawl exited 0. The rule
now: a robots.txt request that fails with one of ``HOST_FAILURE_KINDS`` gives
every page of its host that kind at once, never requested, each counting
the one robots.txt request as its attempt; and a crawl whose start URLs all
failed to connect (``connect``, ``tls``, ``timeout``) exits 4.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from test_cli import run_cli
from test_engine import crawl, url

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.core.models import HOST_FAILURE_KINDS

from fakes import FakeFetcher, FakePage


@pytest.mark.parametrize("kind", sorted(HOST_FAILURE_KINDS))
async def test_pages_take_the_robots_failure_kind_at_once(
    autojump_clock: object, kind: str
) -> None:
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage()}
    fetcher = FakeFetcher(pages, robots=[(kind, "")])
    _, records = await crawl(fetcher, ignore_robots=False, start=[url(0), url(1)])
    assert fetcher.calls == [] and len(fetcher.robots_calls) == 1
    assert [(r.url, r.error and r.error.kind, r.attempts) for r in records] == [
        (url(0), kind, 1),
        (url(1), kind, 1),
    ]
    message = "injected" if kind == "connect" else "robots.txt: injected"
    assert all(r.error is not None and r.error.message == message for r in records)
    # No wait for a second robots.txt request: only the injected timeout's 30 s.
    assert [r.t for r in records] == [30.0 if kind == "timeout" else 0.0] * 2


async def test_a_robots_answer_still_waits_for_one_refetch(autojump_clock: object) -> None:
    """A 5xx answer is a reachable server: its pages wait, then are judged again."""
    fetcher = FakeFetcher({url(0): FakePage()}, robots=[(503, "")])
    _, records = await crawl(fetcher, ignore_robots=False)
    [record] = records
    assert record.error is not None and record.error.kind == "robots"
    assert record.attempts == 0 and len(fetcher.robots_calls) == 2


@contextlib.contextmanager
def plain_http_port() -> Iterator[str]:
    """A port that answers any bytes, a TLS ClientHello too, with a plain
    HTTP 400 and closes, as nginx does: what https sent to an http port meets."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            with sock, contextlib.suppress(OSError):
                sock.recv(65536)
                sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)


@pytest.mark.parametrize("robots", [True, False], ids=["robots", "ignore-robots"])
@pytest.mark.parametrize("fetcher", ["curl", "httpx"])
def test_https_sent_to_an_http_port_is_tls_at_once_and_exit_4(fetcher: str, robots: bool) -> None:
    with plain_http_port() as host:
        args = [f"https://{host}/", "-o", "-", "--fetcher", fetcher, "--retries", "0"]
        result = run_cli(*args, *([] if robots else ["--ignore-robots"]), timeout=60)
    assert result.returncode == 4, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert errors[0].startswith(
        f"trio-crawl: error: could not connect to any start URL ({host}: tls: "
    ), errors[0]
    [record] = [json.loads(line) for line in result.stdout.splitlines()]
    assert record["error"]["kind"] == "tls", record
    assert record["error"]["message"].startswith("robots.txt: ") == robots, record
    assert record["attempts"] == 1 and record["t"] < 5, record


@pytest.mark.parametrize("backend", ["curl", "httpx"])
async def test_a_certificate_not_trusted_is_tls_at_once(backend: str, tmp_path: Path) -> None:
    """The issue's first case: a site whose certificate no CA we trust signed."""
    trustme = pytest.importorskip("trustme")
    from test_tls import serve_https, server_cert

    cert = server_cert(trustme.CA(), tmp_path, "127.0.0.1")
    records: list[CrawlRecord] = []
    with trio.fail_after(30):
        async with serve_https(cert) as base:
            start = trio.current_time()
            await run_crawl([base + "/"], on_record=records.append, backend=backend)
            took = trio.current_time() - start
    [record] = records
    assert record.error is not None and record.error.kind == "tls", record
    assert record.error.message.startswith("robots.txt: ") and record.attempts == 1, record
    assert took < 5, took
