"""--page-requisites end to end: a local site with every kind of resource a
page can need, served on 127.0.0.1, crawled through the library and the CLI.
Every crawl is bounded by ``trio.fail_after`` or a subprocess timeout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.testing import Response, Site, page, serve_site

IMG = Response(body=b"\x89PNG....", content_type="image/png")
HOME = """
<link rel="stylesheet" href="/css/site.css">
<link rel="icon" href="/favicon.ico">
<script src="/js/app.js"></script>
<img src="/img/a.png" srcset="/img/a-2x.png 2x, /img/a-3x.png 3x">
<picture><source srcset="/img/b.webp"><img src="/img/b.png"></picture>
<iframe src="/frame.html"></iframe>
<object data="/media/doc.pdf"></object>
<video src="/media/v.mp4" poster="/img/poster.jpg"><source src="/media/v.webm"></video>
<audio src="/media/a.ogg"></audio>
<div style="background: url('/img/bg.png')"></div>
<img src="http://elsewhere.test/x.png">
<img src="/private/secret.png">
<img src="data:image/png;base64,AAAA">
"""
EXPECTED_REQUISITES = {
    "/css/site.css", "/favicon.ico", "/js/app.js", "/img/a.png", "/img/a-2x.png",
    "/img/a-3x.png", "/img/b.webp", "/img/b.png", "/frame.html", "/media/doc.pdf",
    "/media/v.mp4", "/img/poster.jpg", "/media/v.webm", "/media/a.ogg", "/img/bg.png",
    "/css/more.css", "/img/from-css.png", "/fonts/f.woff2",
}  # fmt: skip


def requisite_site() -> Site:
    routes: dict[str, Response] = {
        "/": page("/about", extra=HOME),
        "/about": page(),
        "/robots.txt": Response(
            body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain"
        ),
        "/css/site.css": Response(
            body=b'@import "more.css";\nbody { background: url(../img/from-css.png) }\n',
            content_type="text/css",
        ),
        "/css/more.css": Response(
            body=b"@font-face { src: url('/fonts/f.woff2') }", content_type="text/css"
        ),
        # A frame is a requisite: fetched, not read for links.
        "/frame.html": page("/only-from-the-frame"),
        "/only-from-the-frame": page(),
        "/js/app.js": Response(body=b"console.log(1)", content_type="text/javascript"),
        "/fonts/f.woff2": Response(body=b"wOF2", content_type="font/woff2"),
    }
    for path in EXPECTED_REQUISITES:
        routes.setdefault(path, IMG)
    return Site(routes)


async def crawl(server_url: str, **options: object) -> list[CrawlRecord]:
    records: list[CrawlRecord] = []
    with trio.fail_after(60):
        await run_crawl(server_url, on_record=records.append, **options)  # type: ignore[arg-type]
    return records


@pytest.mark.parametrize("backend", ["curl", "httpx"])
async def test_every_kind_of_requisite_is_fetched_and_recorded(backend: str) -> None:
    with serve_site(requisite_site()) as server:
        records = await crawl(server.url("/"), page_requisites=True, backend=backend, max_depth=1)
        targets = server.targets()
    got = {r.url.removeprefix(server.base_url): r for r in records}
    assert set(got) == {"/", "/about", "/private/secret.png"} | EXPECTED_REQUISITES
    for path in EXPECTED_REQUISITES:
        assert (got[path].status, got[path].error) == (200, None), got[path]
        assert targets.count(path) == 1
    # Recorded like pages: depth one below the page that needs them, and that
    # page as referrer; the stylesheet's own url()s hang off the stylesheet.
    assert (got["/img/a.png"].depth, got["/img/a.png"].referrer) == (1, server.url("/"))
    assert got["/img/from-css.png"].referrer == server.url("/css/site.css")
    assert got["/fonts/f.woff2"].referrer == server.url("/css/more.css")
    assert got["/fonts/f.woff2"].depth == 3  # beyond --max-depth 1: requisites still come
    assert got["/img/a.png"].size == len(IMG.body)  # the body was read, though not HTML
    # robots.txt holds for requisites; other hosts are out of scope; frames
    # are not followed; data: URLs are not requests.
    assert got["/private/secret.png"].error.kind == "robots"  # type: ignore[union-attr]
    assert "/private/secret.png" not in targets
    assert "/only-from-the-frame" not in targets
    assert all(not r.url.startswith("http://elsewhere.test") for r in records)


async def test_requisites_are_not_fetched_by_default() -> None:
    with serve_site(requisite_site()) as server:
        records = await crawl(server.url("/"))
    assert {r.url.removeprefix(server.base_url) for r in records} == {"/", "/about"}


def test_the_cli_flag_and_its_refusal_with_a_state_file(tmp_path: Path) -> None:
    with serve_site(requisite_site()) as server:
        out = tmp_path / "out.jsonl"
        run = [sys.executable, "-m", "trio_crawl", server.url("/"), "-q", "-o", str(out)]
        done = subprocess.run([*run, "--page-requisites"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, done.stderr
        urls = {json.loads(line)["url"].removeprefix(server.base_url) for line in out.open()}
        assert urls >= EXPECTED_REQUISITES
        refused = subprocess.run(
            [*run, "--page-requisites", "--state", str(tmp_path / "s.db")],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert refused.returncode == 2
    message = "the file does not record which URLs are requisites"
    assert refused.stderr.strip() == (
        f"trio-crawl: error: --page-requisites cannot be combined with --state yet: {message}"
    )
    assert not (tmp_path / "s.db").exists()  # refused before the file was made
