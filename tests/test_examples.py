"""The examples in examples/ run, and do what they say they do.

Each example is imported from its path and driven with small parameters
against a server on 127.0.0.1 (port 0) that the test starts itself; then
each is run once as a script, the way a reader would run it. Every test is
bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import math
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import trio

import trio_crawl
from trio_crawl.core.config import GROUPS
from trio_crawl.testing import Response, Site, SiteRequest, serve_site

EXAMPLES = Path(__file__).parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


async def run_script(name: str, *args: str) -> str:
    """Run ``python examples/NAME.py ARGS``; return its stdout (it must exit 0)."""
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


# -- three_level_scraper ------------------------------------------------------


async def test_three_level_scraper_gets_every_product_and_review_once() -> None:
    shop = load("three_level_scraper")
    listings, per_listing = 3, 4
    skus = range(listings * per_listing)
    with serve_site(shop.shop_site(listings, per_listing)) as server, trio.fail_after(10):
        scraped = await shop.scrape(server.url("/shop/1"), workers=4)
    assert sorted(int(p.sku) for p in scraped.products) == list(skus)
    for product in scraped.products:
        sku = int(product.sku)
        assert product.name == f"Product {sku}"
        assert product.price == sku % 100 + 0.99
        assert product.listing == server.url(f"/shop/{sku // per_listing + 1}")
    by_sku = Counter(int(r.sku) for r in scraped.reviews)
    assert by_sku == Counter({s: shop.review_count(s) for s in skus if shop.review_count(s)})
    review_pages = sum(max(1, math.ceil(shop.review_count(s) / 2)) for s in skus)
    assert scraped.pages == listings + len(skus) + review_pages
    # The listing that answered 503 first was retried, and is the only one.
    assert scraped.retried == [server.url("/shop/2")]
    targets = Counter(server.targets())
    assert targets.pop("/shop/2") == 2
    assert targets.pop("/robots.txt") == 1
    assert set(targets.values()) == {1}  # every other page once
    assert len(targets) == scraped.pages - 1
    assert not {"/about", "/cart"} & set(targets)  # linked everywhere, followed by no handler


async def test_three_level_scraper_script() -> None:
    out = await run_script("three_level_scraper")
    assert re.search(r"^pages fetched: 500$", out, re.M), out
    assert re.search(r"^products: +200$", out, re.M), out
    assert re.search(r"^reviews: +400 ", out, re.M), out
    assert re.search(r"^retried: +http://127\.0\.0\.1:\d+/shop/2$", out, re.M), out


# -- rate_limited_api ----------------------------------------------------------


async def test_rate_limited_api_keeps_both_limits() -> None:
    api_example = load("rate_limited_api")
    sizes = {"users": 25, "orders": 30, "invoices": 21}  # 3 + 3 + 3 pages
    # Answers take longer than the rate's interval, so without the cap a
    # third request would start while two are in flight.
    api = api_example.ItemsApi(sizes, latency=0.12)
    rate = 20.0
    with serve_site(Site(routes={}, fallback=api)) as server, trio.fail_after(10):
        starts = [server.url(f"/api/{name}?page=1") for name in sizes]
        items = await api_example.sync(starts, rate=rate, per_host_concurrency=2)
    expected = sorted((name, i) for name, size in sizes.items() for i in range(size))
    assert sorted((item["collection"], item["id"]) for item in items) == expected
    targets = server.targets()
    assert sorted(targets) == sorted(f"/api/{n}?page={p}" for n in sizes for p in (1, 2, 3))
    # Request starts are at least 1/rate apart; arrivals at the server may
    # drift by a little network jitter.
    times = sorted(entry.time for entry in server.log)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.7 / rate, gaps
    average, busiest = api_example.request_rate(server.log)
    assert average <= rate and busiest <= rate
    assert api.peak_in_flight == 2


async def test_rate_limited_api_script() -> None:
    out = await run_script("rate_limited_api")
    assert re.search(r"^items: 385 from 39 requests in ", out, re.M), out
    busiest = re.search(r"at most (\d+) in any second", out)
    # Starts are spaced 1.01/20 s apart; arrivals may bunch up by a little
    # jitter (the exact check is test_rate_limited_api_keeps_both_limits).
    assert busiest is not None and int(busiest[1]) <= 21, out
    assert re.search(r"^in flight at once: at most 2 ", out, re.M), out


# -- batch_fetch -----------------------------------------------------------------


async def test_batch_fetch_fetches_each_url_once_with_bounded_lookahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = load("batch_fetch")
    count, workers = 2000, 16

    def slow_page(request: SiteRequest) -> Response:
        # Slow enough that a producer with any buffer would race ahead.
        fast: Response = batch.numbered_page(request)
        return dataclasses.replace(fast, delay=0.002)

    with serve_site(Site(routes={}, fallback=slow_page)) as server:
        # How far does the producer run ahead of the server? URLs taken from
        # the generator but not yet seen by the server are in a worker's
        # hands, so never more than `workers` of them.
        lookahead: list[int] = []
        lazy_urls = batch.urls

        def watched_urls(base_url: str, n: int) -> Iterator[str]:
            for i, url in enumerate(lazy_urls(base_url, n)):
                lookahead.append(i - len(server.log))
                yield url

        monkeypatch.setattr(batch, "urls", watched_urls)
        with trio.fail_after(15):
            tally = await batch.fetch_all(server.base_url, count, workers)
    assert tally.done == count
    assert tally.outcomes == {200: count}
    assert sorted(server.targets()) == sorted(f"/{n}" for n in range(count))
    assert len(lookahead) == count and max(lookahead) <= workers
    assert server.connections <= workers


async def test_batch_fetch_script() -> None:
    out = await run_script("batch_fetch", "--count", "2000", "--workers", "8")
    assert re.search(r"^ +2,000 fetched ", out, re.M), out
    assert re.search(r"^outcomes: \{200: 2000\}; ", out, re.M), out
    assert re.search(r"^2,000 URLs at [\d,]+ pages/s, peak RSS [\d.]+ MiB$", out, re.M), out


# -- the docs' option table ------------------------------------------------------


def test_reference_lists_every_crawl_config_option() -> None:
    """docs/reference.md has hand-written tables of CrawlConfig's options,
    a group's in its table (their comments are not docstrings mkdocstrings
    could show): keep them whole, in the fields' order."""
    reference = (Path(__file__).parents[1] / "docs" / "reference.md").read_text()
    documented = re.findall(r"^\| `(\w+)` \|", reference, re.M)
    groups = [f for f in dataclasses.fields(trio_crawl.CrawlConfig) if f.name in GROUPS]
    fields = [f.name for f in dataclasses.fields(trio_crawl.CrawlConfig) if f.name not in GROUPS]
    fields[1:1] = [f.name for group in groups for f in dataclasses.fields(GROUPS[group.name])]
    assert documented == fields
