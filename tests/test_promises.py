"""What the README promises about scope, credentials, Crawl-delay and the
output file (issue #18, items 2, 3, 7 and 9), held to real servers on
127.0.0.1 through the command line. Every subprocess has a timeout.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Route, Site, page, redirect

from cli_helpers import run_cli

TEXT = "text/plain"


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def authority(server: SiteServer) -> str:
    return server.base_url.removeprefix("http://")


# -- 2: sitemaps are fetched only in scope --------------------------------------------

XML = "application/xml"
SITEMAP_NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def sitemap_index(*locs: str) -> Response:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return Response(body=f"<sitemapindex {SITEMAP_NS}>{entries}</sitemapindex>".encode(),
                    content_type=XML)  # fmt: skip


def urlset(*locs: str) -> Response:
    entries = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return Response(body=f"<urlset {SITEMAP_NS}>{entries}</urlset>".encode(), content_type=XML)


def test_sitemaps_out_of_scope_are_never_fetched(tmp_path: Path) -> None:
    """A ``Sitemap:`` line and a ``<sitemap><loc>`` pointing at another port
    (another service on the same machine: the SSRF) are skipped; the
    in-scope ones seed the crawl."""
    routes: dict[str, Route] = {}
    elsewhere_routes: dict[str, Route] = {}
    out = tmp_path / "out.jsonl"
    with serve_site(Site(routes)) as server, serve_site(Site(elsewhere_routes)) as elsewhere:
        other = elsewhere.base_url
        elsewhere_routes["/listed.xml"] = urlset(other + "/secret")
        elsewhere_routes["/nested.xml"] = urlset(other + "/secret")
        routes["/robots.txt"] = Response(
            body=(
                "User-agent: *\nDisallow:\n"
                f"Sitemap: {other}/listed.xml\n"
                f"Sitemap: http://ann:pw@{authority(server)}/index.xml\n"
            ).encode(),
            content_type=TEXT,
        )
        routes["/index.xml"] = sitemap_index(other + "/nested.xml", server.url("/pages.xml"))
        routes["/pages.xml"] = urlset(server.url("/orphan"), other + "/secret")
        routes["/"] = page()
        routes["/orphan"] = page()
        result = run_cli(server.url("/"), "--sitemaps", "-q", "-o", str(out))
        log = list(server.log)
        elsewhere_log = list(elsewhere.log)
    assert result.returncode == 0, result.stderr
    assert elsewhere_log == []
    assert sorted(e.target for e in log) == [
        "/",
        "/index.xml",
        "/orphan",
        "/pages.xml",
        "/robots.txt",
    ]
    assert [e.target for e in log if "authorization" in e.headers] == []
    assert sorted(str(r["url"]) for r in jsonl(out)) == [server.url("/"), server.url("/orphan")]


# -- 3: Crawl-delay is capped ------------------------------------------------------------


def test_a_huge_crawl_delay_is_capped_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # the summary table on one line per row
    out = tmp_path / "out.jsonl"
    site = Site(
        {
            "/robots.txt": Response(
                body=b"User-agent: *\nCrawl-delay: 99999999\n", content_type=TEXT
            ),
            "/": page("/a", "/b"),
            "/a": page(),
            "/b": page(),
        }
    )
    with serve_site(site) as server:
        result = run_cli(server.url("/"), "--max-crawl-delay", "0.25", "-o", str(out), timeout=30)
        log = [e for e in server.log if e.target != "/robots.txt"]
    assert result.returncode == 0, result.stderr
    assert sorted(e.target for e in log) == ["/", "/a", "/b"]
    gaps = [later.time - earlier.time for earlier, later in itertools.pairwise(log)]
    assert all(0.25 <= gap < 5 for gap in gaps), gaps
    assert len(jsonl(out)) == 3
    (row,) = [line for line in result.stderr.splitlines() if "Crawl-delay capped" in line]
    assert f"{authority(server)} asked for 99,999,999 s; waited --max-crawl-delay instead" in row


# -- 7: credentials in links are never sent, passwords never written ------------------


def test_links_with_userinfo_are_fetched_without_credentials(tmp_path: Path) -> None:
    routes: dict[str, Route] = {}
    out = tmp_path / "out.jsonl"
    with serve_site(Site(routes)) as server:
        host = authority(server)
        routes["/"] = page(
            f"http://ann:hunter2@{host}/private",
            f"//tok3n@{host}/token",
            "/moved",
            "/bad",
        )
        routes["/moved"] = redirect(f"http://bob:swordfish@{host}/target")
        routes["/bad"] = redirect("ftp://carl:opensesame@files.example/x")
        for target in ("/private", "/token", "/target"):
            routes[target] = page()
        result = run_cli(server.url("/"), "--ignore-robots", "-q", "-o", str(out))
        log = list(server.log)
    assert result.returncode == 0, result.stderr
    assert sorted(entry.target for entry in log) == [
        "/",
        "/bad",
        "/moved",
        "/private",
        "/target",
        "/token",
    ]
    assert [e.target for e in log if "authorization" in e.headers] == []
    text = out.read_text()
    for secret in ("hunter2", "tok3n", "swordfish", "opensesame"):
        assert secret not in text and secret not in result.stderr
    records = {r["url"]: r for r in jsonl(out)}
    assert records[server.url("/moved")]["redirect"] == server.url("/target")
    bad = records[server.url("/bad")]["error"]
    assert bad == {
        "kind": "bad_redirect",
        "message": "unusable Location: 'ftp://carl:***@files.example/x'",
    }
    assert all("@" not in str(url) for url in records)


def test_a_start_url_with_credentials_is_refused_without_echoing_them(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("kept\n")
    with serve_site(Site({"/": page()})) as server:
        start = f"http://ann:hunter2@{authority(server)}/"
        result = run_cli(start, "-q", "-o", str(out))
        log = list(server.log)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"trio-crawl: error: start URL 'http://ann:***@{authority(server)}/' holds a user"
        " name or password: credentials in URLs are never sent; give them with --user and"
        " --password\n"
    )
    assert log == [] and out.read_text() == "kept\n"
