"""A real replay tool plays the revisits of a recrawl (issue #33 item 5).

Crawl 1 is a real crawl (``trio-crawl --warc``) of a local server. Crawl 2's
WARC is written through the writer API (the whole path, a real recrawl with
``--warc``, is tests/test_recrawl_warc.py's) from real answers of the same
server: a 304 to a request carrying the ETag of crawl 1, and a page at
another URL whose body equals crawl 1's page.
pywb, given both files, serves the original body at crawl 2's time for both
(the revisits resolved, not the earlier capture picked instead), and warcio
checks both files.

pywb pins old dependencies, so it lives in a venv of its own: this test runs
its ``wb-manager`` and ``wayback`` as subprocesses, from the directory
``PYWB_BIN`` names, else from the PATH; without them it skips and says so.
Every subprocess and wait has a deadline.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.core.models import FetchResult
from trio_crawl.outputs.warc import RevisitOf, WarcWriter
from trio_crawl.testing import Response, Site, SiteRequest, page, serve_site

warcio_archive = pytest.importorskip("warcio.archiveiterator")

TIMEOUT = 60
ETAG = '"v1"'
BODY = ("<!doctype html><title>kept</title>" + "<p>the page of crawl 1</p>" * 100).encode()


def pywb_bin() -> Path:
    """The directory of pywb's ``wb-manager`` and ``wayback``, or skip."""
    named = os.environ.get("PYWB_BIN")
    found = shutil.which("wb-manager")
    where = Path(named) if named else Path(found).parent if found else None
    if where is None or not all((where / tool).exists() for tool in ("wb-manager", "wayback")):
        pytest.skip(
            "pywb is not installed: pip install pywb in a venv of its own and set "
            "PYWB_BIN to that venv's bin directory (or put wb-manager on the PATH)"
        )
    return where


def pywb_collection(root: Path, tools: Path, *warcs: Path) -> str:
    """A pywb collection ``coll`` under ``root`` holding ``warcs``, made with
    pywb's own ``wb-manager``; returns its index (CDXJ) as text."""
    root.mkdir()
    for args in (["init", "coll"], ["add", "coll", *map(str, warcs)]):
        done = subprocess.run(
            [str(tools / "wb-manager"), *args],
            cwd=root, capture_output=True, text=True, timeout=TIMEOUT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return "".join(p.read_text() for p in (root / "collections/coll/indexes").iterdir())


def site() -> Site:
    def kept(request: SiteRequest) -> Response:
        if request.headers.get("if-none-match") == ETAG:
            return Response(status=304, headers=(("ETag", ETAG),), content_type=None)
        return Response(body=BODY, headers=(("ETag", ETAG),))

    return Site({"/": page("/page"), "/page": kept, "/copy": Response(body=BODY)})


def fetch(url: str, headers: dict[str, str] | None = None) -> FetchResult:
    """One real request (http.client), as a fetcher's FetchResult."""
    host, _, path = url.removeprefix("http://").partition("/")
    conn = http.client.HTTPConnection(host, timeout=TIMEOUT)
    try:
        conn.request("GET", "/" + path, headers=headers or {})
        answer = conn.getresponse()
        body = answer.read()
        found = {name.lower(): value for name, value in answer.getheaders()}
        return FetchResult(url, answer.status, found, body, 0.0)
    finally:
        conn.close()


def sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def raw_records(path: Path) -> Iterator[tuple[dict[str, str], bytes]]:
    """(WARC header fields, block) of every record, read without warcio: one
    gzip member each, inflated with zlib."""
    data = path.read_bytes()
    while data:
        inflate = zlib.decompressobj(31)
        record = inflate.decompress(data)
        data = inflate.unused_data
        head, _, rest = record.partition(b"\r\n\r\n")
        fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
        yield fields, rest[: int(fields["Content-Length"])]


def warc_epoch(date: str) -> float:
    return calendar.timegm(time.strptime(date[:19], "%Y-%m-%dT%H:%M:%S"))


def timestamp(epoch: float) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(epoch))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def wayback(root: Path, tools: Path) -> Iterator[int]:
    """pywb's ``wayback`` on 127.0.0.1 until the block ends; yields its port
    once it accepts connections (it says "Starting" before it listens)."""
    port = free_port()
    proc = subprocess.Popen(
        [str(tools / "wayback"), "-p", str(port), "-b", "127.0.0.1"],
        cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:  # as tests/redis_fixture.py waits for its server
            assert time.monotonic() < deadline and proc.poll() is None, "wayback did not start"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait(TIMEOUT)


def replay(port: int, epoch: float, url: str) -> tuple[int, dict[str, str], bytes]:
    """What pywb serves for ``url`` at ``epoch`` (identity mode: unrewritten)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", f"/coll/{timestamp(epoch)}id_/{url}")
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


@pytest.mark.timeout(300)  # five subprocesses, each bounded by TIMEOUT
def test_pywb_serves_the_original_body_for_both_kinds_of_revisit(tmp_path: Path) -> None:
    tools = pywb_bin()
    one, two = tmp_path / "one.warc.gz", tmp_path / "two.warc.gz"
    with serve_site(site()) as server:
        url, copy = server.url("/page"), server.url("/copy")
        crawl = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.url("/"), "-q",
             "-o", str(tmp_path / "one.jsonl"), "--warc", str(one)],
            capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert crawl.returncode == 0, crawl.stderr
        first = next(f for f, _ in raw_records(one) if f.get("WARC-Target-URI") == url)
        assert first["WARC-Type"] == "response"
        assert first["WARC-Payload-Digest"] == sha1(BODY)
        d1 = warc_epoch(first["WARC-Date"])
        d2 = d1 + 2 * 86_400  # crawl 2, two days later
        # Crawl 2's answers, from the same server: a real 304, a copy at another URL.
        sent = {"If-None-Match": ETAG}
        not_modified, same = fetch(url, sent), fetch(copy)
        assert (not_modified.status, not_modified.body) == (304, b"")
        assert (same.status, same.body) == (200, BODY)
    earlier = (url, first["WARC-Date"], first["WARC-Record-ID"], first["WARC-Payload-Digest"])
    unchanged = RevisitOf("server-not-modified", *earlier)
    identical = RevisitOf("identical-payload-digest", *earlier)
    with WarcWriter.open(two, append=False) as writer:
        writer.write_capture(
            url=url, result=not_modified, date=d2, request_headers=sent, revisit_of=unchanged
        )
        writer.write_capture(url=copy, result=same, date=d2, revisit_of=identical)

    # warcio checks both files (block digests; it leaves revisits unchecked,
    # so their block digests are checked here, and their payload digest is
    # the body they stand for).
    checked = subprocess.run(
        [sys.executable, "-c", "from warcio.cli import main; main()", "check", "-v",
         str(one), str(two)],
        capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "digest failed" not in checked.stdout
    revisits = [(f, b) for f, b in raw_records(two) if f["WARC-Type"] == "revisit"]
    assert len(revisits) == 2
    for fields, block in revisits:
        assert fields["WARC-Block-Digest"] == sha1(block)
        assert fields["WARC-Payload-Digest"] == sha1(BODY)
        assert fields["WARC-Refers-To"] == first["WARC-Record-ID"]

    root = tmp_path / "pywb"
    index = pywb_collection(root, tools, one, two)
    assert index.count("warc/revisit") == 2, index

    with wayback(root, tools) as port:
        served: dict[str, Any] = {
            "page at crawl 2": replay(port, d2, url),
            "copy at crawl 2": replay(port, d2, copy),
            "page at crawl 1": replay(port, d1, url),
        }
    for what, (status, headers, body) in served.items():
        assert (status, body) == (200, BODY), (what, status, headers, body[:200])
    # The revisits were what pywb served at crawl 2's time (their date), each
    # resolved to crawl 1's body; at crawl 1's time, crawl 1's response.
    assert served["page at crawl 2"][1]["Memento-Datetime"] == formatdate(d2, usegmt=True)
    assert served["copy at crawl 2"][1]["Memento-Datetime"] == formatdate(d2, usegmt=True)
    assert served["page at crawl 1"][1]["Memento-Datetime"] == formatdate(d1, usegmt=True)
    assert served["page at crawl 2"][1]["content-type"].startswith("text/html")
