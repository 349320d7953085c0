"""Link extraction speed: ``extract_links`` against a stdlib-only baseline.

The page is deterministic: ~15 KB of HTML with 30 ``<a>`` links (relative,
absolute, protocol-relative, a ``mailto:``, fragment duplicates of other links)
among paragraphs, a script, a style sheet link and a nav/footer, like a small
blog page. Three figures, in pages per second on one core:

- ``extract_links``: what the crawler runs per page (lxml parse + resolve_many),
  for the page at 480 URLs of one site in turn (24 directories; the steady state
  of a crawl, where ``resolve_many``'s memo knows the shared links), and "cold",
  with the memo emptied before every page (a crawl's first pages on a site);
- ``resolve_many`` alone, on the 30 hrefs (the URL layer's share), cold and warm;
- ``baseline``: the same lxml parse, then ``urljoin`` + ``urldefrag`` + a
  scheme check + dedup with the stdlib, i.e. a naive crawler's URL layer
  (and one that gets WHATWG edge cases wrong).

Then the scope's cost per extracted link (``Scope.allows``, run on every link
of every page), with the ``--include``/``--exclude``/``--no-parent`` given
(none: the plain ``Scope``).

Run: ``python benchmarks/bench_links.py [-n ITERATIONS] [--include RE] [--exclude RE]
[--no-parent]``.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Callable
from urllib.parse import urldefrag, urljoin

from lxml import etree

from trio_crawl.core import url as _url
from trio_crawl.core.config import CrawlConfig
from trio_crawl.core.parse import extract_links
from trio_crawl.core.url import resolve_many

BASE_URL = "https://www.example.com/blog/2024/05/some-article.html"
CONTENT_TYPE = "text/html; charset=utf-8"

_WORDS = (
    "crawler",
    "trio",
    "nursery",
    "channel",
    "frontier",
    "politeness",
    "robots",
    "scope",
    "canonical",
    "fetch",
    "parse",
    "anchor",
    "session",
    "budget",
    "depth",
    "limiter",
    "deadline",
    "cancel",
    "record",
    "sink",
    "handler",
)


def make_page(target_bytes: int = 15_000, seed: int = 1) -> bytes:
    """A deterministic HTML page of about ``target_bytes`` with exactly 30 <a> links."""
    rnd = random.Random(seed)
    hrefs = [
        "/",
        "/about",
        "/blog/",
        "../../tags/python",
        "../../tags/trio",
        "next-article.html",
        "previous-article.html",
        "./related/one.html",
        "related/two.html?ref=sidebar",
        "?page=2",
        "https://www.example.com/blog/2024/05/some-article.html#comments",
        "#top",
        "/about#team",
        "next-article.html#section-2",
        "https://other.example.org/path/to/page",
        "https://other.example.org/path/to/page#frag",
        "http://www.example.com/legacy/%7Euser/",
        "//cdn.example.net/docs/index.html",
        "/search?q=trio+crawler&lang=en",
        "/archive/2023/12/",
        "/archive/2024/01/",
        "/archive/2024/02/",
        "mailto:editor@example.com",
        "https://www.python.org/",
        "https://trio.readthedocs.io/en/stable/",
        "/feeds/atom.xml",
        "/privacy",
        "/terms",
        "/contact",
        "/blog/2024/05/another-article.html",
    ]
    assert len(hrefs) == 30
    parts = [
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>",
        "<title>Some article</title>",
        '<link rel=stylesheet href="/static/site.css">',
        "<script>window.dataLayer=window.dataLayer||[];function g(){dataLayer.push(arguments)}"
        "</script></head><body><header><nav><ul>",
    ]
    for i, href in enumerate(hrefs):
        if i == 8:
            parts.append("</ul></nav></header><main><article><h1>Some article</h1>")
        words = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(20, 60)))
        parts.append(
            f'<p class="para-{i}">{words} <a href="{href}" title="link {i}">{href}</a>.</p>'
        )
    parts.append("</article></main><footer>")
    body = "".join(parts)
    filler: list[str] = []
    while len(body) + sum(len(p) for p in filler) < target_bytes - 40:
        words = " ".join(rnd.choice(_WORDS) for _ in range(12))
        filler.append(f"<p><span>{words}</span></p>")
    return (body + "".join(filler) + "</footer></body></html>").encode()


def raw_hrefs(body: bytes) -> list[str]:
    """The a/area hrefs of ``body``, found as ``extract_links`` finds them."""
    root = etree.fromstring(body, etree.HTMLParser(encoding="utf-8", huge_tree=True))
    return [href for e in root.iter("a", "area") if (href := e.get("href")) is not None]


def baseline(body: bytes, url: str) -> list[str]:
    """The stdlib way: same lxml parse and walk, urljoin + urldefrag + dedup."""
    out: dict[str, None] = {}
    for href in raw_hrefs(body):
        absolute = urldefrag(urljoin(url, href.strip()))[0]
        if absolute.startswith(("http://", "https://")):
            out[absolute] = None
    return list(out)


def rate(func: Callable[[], object], iterations: int) -> float:
    """Pages per second: best of three runs of ``iterations`` calls."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(iterations):
            func()
        best = min(best, time.perf_counter() - start)
    return iterations / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--iterations", type=int, default=2000)
    parser.add_argument("--include", action="append", default=[], metavar="RE")
    parser.add_argument("--exclude", action="append", default=[], metavar="RE")
    parser.add_argument("--no-parent", action="store_true")
    args = parser.parse_args()

    page = make_page()
    links = extract_links(page, BASE_URL, CONTENT_TYPE)
    hrefs = raw_hrefs(page)
    print(f"page: {len(page)} bytes, {len(hrefs)} <a href>, {len(links)} distinct http(s) links")

    page_urls = itertools.cycle(
        f"https://www.example.com/blog/{year}/{month:02d}/article-{i}.html"
        for year in (2023, 2024)
        for month in range(1, 13)
        for i in range(20)
    )
    memo = _url._RESOLVE_CACHE

    def cold_extract() -> object:
        memo.clear()
        return extract_links(page, BASE_URL, CONTENT_TYPE)

    def cold_resolve() -> object:
        memo.clear()
        return resolve_many(hrefs, BASE_URL)

    n = args.iterations
    results = {
        "extract_links (site)": rate(
            lambda: extract_links(page, next(page_urls), CONTENT_TYPE), n
        ),
        "extract_links (cold)": rate(cold_extract, n),
        "resolve_many (warm)": rate(lambda: resolve_many(hrefs, next(page_urls)), n * 5),
        "resolve_many (cold)": rate(cold_resolve, n * 5),
        "baseline (lxml + urljoin)": rate(lambda: baseline(page, BASE_URL), n),
    }
    for name, pages_per_s in results.items():
        print(f"{name:28} {pages_per_s:10,.0f} pages/s  {1e6 / pages_per_s:8.1f} us/page")

    config = CrawlConfig.from_options(
        start_urls=[BASE_URL],
        include=args.include,
        exclude=args.exclude,
        no_parent=args.no_parent,
    )
    scope = config.scope()
    site = [extract_links(page, next(page_urls), CONTENT_TYPE) for _ in range(480)]
    per_page = itertools.cycle(site)
    passed = sum(scope.allows(u) for links in site for u in links)
    total = sum(len(links) for links in site)
    pages_per_s = rate(lambda: [u for u in next(per_page) if scope.allows(u)], n * 5)
    print(
        f"{type(scope).__name__}.allows: {1e9 / pages_per_s / (total / len(site)):6.0f} ns/link "
        f"({passed:,} of {total:,} links pass)"
    )


if __name__ == "__main__":
    main()
