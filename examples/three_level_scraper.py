"""Scrape a shop three levels deep: listings -> products -> reviews.

Each level of the site gets its own handler, an async generator that yields
two kinds of thing:

* items (here, ``Product`` and ``Review`` objects), which come out of
  ``crawl.items()``;
* ``Request`` s for more pages, made with ``page.follow(href, handler, **meta)``.
  The ``meta`` keywords arrive in the next handler as ``page.meta``.

The crawler does the rest: it fetches each URL once, keeps the number of
requests in flight bounded, retries the listing page that answers 503 once,
and ends when the last page is done.

Run it: ``python examples/three_level_scraper.py``. It serves a generated shop
on 127.0.0.1 (no network needed), scrapes it, and prints counts.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass

import trio

import trio_crawl
from trio_crawl import CrawlRecord, Page, Request
from trio_crawl.testing import Response, Route, Site, page, serve_site

REVIEWS_PER_PAGE = 2


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price: float
    listing: str  # the URL of the listing page that linked to it


@dataclass(frozen=True)
class Review:
    sku: str
    stars: int


# -- the handlers: one per level of the site ---------------------------------


# --8<-- [start:handlers]
async def parse_listing(page: Page) -> AsyncIterator[object]:
    """A listing page: follow every product, then the next listing page."""
    assert page.tree is not None
    for href in page.tree.xpath('//a[@class="product"]/@href'):
        yield page.follow(href, parse_product, listing=page.url)
    for href in page.tree.xpath('//a[@rel="next"]/@href'):
        yield page.follow(href, parse_listing)


async def parse_product(page: Page) -> AsyncIterator[object]:
    """A product page: one Product item, and its first page of reviews."""
    tree = page.tree
    assert tree is not None
    sku = tree.xpath('string(//*[@id="sku"])')
    yield Product(
        sku=sku,
        name=tree.xpath("string(//h1)"),
        price=float(tree.xpath('string(//*[@class="price"])')),
        listing=page.meta["listing"],
    )
    for href in tree.xpath('//a[@class="reviews"]/@href'):
        yield page.follow(href, parse_reviews, sku=sku)


async def parse_reviews(page: Page) -> AsyncIterator[object]:
    """A page of reviews: one Review per entry, then the next page of them."""
    assert page.tree is not None
    sku = page.meta["sku"]
    for stars in page.tree.xpath('//*[@class="review"]/@data-stars'):
        yield Review(sku=sku, stars=int(stars))
    for href in page.tree.xpath('//a[@rel="next"]/@href'):
        yield page.follow(href, parse_reviews, sku=sku)


# --8<-- [end:handlers]


@dataclass
class Scraped:
    products: list[Product]
    reviews: list[Review]
    pages: int  # records: one per URL fetched
    retried: list[str]  # URLs that needed more than one attempt


# --8<-- [start:scrape]
async def scrape(start_url: str, *, workers: int = 8) -> Scraped:
    """Scrape the shop whose first listing page is ``start_url``."""
    products: list[Product] = []
    reviews: list[Review] = []
    records: list[CrawlRecord] = []
    async with trio_crawl.open_crawler(
        [Request(start_url, parse_listing)],
        workers=workers,
        retries=2,
        on_record=records.append,  # called once for each URL, as it is final
    ) as crawl:
        async for item in crawl.items():
            if isinstance(item, Product):
                products.append(item)
            elif isinstance(item, Review):
                reviews.append(item)
    retried = [r.url for r in records if r.attempts > 1]
    return Scraped(products, reviews, len(records), retried)


# --8<-- [end:scrape]


# -- the shop: generated, served on 127.0.0.1 --------------------------------


def review_count(sku: int) -> int:
    """How many reviews product ``sku`` has (0 to 4)."""
    return sku % 5


def shop_site(listings: int = 20, per_listing: int = 10) -> Site:
    """A shop of ``listings`` listing pages of ``per_listing`` products each.

    ``/shop/2`` answers 503 (with ``Retry-After: 0``) the first time, then
    200. Every page also links to ``/about`` and ``/cart``, which no handler
    follows.
    """
    routes: dict[str, Route] = {}
    chrome = ("/about", "/cart")
    for n in range(1, listings + 1):
        skus = range((n - 1) * per_listing, n * per_listing)
        links = "".join(f'<a class="product" href="/product/{s}">Product {s}</a>' for s in skus)
        if n < listings:
            links += f'<a rel="next" href="/shop/{n + 1}">next</a>'
        listing = page(*chrome, title=f"Shop, page {n}", extra=links)
        if n == 2:  # busy the first time: the crawler waits a moment and asks again
            routes[f"/shop/{n}"] = [Response(status=503, headers=(("Retry-After", "0"),)), listing]
        else:
            routes[f"/shop/{n}"] = listing
    for sku in range(listings * per_listing):
        details = (
            f'<h1>Product {sku}</h1><span id="sku">{sku}</span>'
            f'<span class="price">{sku % 100 + 0.99:.2f}</span>'
            f'<a class="reviews" href="/product/{sku}/reviews?page=1">reviews</a>'
        )
        routes[f"/product/{sku}"] = page(*chrome, title=f"Product {sku}", extra=details)
        pages = max(1, math.ceil(review_count(sku) / REVIEWS_PER_PAGE))
        for p in range(1, pages + 1):
            first = (p - 1) * REVIEWS_PER_PAGE
            count = min(REVIEWS_PER_PAGE, review_count(sku) - first)
            body = "".join(
                f'<p class="review" data-stars="{(sku + i) % 5 + 1}">Fine.</p>'
                for i in range(first, first + count)
            )
            if p < pages:
                body += f'<a rel="next" href="/product/{sku}/reviews?page={p + 1}">more</a>'
            routes[f"/product/{sku}/reviews?page={p}"] = page(*chrome, extra=body)
    return Site(routes)


def main() -> None:
    with serve_site(shop_site()) as server:
        scraped = trio.run(scrape, server.url("/shop/1"))
    stars = sum(r.stars for r in scraped.reviews) / len(scraped.reviews)
    print(f"pages fetched: {scraped.pages}")
    print(f"products:      {len(scraped.products)}")
    print(f"reviews:       {len(scraped.reviews)} (average {stars:.2f} stars)")
    print(f"retried:       {', '.join(scraped.retried) or 'none'}")


if __name__ == "__main__":
    main()
