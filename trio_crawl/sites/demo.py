"""The built-in demo site: a small shop and blog with every trap a crawler meets.

``demo_site(pages, seed)`` builds a ``Site`` (pure data, see ``site.py``) that
``trio-crawl demo`` serves on 127.0.0.1. Same arguments, same site, byte for
byte: every random choice comes from ``random.Random(seed)``.

Map of the site (``N = max(1, 2 * pages // 3)`` items, ``M = max(1, pages - N)`` posts):

- ``/`` home: links to every section and to each trap below.
- ``/shop/``, ``/shop/?page=K``: item listings, 20 per page, with first /
  previous / next links written as query-only hrefs (``?page=2``).
  ``/shop/?page=1`` is a query duplicate of ``/shop/`` (same content).
- ``/shop/item/I``: items. Links: ``../`` (the shop), siblings as bare
  relative names (``7``, ``./12#reviews``), ``#top``, and for every 25th item
  a ``?ref=related`` duplicate of a sibling (routed, same content).
- ``/blog/``, ``/blog/page/K/``: post listings; ``/blog/post-J/``: posts with
  ``../post-X/`` siblings, ``../`` and a ``../../shop/item/I`` cross link.
- ``/about``: a ``<base href="/blog/">`` page, so ``post-1/`` means
  ``/blog/post-1/``.
- ``/map``: an image map; ``/faq`` is linked only from its ``<area>``.
- ``/links``: absolute links (built from the request's Host header, as the
  port is only known when served), a protocol-relative one, and links to
  example.com / example.org / example.net, which are out of scope and must
  never be requested. ``/contact`` adds mailto: and tel: links.
- ``/robots.txt``: ``Disallow: /private/`` and ``Crawl-delay: 0`` for ``*``;
  ``/private/...`` pages exist but must never be requested.
- ``/old/a`` -> ``/old/b`` -> ``/old/c`` -> ``/new/home`` (301, 302, 307): a
  3-hop chain to a page reachable only through it.
- ``/loop/a`` <-> ``/loop/b``: a redirect loop (302s).
- ``/missing``: the one deliberate 404. ``/broken``: always 500.
  ``/flaky``: 503 once, then 200. ``/slow``: answers after 0.3 s.
- ``/files/catalog.pdf``, ``/api/items.json``, ``/images/logo.png``: non-HTML.
- ``/latin1``: an ISO-8859-1 page (header and ``<meta>``), linking to
  ``/latin1/more``, reachable only through it.

``demo_expectations(site)`` walks the site in-process with the crawler's own
pure rules (``parse.extract_links``, ``scope.Scope``, ``RobotsPolicy``) and
says what a complete crawl from ``/`` must record. For ``demo_site()`` (300
pages, seed 0): 348 URLs, of which 338 answer 200 (3 of them non-HTML), 5 are
redirect hops (301, 302, 307 on the chain; two 302 in the loop), one 404, one
500, and 3 are disallowed by robots.txt; 346 page requests (the 503 is asked
twice); 4 distinct external links, never requested. Every route but
``/robots.txt`` is reached, so ``urls == len(site.routes)`` for any size and
seed (``/missing`` has no route, robots.txt is no record).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from ..core.http import DEFAULT_USER_AGENT
from ..core.parse import extract_links
from ..core.retry import RetryPolicy
from ..core.scope import Scope
from ..core.url import canonicalize, resolve
from ..robots.policy import RobotsPolicy
from .site import Response, Route, Site, SiteRequest, redirect

PER_PAGE = 20
SLOW_DELAY = 0.3
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\nCrawl-delay: 0\n"
EXTERNAL_LINKS = (
    "https://example.com/",
    "http://example.org/catalog?from=demo",
    "https://www.example.net/blog/",
)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_NAV = ("/", "/shop/", "/blog/", "/about")
_ADJECTIVES = ("Blue", "Quiet", "Brave", "Tiny", "Shiny", "Rusty", "Woolly", "Swift", "Odd")
_NOUNS = ("Kettle", "Lamp", "Teapot", "Compass", "Notebook", "Chair", "Trowel", "Kite")
_TOPICS = ("trio", "nurseries", "cancellation", "backpressure", "robots.txt", "redirects")


def demo_site(pages: int = 300, seed: int = 0) -> Site:
    """The demo site with ``pages`` items and posts (2/3 items), chosen by ``seed``.

    Routes: the ``pages`` items and posts, one listing per 20 of either (plus
    ``/shop/``, a duplicate of ``/shop/?page=1``), at most one ``?ref=related``
    duplicate per 25 items, and 25 fixed routes (robots.txt included): 348 for
    ``demo_site()``. Raises ``ValueError`` when ``pages < 1``.
    """
    if pages < 1:
        raise ValueError(f"pages must be >= 1, not {pages}")
    rng = random.Random(seed)
    n_items = max(1, pages * 2 // 3)
    n_posts = max(1, pages - n_items)
    routes: dict[str, Route] = {}

    _add_shop(routes, rng, n_items)
    _add_blog(routes, rng, n_posts, n_items)
    _add_fixed_pages(routes, n_items)
    return Site(routes=routes)


# -- pages ---------------------------------------------------------------------


def _html(title: str, body: str, *, head: str = "", anchor_top: bool = True) -> str:
    nav = " | ".join(f'<a href="{h}">{escape(h)}</a>' for h in _NAV)
    top = '<a id="top"></a>' if anchor_top else ""
    return (
        f"<!doctype html>\n<html><head><title>{escape(title)}</title>{head}</head>"
        f"<body>{top}<nav>{nav}</nav><h1>{escape(title)}</h1>\n{body}\n"
        f'<footer><a href="#top">back to top</a></footer></body></html>\n'
    )


def _page(title: str, body: str, *, head: str = "") -> Response:
    return Response(body=_html(title, body, head=head).encode())


def _links(hrefs: list[tuple[str, str]]) -> str:
    return "<ul>" + "".join(f'<li><a href="{h}">{escape(t)}</a></li>' for h, t in hrefs) + "</ul>"


def _item_name(rng: random.Random) -> str:
    return f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}"


def _add_shop(routes: dict[str, Route], rng: random.Random, n_items: int) -> None:
    names = [_item_name(rng) for _ in range(n_items)]
    listings = math.ceil(n_items / PER_PAGE)
    for k in range(1, listings + 1):
        first = (k - 1) * PER_PAGE + 1
        items = [
            (f"item/{i}", f"{names[i - 1]} #{i}")
            for i in range(first, min(k * PER_PAGE, n_items) + 1)
        ]
        pager = [("?page=1", "first")]
        if k > 1:
            pager.append((f"?page={k - 1}", "previous"))
        if k < listings:
            pager.append((f"?page={k + 1}", "next"))
            pager.append((f"?page={k + 1}#list", "next (list)"))
        response = _page(f"Shop, page {k}", _links(items) + _links(pager))
        routes[f"/shop/?page={k}"] = response
        if k == 1:
            routes["/shop/"] = response

    ref_targets: set[int] = set()
    for i in range(1, n_items + 1):
        others = [j for j in range(1, n_items + 1) if j != i]
        related = rng.sample(others, min(3, len(others)))
        hrefs = [("../", "back to the shop"), ("#top", "top")]
        for n, j in enumerate(related):
            hrefs.append((str(j) if n % 2 == 0 else f"./{j}#reviews", names[j - 1]))
        if i % 25 == 0 and related:
            hrefs.append((f"{related[0]}?ref=related", f"{names[related[0] - 1]} (related)"))
            ref_targets.add(related[0])
        price = rng.randrange(199, 9999)
        body = (
            f"<p>Price: {price // 100}.{price % 100:02d} EUR</p>"
            f'<p id="reviews">{rng.randrange(0, 40)} reviews</p>{_links(hrefs)}'
        )
        routes[f"/shop/item/{i}"] = _page(f"{names[i - 1]} #{i}", body)
    for j in sorted(ref_targets):
        routes[f"/shop/item/{j}?ref=related"] = routes[f"/shop/item/{j}"]


def _add_blog(routes: dict[str, Route], rng: random.Random, n_posts: int, n_items: int) -> None:
    listings = math.ceil(n_posts / PER_PAGE)
    for k in range(1, listings + 1):
        prefix = "" if k == 1 else "../../"  # /blog/ or /blog/page/K/
        posts = [
            (f"{prefix}post-{j}/", f"Post {j}")
            for j in range((k - 1) * PER_PAGE + 1, min(k * PER_PAGE, n_posts) + 1)
        ]
        pager = []
        if k > 1:
            pager.append((f"{prefix}page/{k - 1}/" if k > 2 else "../../", "newer"))
        if k < listings:
            pager.append((f"{prefix}page/{k + 1}/", "older"))
        target = "/blog/" if k == 1 else f"/blog/page/{k}/"
        routes[target] = _page(f"Blog, page {k}", _links(posts) + _links(pager))

    for j in range(1, n_posts + 1):
        others = [x for x in range(1, n_posts + 1) if x != j]
        siblings = rng.sample(others, min(2, len(others)))
        hrefs = [(f"../post-{x}/", f"Post {x}") for x in siblings]
        hrefs.append(("../", "all posts"))
        item = rng.randrange(1, n_items + 1)
        hrefs.append((f"../../shop/item/{item}", f"item {item}"))
        topic = rng.choice(_TOPICS)
        body = f"<p>Thoughts on {escape(topic)}.</p>{_links(hrefs)}"
        routes[f"/blog/post-{j}/"] = _page(f"Post {j}: {topic}", body)


def _links_page(request: SiteRequest) -> Response:
    """Absolute links need the served origin, which only the Host header knows."""
    host = request.headers.get("host", "127.0.0.1")
    hrefs = [
        (f"http://{host}/shop/item/1", "item 1, absolute"),
        (f"HTTP://{host.upper()}/blog/#latest", "the blog, shouting"),
        (f"//{host}/contact", "contact, protocol-relative"),
        *((url, f"elsewhere: {url}") for url in EXTERNAL_LINKS),
        ("//example.net/protocol-relative", "elsewhere, protocol-relative"),
    ]
    return _page("Links", _links(hrefs))


def _add_fixed_pages(routes: dict[str, Route], n_items: int) -> None:
    home_links = [
        ("shop/", "Shop"),
        ("/blog/", "Blog"),
        ("about", "About (base href)"),
        ("/map", "Image map"),
        ("/links", "Absolute and external links"),
        ("/contact#form", "Contact"),
        ("/private/", "Staff only (robots.txt)"),
        ("/private/report-1", "Report 1 (robots.txt)"),
        ("/private/report-2", "Report 2 (robots.txt)"),
        ("/old/a", "Old address (3 redirects)"),
        ("/loop/a", "Redirect loop"),
        ("/missing", "A broken link (404)"),
        ("/broken", "Always fails (500)"),
        ("/flaky", "Fails once (503)"),
        ("/slow", "Slow page"),
        ("/files/catalog.pdf", "Catalog (PDF)"),
        ("/api/items.json", "Items (JSON)"),
        ("/images/logo.png", "Logo (PNG)"),
        ("/latin1", "Page in ISO-8859-1"),
        ("/shop/?page=1", "Shop, first page"),
        ("https://example.com/", "Example (external)"),
        ("mailto:shop@example.com", "Mail us"),
        ("javascript:void(0)", "Script link"),
    ]
    routes["/"] = _page("Demo shop and blog", _links(home_links))
    routes["/robots.txt"] = Response(body=ROBOTS_TXT.encode(), content_type="text/plain")

    routes["/about"] = _page(
        "About",
        _links([("post-1/", "our first post"), ("./", "the blog"), ("/contact", "contact")]),
        head='<base href="/blog/">',
    )
    routes["/contact"] = _page(
        "Contact",
        _links(
            [("mailto:shop@example.com", "mail"), ("tel:+10000000000", "phone"), ("/", "home")]
        ),
    )
    routes["/map"] = _page(
        "Image map",
        '<img src="/images/logo.png" usemap="#nav" alt="map">'
        '<map name="nav"><area shape="rect" coords="0,0,10,10" href="/shop/" alt="shop">'
        '<area shape="rect" coords="10,0,20,10" href="contact" alt="contact">'
        '<area shape="rect" coords="20,0,30,10" href="faq" alt="faq"></map>',
    )
    routes["/faq"] = _page("FAQ", "<p>Reachable only through the image map.</p>")
    routes["/links"] = _links_page

    for target in ("/private/", "/private/report-1", "/private/report-2"):
        routes[target] = _page("Private", "<p>robots.txt asks crawlers to stay out.</p>")

    routes["/old/a"] = redirect("/old/b", 301)
    routes["/old/b"] = redirect("c", 302)
    routes["/old/c"] = redirect("/new/home", 307)
    routes["/new/home"] = _page("New home", "<p>Reachable only through /old/a.</p>")
    routes["/loop/a"] = redirect("/loop/b", 302)
    routes["/loop/b"] = redirect("/loop/a", 302)

    routes["/broken"] = Response(status=500, body=b"<!doctype html><title>Oops</title>")
    routes["/flaky"] = [
        Response(status=503, body=b"<!doctype html><title>Busy</title>"),
        _page("Flaky", "<p>Worked the second time.</p>"),
    ]
    routes["/slow"] = Response(
        body=_html("Slow", "<p>Took a while.</p>").encode(), delay=SLOW_DELAY
    )

    routes["/files/catalog.pdf"] = Response(
        body=b"%PDF-1.4\n% demo catalog\n%%EOF\n", content_type="application/pdf"
    )
    routes["/api/items.json"] = Response(
        body=json.dumps(
            {"items": [f"/shop/item/{i}" for i in range(1, min(n_items, 5) + 1)]}
        ).encode(),
        content_type="application/json",
    )
    routes["/images/logo.png"] = Response(
        body=b"\x89PNG\r\n\x1a\n" + bytes(24), content_type="image/png"
    )

    latin1 = _html(
        "Caf\u00e9 cr\u00e8me",
        "<p>Na\u00efve fa\u00e7ade, \u00bd price.</p>" + _links([("/latin1/more", "plus")]),
        head='<meta charset="iso-8859-1">',
    )
    routes["/latin1"] = Response(
        body=latin1.encode("iso-8859-1"), content_type="text/html; charset=iso-8859-1"
    )
    routes["/latin1/more"] = _page("More", "<p>Reachable only through /latin1.</p>")


# -- what a crawl should find --------------------------------------------------


@dataclass(frozen=True, slots=True)
class DemoExpectations:
    """What a complete crawl of a demo site from ``/`` records.

    ``urls``: distinct in-scope canonical URLs, one record each (the crawler's
    dedup rules). ``by_status``: final HTTP status per fetched URL (after
    retries; redirects count by their 3xx). ``robots``: URLs disallowed by
    robots.txt (recorded, never requested). ``requests``: HTTP requests for
    pages with the default ``RetryPolicy`` (robots.txt not included).
    ``external``: out-of-scope http(s) links seen (never requested).
    ``targets``: request targets (path and query) of every fetched URL.
    """

    urls: int
    by_status: Mapping[int, int]
    robots: int
    requests: int
    external: frozenset[str]
    targets: frozenset[str]


def demo_expectations(
    site: Site,
    base_url: str = "http://127.0.0.1:8000",
    *,
    user_agent: str = DEFAULT_USER_AGENT,
    retry: RetryPolicy | None = None,
) -> DemoExpectations:
    """Crawl ``site`` in-process, without sockets, as the engine would from ``/``.

    Uses the crawler's pure rules: ``extract_links`` for links (``<a>``,
    ``<area>``, ``<base>``, encodings), ``Scope`` of the start URL, the site's
    robots.txt, redirects resolved and deduplicated like links, sequence
    routes answered in turn with ``retry`` (default ``RetryPolicy()``).
    ``base_url`` stands in for the served origin (it reaches dynamic routes
    as the Host header).
    """
    retry = retry or RetryPolicy()
    start = canonicalize(base_url + "/")
    if start is None:
        raise ValueError(f"not an http(s) base URL: {base_url!r}")
    host = start.split("/")[2]
    scope = Scope([start])
    robots = _robots_policy(site, host, user_agent)
    seen = {start}
    queue = [start]
    statuses: Counter[int] = Counter()
    external: set[str] = set()
    targets: set[str] = set()
    disallowed = 0
    requests = 0

    def offer(url: str) -> None:
        if not scope.allows(url):
            external.add(url)
        elif url not in seen:
            seen.add(url)
            queue.append(url)

    for url in queue:
        if not robots.allows(url):
            disallowed += 1
            continue
        target = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
        targets.add(target)
        response, tries = _final_answer(site, target, host, retry)
        requests += tries
        statuses[response.status] += 1
        if response.status in _REDIRECTS:
            location = dict((k.lower(), v) for k, v in response.headers).get("location")
            resolved = resolve(location, url) if location else None
            if resolved is not None:
                offer(resolved)
        elif response.status < 400:
            for link in extract_links(response.body, url, response.content_type):
                offer(link)
    return DemoExpectations(
        urls=len(seen),
        by_status=dict(sorted(statuses.items())),
        robots=disallowed,
        requests=requests,
        external=frozenset(external),
        targets=frozenset(targets),
    )


def _request(target: str, host: str) -> SiteRequest:
    return SiteRequest(method="GET", target=target, headers={"host": host})


def _answer(site: Site, target: str, host: str, hit: int) -> Response:
    route = site.routes.get(target)
    if route is None:
        if site.fallback is not None:
            return site.fallback(_request(target, host))
        return Response(status=404)
    if isinstance(route, Response):
        return route
    if callable(route):
        return route(_request(target, host))
    return route[min(hit, len(route) - 1)]


def _final_answer(site: Site, target: str, host: str, retry: RetryPolicy) -> tuple[Response, int]:
    """The answer a retrying crawler ends with, and how many requests it took."""
    tries = 0
    while True:
        response = _answer(site, target, host, tries)
        tries += 1
        if tries > retry.retries or not retry.should_retry_status(response.status):
            return response, tries


def _robots_policy(site: Site, host: str, user_agent: str) -> RobotsPolicy:
    response = _answer(site, "/robots.txt", host, 0)
    if 200 <= response.status < 300:
        return RobotsPolicy.parse(response.body.decode("utf-8", "replace"), user_agent)
    return RobotsPolicy.allow_all()
