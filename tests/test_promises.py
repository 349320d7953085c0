"""What the manual (docs/manual/) promises about scope, credentials, Crawl-delay and the
output file (issue #18, items 2, 3, 7 and 9), held to real servers on
127.0.0.1 through the command line. Every subprocess has a timeout.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from test_cli_exits import HANDLER_MODULE, dead_port, run_in

from trio_crawl.outputs.jsonl import OutputFile
from trio_crawl.outputs.warc import WarcWriter, iter_members
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Route, Site, page, redirect

from cli_helpers import records_in, run_cli

TEXT = "text/plain"


def jsonl(path: Path) -> list[dict[str, object]]:
    return records_in(path.read_text())


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


# -- 9: a crawl that reaches no start URL leaves the output as it was ------------------------


def small_site() -> Site:
    return Site({"/": page("/a", "/b"), "/a": page("/"), "/b": page()})


@pytest.mark.parametrize("robots", [True, False])
def test_no_start_url_reached_leaves_the_outputs_as_they_were(
    tmp_path: Path, robots: bool
) -> None:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    out, items, warc = tmp_path / "keep.jsonl", tmp_path / "items.jsonl", tmp_path / "a.warc.gz"
    outputs = ["-o", str(out), "--handler", "my_handlers:titles", "--items", str(items)]
    outputs += ["--warc", str(warc)]
    with serve_site(small_site()) as server:
        first = run_in(tmp_path, server.url("/"), "-q", "--ignore-robots", *outputs)
    assert first.returncode == 0, first.stderr
    kept, kept_items, kept_warc = out.read_bytes(), items.read_bytes(), warc.read_bytes()
    assert len(kept.splitlines()) == 3 and len(kept_items.splitlines()) == 3
    assert len(list(iter_members(warc))) == 7  # a warcinfo, then a response and a request a page
    args = [f"http://127.0.0.1:{dead_port()}/", "--timeout", "5", *outputs]
    result = run_in(tmp_path, *args, *([] if robots else ["--ignore-robots"]))
    assert result.returncode == 4, result.stderr
    assert out.read_bytes() == kept and items.read_bytes() == kept_items
    assert warc.read_bytes() == kept_warc
    assert "trio-crawl report" not in result.stderr  # no hint to report on the old file


def test_a_crawl_that_reaches_a_start_url_replaces_the_output(tmp_path: Path) -> None:
    """The records of unreachable start URLs wait until another start URL
    answers; then the old content goes and they are written first."""
    out = tmp_path / "out.jsonl"
    out.write_text('{"url": "http://old.example/"}\n' * 50)
    dead = f"http://127.0.0.1:{dead_port()}/"
    routes: dict[str, Route] = {"/a": page(), "/b": page()}
    with serve_site(Site(routes)) as server:
        # The live start URL answers only after the dead one has failed.
        routes["/"] = Response(body=page("/a", "/b").body, delay=0.5)
        result = run_cli(
            dead, server.url("/"), "-q", "-o", str(out), "--ignore-robots", "--retries", "0"
        )
    assert result.returncode == 0, result.stderr
    records = jsonl(out)
    assert [r["url"] for r in records[:2]] == [dead, server.url("/")]
    assert sorted(str(r["url"]) for r in records[2:]) == [server.url("/a"), server.url("/b")]
    assert records[0]["error"] is not None and records[0]["error"]["kind"] == "connect"  # type: ignore[index]


def test_a_new_output_gets_the_records_of_a_crawl_that_reached_nothing(tmp_path: Path) -> None:
    out = tmp_path / "new.jsonl"
    dead = f"http://127.0.0.1:{dead_port()}/"
    result = run_cli(dead, "-q", "-o", str(out), "--ignore-robots", "--timeout", "5")
    assert result.returncode == 4, result.stderr
    assert [r["url"] for r in jsonl(out)] == [dead]


def test_a_deferred_warc_start_leaves_the_file_until_the_first_record(tmp_path: Path) -> None:
    path = tmp_path / "a.warc.gz"
    path.write_bytes(b"an earlier archive")
    WarcWriter.open(path, info={"crawl": "two"}, append=False, defer_start=True).close()
    assert path.read_bytes() == b"an earlier archive"
    with WarcWriter.open(path, info={"crawl": "two"}, append=False, defer_start=True) as writer:
        writer.write_metadata("http://h.example/", {"note": "x"})
    members = list(iter_members(path))
    assert len(members) == 2 and members[0][0] == 0  # a warcinfo, then the metadata
    assert b"an earlier archive" not in path.read_bytes()


def test_a_held_output_keeps_its_content_until_commit(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"old 1\nold 2\n")
    output = OutputFile.open(str(path))
    output.begin(append=False, hold=True)
    assert output.holding and output.write(b"new 1\n")
    assert path.read_bytes() == b"old 1\nold 2\n"
    output.commit()
    assert not output.holding and output.write(b"new 2\n")
    output.close()
    assert path.read_bytes() == b"new 1\nnew 2\n"

    for drop in (True, False):  # never committed: the file stays as it was
        output = OutputFile.open(str(path))
        output.begin(append=False, hold=True)
        output.write(b"lost\n")
        if drop:
            output.drop_held()
        output.close()
        assert path.read_bytes() == b"new 1\nnew 2\n" and output.kept_old

    empty = tmp_path / "empty.jsonl"
    empty.touch()
    output = OutputFile.open(str(empty))
    output.begin(append=False, hold=True)  # nothing to keep: written at once
    assert not output.holding and output.write(b"x\n")
    assert empty.read_bytes() == b"x\n"
    output.close()
