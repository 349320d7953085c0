"""A recrawl's WARC (issue #33 item 5, the engine's wiring): real crawls of a
real server through the command line, a real state file, real WARC files.

Crawl 1 (``--state --warc one.warc.gz``) stores every page. The site then
changes one page and adds one; crawl 2 (``--recrawl --warc two.warc.gz``)
must archive each unchanged page as a revisit pointing at crawl 1's record:
``server-not-modified`` for the 304s (ETag and Last-Modified pages), and
``identical-payload-digest`` for the page that sends no validator and comes
back with the same body. Its request records carry the validators sent.
Crawl 3 refers to crawl 1's record again (the body is there, not in
crawl 2's revisit). warcio reads the files back into every page's current
body; pywb, given both files, serves the unchanged page's original body at
crawl 2's time (skipped, and said, without pywb: ``PYWB_BIN``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from recrawl_site import ETAG, MODIFIED, NONE, ChangingSite
from test_warc_pywb import (
    pywb_bin,
    pywb_collection,
    raw_records,
    replay,
    warc_epoch,
    wayback,
)

from trio_crawl.outputs.warc import read_warc_responses
from trio_crawl.testing import serve_site

from cli_helpers import records_in, run_cli

NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def site() -> ChangingSite:
    changing = ChangingSite()
    changing.add("/", "/a", "/b", "/c", validators=ETAG)
    changing.add("/a", validators=ETAG)
    changing.add("/b", validators=NONE)  # 200 again, same body
    changing.add("/c", validators=MODIFIED)
    return changing


def crawl(url: str, db: Path, out: Path, warc: Path, *more: str) -> dict[str, dict[str, Any]]:
    done = run_cli(url, "--state", str(db), "-o", str(out), "--warc", str(warc), *more)
    assert done.returncode == 0, done.stderr
    return {r["url"]: r for r in records_in(out.read_text())}


def records(path: Path, kind: str) -> dict[str, dict[str, str]]:
    """WARC header fields of each ``kind`` record, by target URI."""
    return {f["WARC-Target-URI"]: f for f, _ in raw_records(path) if f["WARC-Type"] == kind}


def request_heads(path: Path) -> dict[str, str]:
    """The HTTP head of each request record, by target URI."""
    return {
        f["WARC-Target-URI"]: block.decode("latin-1")
        for f, block in raw_records(path)
        if f["WARC-Type"] == "request"
    }


def three_crawls(tmp_path: Path) -> tuple[ChangingSite, dict[str, str], list[Path]]:
    changing = site()
    db = tmp_path / "s.db"
    warcs = [tmp_path / f"{n}.warc.gz" for n in ("one", "two", "three")]
    with serve_site(changing.site()) as server:
        urls = {path: server.url(path) for path in ("/", "/a", "/b", "/c", "/new")}
        crawl(urls["/"], db, tmp_path / "1.jsonl", warcs[0])
        # pywb tells captures apart by their 14-digit (whole-second) time: the
        # recrawl starts in the next second, so no capture of crawl 2 shares a
        # timestamp with one of crawl 1 (the replay at crawl 2's time would
        # otherwise pick either). A wait on the clock itself, under a second.
        time.sleep(1.0 - time.time() % 1.0 + 0.01)
        changing.edit("/a", links=("/new",))
        changing.add("/new")
        second = crawl(urls["/"], db, tmp_path / "2.jsonl", warcs[1], "--recrawl")
        assert {u: second[u]["change"] for u in second} == {
            urls["/"]: "unchanged",
            urls["/a"]: "changed",
            urls["/b"]: "unchanged",
            urls["/c"]: "unchanged",
            urls["/new"]: "new",
        }
        crawl(urls["/"], db, tmp_path / "3.jsonl", warcs[2], "--recrawl")
    return changing, urls, warcs


def test_a_recrawl_archives_unchanged_pages_as_revisits_of_the_first_crawl(
    tmp_path: Path,
) -> None:
    changing, urls, (one, two, three) = three_crawls(tmp_path)
    first = records(one, "response")
    revisits = records(two, "revisit")
    assert set(revisits) == {urls["/"], urls["/b"], urls["/c"]}
    assert set(records(two, "response")) == {urls["/a"], urls["/new"]}
    profiles = {url: fields["WARC-Profile"] for url, fields in revisits.items()}
    assert profiles == {urls["/"]: NOT_MODIFIED, urls["/b"]: IDENTICAL, urls["/c"]: NOT_MODIFIED}
    for later in (revisits, records(three, "revisit")):
        for url in (urls["/"], urls["/b"], urls["/c"]):
            fields, earlier = later[url], first[url]
            assert fields["WARC-Refers-To"] == earlier["WARC-Record-ID"]
            assert fields["WARC-Refers-To-Date"] == earlier["WARC-Date"]
            assert fields["WARC-Refers-To-Target-URI"] == url
            assert fields["WARC-Payload-Digest"] == earlier["WARC-Payload-Digest"]
    # The request records say the validators that were sent.
    etag = dict(changing.headers("/"))["ETag"]
    modified = dict(changing.headers("/c"))["Last-Modified"]
    heads = request_heads(two)
    assert f"If-None-Match: {etag}\r\n" in heads[urls["/"]]
    assert f"If-Modified-Since: {modified}\r\n" in heads[urls["/c"]]
    assert "If-" not in heads[urls["/b"]] and "If-" not in heads[urls["/new"]]
    # Read back over both files: every page's current body.
    stored = read_warc_responses(one, two)
    for path, url in urls.items():
        assert stored[url].body == changing.body(path), path
        assert stored[url].status == 200, path


@pytest.mark.timeout(300)  # the crawls and pywb's tools, each bounded by TIMEOUT
def test_pywb_replays_a_recrawl(tmp_path: Path) -> None:
    tools = pywb_bin()
    changing, urls, (one, two, _) = three_crawls(tmp_path)
    root = tmp_path / "pywb"
    index = pywb_collection(root, tools, one, two)
    assert index.count("warc/revisit") == 3, index
    # Replayed at crawl 2's last capture: crawl 2 may span seconds, and at its
    # first one a page crawl 2 fetched a second later is as near as crawl 1's
    # capture of it a second earlier (pywb may pick either). At the last one,
    # each of crawl 2's captures is nearer than any of crawl 1's.
    d2 = max(warc_epoch(f["WARC-Date"]) for f, _ in raw_records(two) if "WARC-Date" in f)
    with wayback(root, tools) as port:
        served = {path: replay(port, d2, urls[path]) for path in ("/", "/b", "/c", "/a")}
    for path, (status, _, body) in served.items():
        assert (status, body) == (200, changing.body(path)), path
