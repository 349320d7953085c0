"""``--include`` / ``--exclude`` / ``--no-parent`` (``CrawlConfig.include``,
``exclude``, ``no_parent``): exactly which URLs a real local server is asked
for, through the library and the CLI; resuming with other filters refused
(``--state``, ``--redis``); bad patterns; the pure ``UrlFilter`` under
hypothesis. Every crawl is bounded by ``trio.fail_after`` or a subprocess
timeout."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import trio_crawl
from trio_crawl import ConfigError, CrawlConfig, CrawlRecord, run_crawl
from trio_crawl.core.filters import FilteredScope, UrlFilter, parent_root
from trio_crawl.core.scope import Scope
from trio_crawl.testing import Response, Site, SiteRequest, page, redirect, serve_site

import redis_fixture
from cli_helpers import run_cli as cli

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

PDF = Response(body=b"%PDF-1.4", content_type="application/pdf")
IMG = Response(body=b"\x89PNG....", content_type="image/png")
SITEMAP = ("/a/b/listed.html", "/other/listed.html")
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def sitemap(request: SiteRequest) -> Response:
    base = f"http://{request.headers['host']}"
    locs = "".join(f"<url><loc>{base}{p}</loc></url>" for p in SITEMAP)
    return Response(
        body=f'<?xml version="1.0"?><urlset xmlns="{SITEMAP_NS}">{locs}</urlset>'.encode(),
        content_type="application/xml",
    )


def filter_site() -> Site:
    """A site with parents above /a/b/, siblings that share its prefix
    (/a/bb/, /a/b), private and .pdf paths, a redirect out of /a/b/ and a
    sitemap listing pages inside and outside it."""
    return Site(
        {
            "/robots.txt": Response(body=b"User-agent: *\nAllow: /\n", content_type="text/plain"),
            "/sitemap.xml": sitemap,
            "/": page("/a/b/", "/other/"),
            "/a/": page("/a/b/", "/a/bb/"),
            "/a/b": page("/a/b/", "/"),
            "/a/b/": page(
                "c.html",
                "sub/",
                "private/x.html",
                "page.pdf",
                "?sort=1",
                "moved",
                "/a/",
                "/a/bb/",
                "/a/b",
                "/",
            ),
            "/a/b/?sort=1": page(),
            "/a/b/c.html": page(
                extra='<img src="/static/logo.png"><img src="/a/b/private/i.png">'
                '<img src="/a/b/img-moved">'
            ),
            "/a/b/sub/": page("deep.html", "/a/b/sub/../../"),
            "/a/b/sub/deep.html": page(),
            "/a/b/private/x.html": page(),
            "/a/b/page.pdf": PDF,
            "/a/b/moved": redirect("/other/landing"),
            "/hop": redirect("/a/b/moved"),
            "/a/b/listed.html": page(),
            "/a/bb/": page(),
            "/other/": page(),
            "/other/landing": page(),
            "/other/listed.html": page(),
            "/static/logo.png": IMG,
            "/a/b/img-moved": redirect("/static/moved.png"),
            "/static/moved.png": IMG,
            "/a/b/private/i.png": IMG,
        }
    )


ALL_BELOW_AB = {
    "/a/b/",
    "/a/b/?sort=1",
    "/a/b/c.html",
    "/a/b/sub/",
    "/a/b/sub/deep.html",
    "/a/b/private/x.html",
    "/a/b/page.pdf",
    "/a/b/moved",
}
EVERYTHING = ALL_BELOW_AB | {"/", "/a/", "/a/b", "/a/bb/", "/other/", "/other/landing"}


async def fetched(start: str, **options: Any) -> set[str]:
    """The targets the server was asked for (robots.txt and sitemaps aside)
    in a crawl of ``start``; every one has exactly one record."""
    records: list[CrawlRecord] = []
    with serve_site(filter_site()) as server:
        with trio.fail_after(60):
            await run_crawl(server.url(start), on_record=records.append, **options)
        targets = [t for t in server.targets() if t not in ("/robots.txt", "/sitemap.xml")]
    assert len(targets) == len(set(targets))
    assert sorted(r.url.removeprefix(server.base_url) for r in records) == sorted(targets)
    return set(targets)


async def test_without_filters_everything_reachable_is_fetched() -> None:
    assert await fetched("/a/b/") == EVERYTHING


async def test_no_parent_stays_in_the_start_directory() -> None:
    # /a/bb/ shares the prefix "/a/b" but is not below /a/b/; /a/b is its parent's.
    assert await fetched("/a/b/", no_parent=True) == ALL_BELOW_AB


async def test_no_parent_from_a_file_in_the_directory_is_the_same() -> None:
    got = await fetched("/a/b/c.html", no_parent=True)
    assert got == {"/a/b/c.html"}  # it links nowhere; the point is what it admits:
    url_filter = CrawlConfig.from_options(
        start_urls=["http://h/a/b/c.html"], no_parent=True
    ).url_filter()
    assert url_filter.allows("http://h/a/b/sub/") and not url_filter.allows("http://h/a/bb/")


async def test_no_parent_without_trailing_slash_means_the_parent_directory() -> None:
    # /a/b is a file in /a/: /a/, /a/bb/ and all of /a/b/ are in; / and /other/ not.
    got = await fetched("/a/b", no_parent=True)
    assert got == ALL_BELOW_AB | {"/a/b", "/a/", "/a/bb/"}


async def test_include_keeps_only_matching_links_but_the_start_url_is_fetched() -> None:
    got = await fetched("/a/b/", include=[r"/sub/"])
    assert got == {"/a/b/", "/a/b/sub/", "/a/b/sub/deep.html"}


async def test_several_includes_are_alternatives() -> None:
    got = await fetched("/a/b/", include=[r"/sub/", r"\.pdf$"])
    assert got == {"/a/b/", "/a/b/sub/", "/a/b/sub/deep.html", "/a/b/page.pdf"}


async def test_exclude_drops_matching_links_even_the_start_urls_own_pattern() -> None:
    # The start URL matches the exclude (it has /a/b/): it is fetched anyway.
    got = await fetched("/a/b/", exclude=[r"/a/b/", r"^http://[^/]+/other/"])
    assert got == {"/a/b/", "/", "/a/", "/a/b", "/a/bb/"}


async def test_exclude_wins_over_include() -> None:
    got = await fetched("/a/b/", include=[r"/a/b/"], exclude=[r"private", r"\?"])
    assert got == ALL_BELOW_AB - {"/a/b/private/x.html", "/a/b/?sort=1"}


async def test_filters_and_no_parent_combine() -> None:
    got = await fetched("/a/b", no_parent=True, exclude=[r"/sub/"], include=[r"/a/b"])
    # include /a/b keeps /a/b..., no-parent keeps /a/..., exclude drops /sub/.
    assert got == (ALL_BELOW_AB | {"/a/b", "/a/bb/"}) - {"/a/b/sub/", "/a/b/sub/deep.html"}


async def test_a_links_redirect_target_is_filtered() -> None:
    records: list[CrawlRecord] = []
    with serve_site(filter_site()) as server:
        with trio.fail_after(60):
            await run_crawl(server.url("/a/b/"), on_record=records.append, no_parent=True)
        targets = server.targets()
    assert "/a/b/moved" in targets and "/other/landing" not in targets
    (record,) = [r for r in records if r.url.endswith("/a/b/moved")]
    assert record.status == 301 and record.error is not None
    assert record.error.kind == "out_of_scope_redirect"


@pytest.mark.parametrize("state", [False, True])
async def test_a_start_urls_redirects_are_followed_whatever_the_filters(
    state: bool, tmp_path: Path
) -> None:
    # /hop -> /a/b/moved -> /other/landing: all three are the start URL.
    options: dict[str, Any] = {"state": str(tmp_path / "crawl.db")} if state else {}
    got = await fetched("/hop", exclude=["moved", "landing"], no_parent=True, **options)
    assert got == {"/hop", "/a/b/moved", "/other/landing"}


async def test_sitemap_seeds_are_filtered() -> None:
    got = await fetched("/a/b/sub/deep.html", sitemaps=True, no_parent=True)
    assert got == {"/a/b/sub/deep.html"}  # /a/b/listed.html is above /a/b/sub/
    got = await fetched("/a/b/sub/deep.html", sitemaps=True, include=[r"listed"])
    assert got == {"/a/b/sub/deep.html", "/a/b/listed.html", "/other/listed.html"}
    got = await fetched("/a/b/", sitemaps=True, no_parent=True, include=["listed"])
    assert got == {"/a/b/", "/a/b/listed.html"}


async def test_requisites_of_a_followed_page_are_fetched_whatever_the_filters() -> None:
    got = await fetched(
        "/a/b/", no_parent=True, include=[r"c\.html"], exclude=["private"], page_requisites=True
    )
    # /static/ is above /a/b/, private is excluded, neither matches the include.
    # A requisite that moved above /a/b/ is followed there too.
    assert got == {
        "/a/b/",
        "/a/b/c.html",
        "/static/logo.png",
        "/a/b/private/i.png",
        "/a/b/img-moved",
        "/static/moved.png",
    }


async def test_handler_requests_are_filtered() -> None:
    async def follow_all(p: trio_crawl.Page) -> Any:
        for link in p.links():
            request = p.follow(link)
            if request is not None:
                yield request

    got = await fetched("/a/b/", handler=follow_all, exclude=["private", "pdf", r"\?"])
    assert got == ALL_BELOW_AB - {"/a/b/private/x.html", "/a/b/page.pdf", "/a/b/?sort=1"} | {
        "/",
        "/a/",
        "/a/b",
        "/a/bb/",
        "/other/",
        "/other/landing",
    }


async def test_open_crawler_with_config_fields() -> None:
    with serve_site(filter_site()) as server:
        with trio.fail_after(60):
            async with trio_crawl.open_crawler(
                server.url("/a/b/"), no_parent=True, exclude=["sub", "moved"]
            ) as crawl:
                urls = {r.url.removeprefix(server.base_url) async for r in crawl}
    assert urls == ALL_BELOW_AB - {"/a/b/sub/", "/a/b/sub/deep.html", "/a/b/moved"}


def test_no_parent_is_per_site_and_per_start_url() -> None:
    f = UrlFilter(
        no_parent=True,
        start_urls=["http://h/a/b/", "http://h/x/y", "http://h:8080/p/", "https://k/"],
    )
    assert f.allows("https://h/a/b/c")  # the http -> https upgrade is the same site
    assert f.allows("http://h/x/z/") and not f.allows("http://h/y/")
    assert f.allows("http://h:8080/p/q") and not f.allows("http://h:8080/a/b/")
    assert f.allows("http://h:9090/anything")  # another port: no start URL there
    assert f.allows("https://k/anything") and f.allows("http://sub.h/anything")
    assert not f.allows("http://h/a/b?q=/a/b/")  # the query is not the path


def test_parent_root_edge_cases() -> None:
    assert parent_root("http://h/") == ("h", "/")
    assert parent_root("http://h/a/b") == ("h", "/a/")
    assert parent_root("http://h/a/b/") == ("h", "/a/b/")
    assert parent_root("http://u:p@h:81/a/b/index.html?x=/y/") == ("h:81", "/a/b/")
    assert parent_root("http://[::1]:8080/a//b") == ("[::1]:8080", "/a//")


def test_bad_regex_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^include=: bad regular expression '\(': .*$"):
        CrawlConfig.from_options(start_urls=["http://h/"], include=["("])
    with pytest.raises(ConfigError, match=r"^exclude=: bad regular expression"):
        CrawlConfig.from_options(start_urls=["http://h/"], exclude=["ok", "[z-a]"])
    with pytest.raises(ConfigError, match="sequence of patterns"):
        CrawlConfig.from_options(start_urls=["http://h/"], include="abc")


def test_no_filters_keep_the_plain_scope() -> None:
    assert type(CrawlConfig.from_options(start_urls=["http://h/"]).scope()) is Scope
    scope = CrawlConfig.from_options(start_urls=["http://h/a/"], no_parent=True).scope()
    assert isinstance(scope, FilteredScope)
    assert not scope.allows("http://h/") and scope.allows_unfiltered("http://h/")
    assert not scope.allows_unfiltered("http://elsewhere/")


# -- the CLI --------------------------------------------------------------------


def cli_targets(tmp_path: Path, start: str, *options: str) -> set[str]:
    out = tmp_path / "out.jsonl"
    with serve_site(filter_site()) as server:
        result = cli(server.url(start), "-o", str(out), "-q", *options)
        assert result.returncode == 0, result.stderr
        targets = {t for t in server.targets() if t not in ("/robots.txt", "/sitemap.xml")}
    urls = {json.loads(line)["url"].removeprefix(server.base_url) for line in out.open()}
    assert urls == targets
    return targets


def test_cli_options(tmp_path: Path) -> None:
    assert cli_targets(tmp_path, "/a/b/", "--no-parent") == ALL_BELOW_AB
    assert cli_targets(
        tmp_path, "/a/b/", "--include", "/a/b/", "--exclude", "private", "--exclude", r"\?"
    ) == ALL_BELOW_AB - {"/a/b/private/x.html", "/a/b/?sort=1"}
    assert cli_targets(tmp_path, "/a/b/", "--include", "sub/", "--include", "pdf") == {
        "/a/b/",
        "/a/b/sub/",
        "/a/b/sub/deep.html",
        "/a/b/page.pdf",
    }


@pytest.mark.parametrize(
    ("option", "pattern"), [("--include", "a(b"), ("--exclude", "*x"), ("--include", "(?P<")]
)
def test_cli_bad_regex_is_one_line_and_exit_2(option: str, pattern: str) -> None:
    result = cli("http://127.0.0.1:9/", option, pattern)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"trio-crawl: error: {option}: bad regular expression ")


# -- resuming with other filters is refused --------------------------------------


async def test_state_resume_with_other_filters_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "crawl.db")
    with serve_site(filter_site()) as server:
        with trio.fail_after(60):
            await run_crawl(server.url("/a/b/"), state=db, no_parent=True, exclude=["x"])
            # The same filters (given in another order) resume.
            await run_crawl(server.url("/a/b/"), state=db, exclude=["x"], no_parent=True)
            for other in ({"no_parent": True}, {"exclude": ["y"], "no_parent": True}, {}):
                with pytest.raises(trio_crawl.StateUsageError, match=r"\(filters differ\)"):
                    await run_crawl(server.url("/a/b/"), state=db, **other)


def test_cli_state_resume_with_other_filters_is_refused(tmp_path: Path) -> None:
    db, out = str(tmp_path / "crawl.db"), str(tmp_path / "out.jsonl")
    with serve_site(filter_site()) as server:
        first = cli(server.url("/a/b/"), "--state", db, "-o", out, "-q", "--include", "sub")
        assert first.returncode == 0, first.stderr
        again = cli(server.url("/a/b/"), "--state", db, "-o", out, "-q", "--include", "pdf")
        assert again.returncode == 2
        assert again.stderr.count("\n") == 1
        assert "holds a different crawl (filters differ)" in again.stderr
        forced = cli(
            server.url("/a/b/"), "--state", db, "-o", out, "-q", "--include", "pdf", "--force"
        )
        assert forced.returncode == 0, forced.stderr


def test_cli_seeds_give_no_parent_roots_too(tmp_path: Path) -> None:
    seeds, out = tmp_path / "seeds.txt", str(tmp_path / "out.jsonl")
    with serve_site(filter_site()) as server:
        seeds.write_text(server.url("/a/b/sub/") + "\n")
        result = cli("--seeds", str(seeds), "-o", out, "-q", "--no-parent")
        assert result.returncode == 0, result.stderr
        targets = {t for t in server.targets() if t != "/robots.txt"}
    assert targets == {"/a/b/sub/", "/a/b/sub/deep.html"}


def test_redis_join_with_other_filters_is_refused(
    redis_server: redis_fixture.RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    pytest.importorskip("coredis")
    out = str(tmp_path / "a.jsonl")
    with serve_site(filter_site()) as server:
        url = server.url("/a/b/")
        base = ("--redis", redis_server.url, "--crawl-id", crawl_id, "-q")
        first = cli(url, *base, "-o", out, "--no-parent")
        assert first.returncode == 0, first.stderr
        targets = {t for t in server.targets() if t != "/robots.txt"}
        assert targets == ALL_BELOW_AB
        other = cli(url, *base, "-o", out, "--exclude", "sub")
        assert other.returncode == 2
        assert other.stderr.count("\n") == 1
        assert "other settings (filters differ)" in other.stderr
        # Joining with no URL adopts the crawl's filters.
        joined = cli(*base, "-o", str(tmp_path / "b.jsonl"))
        assert joined.returncode == 0, joined.stderr
        # A start URL's redirects are followed whatever the filters, as in one process.
        before = len(server.targets())
        hop = ("--redis", redis_server.url, "--crawl-id", crawl_id + "-hop", "-q")
        result = cli(server.url("/hop"), *hop, "-o", str(tmp_path / "c.jsonl"), "--exclude", "o")
        assert result.returncode == 0, result.stderr
        later = {t for t in server.targets()[before:] if t != "/robots.txt"}
        assert later == {"/hop", "/a/b/moved", "/other/landing"}


# -- the pure filter --------------------------------------------------------------

segment = st.text(alphabet="abc.", min_size=1, max_size=3)
paths = st.lists(segment, max_size=4).map(lambda parts: "/" + "/".join(parts))
dirs = st.lists(segment, max_size=3).map(lambda parts: "/" + "".join(p + "/" for p in parts))
hosts = st.sampled_from(["h", "k", "h:81"])
urls = st.builds(lambda host, path: f"http://{host}{path}", hosts, paths)
patterns = st.sampled_from(["a", r"\.", "^http://k/", "b/c", "c$", "(?i)A", "x"])


@given(urls, st.lists(patterns, max_size=3), st.lists(patterns, max_size=3))
def test_include_exclude_rule(url: str, include: list[str], exclude: list[str]) -> None:
    got = UrlFilter(include=include, exclude=exclude).allows(url)
    included = not include or any(re.search(p, url) for p in include)
    excluded = any(re.search(p, url) for p in exclude)
    assert got == (included and not excluded)


@given(st.lists(st.tuples(hosts, paths), min_size=1, max_size=4), urls)
def test_no_parent_rule(starts: list[tuple[str, str]], url: str) -> None:
    start_urls = [f"http://{host}{path}" for host, path in starts]
    got = UrlFilter(no_parent=True, start_urls=start_urls).allows(url)
    site, path = url.removeprefix("http://").split("/", 1)
    roots = [
        p[: p.rfind("/") + 1] for host, p in starts if host == site
    ]  # the directory of each start URL on this site
    assert got == (not roots or any(("/" + path).startswith(r) for r in roots))


@given(st.lists(st.tuples(hosts, dirs), min_size=1, max_size=4), urls)
def test_a_start_url_and_everything_below_its_directory_pass(
    starts: list[tuple[str, str]], url: str
) -> None:
    start_urls = [f"http://{host}{d}" for host, d in starts]
    f = UrlFilter(no_parent=True, start_urls=start_urls)
    assert all(f.allows(s) for s in start_urls)
    host, d = starts[0]
    assert f.allows(f"http://{host}{d}x/y.html")


@given(urls)
def test_no_filters_pass_everything(url: str) -> None:
    f = UrlFilter()
    assert f.allows(url) and not f.active and f.identity() is None


@given(st.lists(st.tuples(hosts, paths), min_size=1, max_size=3), st.lists(urls, max_size=30))
def test_no_parent_answers_do_not_depend_on_the_cache(
    starts: list[tuple[str, str]], many: list[str]
) -> None:
    start_urls = [f"http://{host}{path}" for host, path in starts]
    shared = UrlFilter(no_parent=True, start_urls=start_urls, cache_size=3)
    for url in many + many:
        assert shared.allows(url) == UrlFilter(no_parent=True, start_urls=start_urls).allows(url)


async def test_a_sitemap_on_another_host_in_scope_is_read_whatever_the_filters() -> None:
    # The filters judge the pages a sitemap lists, not the sitemap files.
    listing = Site({"/sitemap.xml": sitemap, "/robots.txt": Response(status=404)})
    with serve_site(listing) as other:
        sitemap_url = other.url("/sitemap.xml").replace("127.0.0.1", "localhost")
        home = Site(
            {
                "/robots.txt": Response(
                    body=f"Sitemap: {sitemap_url}\n".encode(), content_type="text/plain"
                ),
                "/": page(),
            },
            fallback=lambda request: Response(status=404),
        )
        with serve_site(home) as start:
            with trio.fail_after(60):
                await run_crawl(
                    start.url("/"),
                    sitemaps=True,
                    allow_domains=["localhost"],
                    include=["listed"],
                )
            # Its listed pages (on localhost, in scope, matching) were admitted.
            assert "/sitemap.xml" in other.targets()
            assert {"/a/b/listed.html", "/other/listed.html"} <= set(other.targets())
