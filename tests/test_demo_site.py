"""The demo site (``sites/demo.py``): deterministic, self-consistent, and servable.

Pure tests walk the ``Site`` data in-process; the one served test talks only
to the 127.0.0.1 server it starts (port 0), with short client timeouts.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import pytest

from trio_crawl.core.parse import extract_links
from trio_crawl.core.scope import Scope
from trio_crawl.core.url import resolve
from trio_crawl.robots.policy import RobotsPolicy
from trio_crawl.sites.demo import ROBOTS_TXT, demo_expectations, demo_site
from trio_crawl.sites.site import Response, Site, SiteRequest

BASE = "http://127.0.0.1:8000"
UA = "trio-crawl/0.1"


def render(site: Site, host: str = "127.0.0.1:8000") -> dict[str, tuple[Response, ...]]:
    """Every route's answers as plain data (functions called, sequences expanded)."""
    out: dict[str, tuple[Response, ...]] = {}
    for target, route in site.routes.items():
        if isinstance(route, Response):
            out[target] = (route,)
        elif callable(route):
            out[target] = (route(SiteRequest("GET", target, {"host": host})),)
        else:
            assert isinstance(route, Sequence)
            out[target] = tuple(route)
    return out


def test_same_seed_same_site() -> None:
    assert render(demo_site(120, seed=7)) == render(demo_site(120, seed=7))
    assert render(demo_site()) == render(demo_site(300, 0))


def test_other_seed_other_site() -> None:
    assert render(demo_site(120, seed=1)) != render(demo_site(120, seed=2))


def test_pages_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^pages must be >= 1, not 0$"):
        demo_site(0)


@pytest.mark.parametrize("pages", [1, 2, 19, 50, 300, 1000])
def test_size(pages: int) -> None:
    routes = len(demo_site(pages).routes)
    assert pages + 27 <= routes <= pages + 30 + pages // 10


@pytest.mark.parametrize(("pages", "seed"), [(1, 0), (40, 3), (300, 0)])
def test_every_internal_link_exists_except_the_deliberate_404(pages: int, seed: int) -> None:
    site = demo_site(pages, seed)
    rendered = render(site)
    scope = Scope([BASE + "/"])
    broken: set[tuple[str, str]] = set()
    for target, answers in rendered.items():
        url = BASE + target
        for response in answers:
            links = extract_links(response.body, url, response.content_type)
            location = dict(response.headers).get("Location")
            if location is not None:
                resolved = resolve(location, url)
                assert resolved is not None
                links.append(resolved)
            for link in links:
                if scope.allows(link):
                    linked = link[len(BASE) :]
                    if linked not in site.routes:
                        broken.add((target, linked))
    assert {linked for _, linked in broken} == {"/missing"}
    assert ("/", "/missing") in broken


def test_robots_txt() -> None:
    site = demo_site(10)
    robots = site.routes["/robots.txt"]
    assert isinstance(robots, Response)
    assert robots.content_type == "text/plain"
    policy = RobotsPolicy.parse(robots.body.decode(), UA)
    assert robots.body.decode() == ROBOTS_TXT
    assert policy.crawl_delay == 0.0
    assert not policy.allows(BASE + "/private/")
    assert not policy.allows(BASE + "/private/report-1")
    assert policy.allows(BASE + "/privateer")
    assert policy.allows(BASE + "/shop/")


def test_traps_are_there() -> None:
    site = demo_site(10)
    routes = site.routes
    chain = []
    for target in ("/old/a", "/old/b", "/old/c"):
        hop = routes[target]
        assert isinstance(hop, Response)
        chain.append((target, dict(hop.headers)["Location"], hop.status))
    assert chain == [("/old/a", "/old/b", 301), ("/old/b", "c", 302), ("/old/c", "/new/home", 307)]
    flaky = routes["/flaky"]
    assert isinstance(flaky, list)
    assert [r.status for r in flaky] == [503, 200]
    slow = routes["/slow"]
    assert isinstance(slow, Response)
    assert slow.delay == 0.3
    broken = routes["/broken"]
    assert isinstance(broken, Response)
    assert broken.status == 500
    latin1 = routes["/latin1"]
    assert isinstance(latin1, Response)
    assert latin1.content_type == "text/html; charset=iso-8859-1"
    with pytest.raises(UnicodeDecodeError):
        latin1.body.decode("utf-8")
    assert "Caf\u00e9" in latin1.body.decode("iso-8859-1")
    types = {
        t: r.content_type
        for t, r in routes.items()
        if isinstance(r, Response) and r.content_type and "html" not in r.content_type
    }
    assert types == {
        "/robots.txt": "text/plain",
        "/files/catalog.pdf": "application/pdf",
        "/api/items.json": "application/json",
        "/images/logo.png": "image/png",
    }


def test_links_page_uses_the_host_header() -> None:
    page = render(demo_site(5), host="127.0.0.1:4321")["/links"][0]
    links = extract_links(page.body, "http://127.0.0.1:4321/links", page.content_type)
    assert "http://127.0.0.1:4321/shop/item/1" in links
    assert "http://127.0.0.1:4321/blog/" in links
    assert "http://127.0.0.1:4321/contact" in links


def test_expectations_for_the_default_site() -> None:
    site = demo_site()
    expected = demo_expectations(site)
    assert expected.urls == 348 == len(site.routes)
    assert dict(expected.by_status) == {200: 338, 301: 1, 302: 3, 307: 1, 404: 1, 500: 1}
    assert expected.robots == 3
    assert expected.requests == 346
    assert expected.external == {
        "https://example.com/",
        "http://example.org/catalog?from=demo",
        "https://www.example.net/blog/",
        "http://example.net/protocol-relative",
    }
    # Pages reachable only one way were found that way.
    for target in ("/faq", "/new/home", "/latin1/more", "/blog/post-1/", "/shop/?page=1"):
        assert target in expected.targets
    assert not any(t.startswith("/private/") for t in expected.targets)


@pytest.mark.parametrize(("pages", "seed"), [(1, 0), (7, 1), (64, 2), (250, 9)])
def test_every_route_but_robots_is_reached(pages: int, seed: int) -> None:
    site = demo_site(pages, seed)
    expected = demo_expectations(site)
    assert expected.urls == len(site.routes)
    assert expected.targets | {
        "/robots.txt",
        "/private/",
        "/private/report-1",
        "/private/report-2",
    } == set(site.routes) | {"/missing"}


SERVER_MISSING = importlib.util.find_spec("trio_crawl.sites.server") is None


@pytest.mark.skipif(SERVER_MISSING, reason="trio_crawl.sites.server is not written yet")
@pytest.mark.timeout(30)
def test_served_over_http() -> None:
    import httpx2

    from trio_crawl.sites.server import serve_site

    with serve_site(demo_site(30)) as server, httpx2.Client(timeout=5.0) as client:
        home = client.get(server.url("/"))
        assert home.status_code == 200
        assert "Demo shop and blog" in home.text
        robots = client.get(server.url("/robots.txt"))
        assert robots.text == ROBOTS_TXT
        assert robots.headers["content-type"].startswith("text/plain")
        links = client.get(server.url("/links"))
        assert f'href="{server.base_url}/shop/item/1"' in links.text
        assert [client.get(server.url("/flaky")).status_code for _ in range(3)] == [503, 200, 200]
        hop = client.get(server.url("/loop/a"))
        assert (hop.status_code, hop.headers["location"]) == (302, "/loop/b")
        assert client.get(server.url("/missing")).status_code == 404
        latin1 = client.get(server.url("/latin1"))
        assert latin1.text.startswith("<!doctype html>")
        assert "Caf\u00e9" in latin1.text  # decoded with the header's charset
        assert server.targets() == [
            "/",
            "/robots.txt",
            "/links",
            "/flaky",
            "/flaky",
            "/flaky",
            "/loop/a",
            "/missing",
            "/latin1",
        ]
