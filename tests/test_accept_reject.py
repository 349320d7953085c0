"""``--accept`` / ``--reject`` (``accept=`` / ``reject=``), wget's ``-A`` / ``-R``
(issue #25, item 5): the pure rules of ``core/filters.py``, what a real local
server is asked for, and the filters' identity (a ``--state`` crawl refuses
to resume with other lists)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from test_filters import EVERYTHING, cli_targets, fetched, filter_site

import trio_crawl
from trio_crawl import ConfigError, CrawlConfig, run_crawl
from trio_crawl.core.filters import UrlFilter, file_name, matches_file_list, suffix_list
from trio_crawl.testing import serve_site

import redis_fixture
from cli_helpers import run_cli

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id


def test_file_name_is_the_last_segment_decoded_without_query() -> None:
    assert file_name("http://h/a/b.pdf") == "b.pdf"
    assert file_name("http://h/a/b%20c.PDF?x=1.html") == "b c.PDF"
    assert file_name("http://h:8080/a/") == ""
    assert file_name("http://h") == ""


def test_suffix_lists_split_at_commas() -> None:
    assert suffix_list(["pdf,jpg", " png ", "pdf", ",,"]) == ("pdf", "jpg", "png")


def test_suffixes_and_patterns() -> None:
    assert matches_file_list("a.tar.gz", ["tar.gz"])
    assert matches_file_list("x.jpg", [".jpg"])
    assert not matches_file_list("x.JPG", ["jpg"])  # case-sensitive, as wget
    assert matches_file_list("zelazny-1967.txt", ["zelazny*196[0-9]*"])
    assert not matches_file_list("my-zelazny-1967.txt", ["zelazny*196[0-9]*"])
    assert matches_file_list("a.b", ["?.b"]) and not matches_file_list("ab.b", ["?.b"])


def test_accept_keeps_html_pages_and_directories() -> None:
    f = UrlFilter(accept=["pdf"])
    assert f.active
    assert f.allows("http://h/doc.pdf")
    assert f.allows("http://h/a/") and f.allows("http://h/a/page.html")
    assert f.allows("http://h/a/INDEX.HTM")
    assert not f.allows("http://h/a/pic.jpg") and not f.allows("http://h/a/noext")
    assert not f.allows("http://h/a/doc.pdf.bak")


def test_reject_spares_html_too_and_sees_no_query() -> None:
    f = UrlFilter(reject=["html", "*.gz", "php"])
    assert f.allows("http://h/a.html")  # read for links, as wget does
    assert not f.allows("http://h/x.tar.gz")
    assert not f.allows("http://h/index.php?page=2")
    assert f.allows("http://h/search?q=a.php")


def test_accept_and_reject_combine() -> None:
    f = UrlFilter(accept=["pdf"], reject=["draft*"])
    assert f.allows("http://h/final.pdf")
    assert not f.allows("http://h/draft-1.pdf")


names = st.text(alphabet="abcXYZ.-_", max_size=8)


@given(names, st.lists(st.text(alphabet="abc.", min_size=1, max_size=3), max_size=3))
def test_a_suffix_list_is_endswith(name: str, suffixes: list[str]) -> None:
    url = "http://h/d/" + name
    expected = (
        not name
        or name.lower().endswith((".html", ".htm"))
        or any(name.endswith(s) for s in suffixes)
    )
    if suffixes:
        assert UrlFilter(accept=suffixes).allows(url) == expected
        rejected = not name or name.lower().endswith((".html", ".htm"))
        assert UrlFilter(reject=suffixes).allows(url) == (rejected or not expected)


async def test_accept_walks_the_html_pages_to_the_files() -> None:
    got = await fetched("/a/b/", accept=["pdf"])
    # The PDF, every page for its links; not /a/b/moved or /a/b (no .html name).
    assert got == EVERYTHING - {"/a/b/moved", "/a/b", "/other/landing"}


async def test_reject_drops_the_files_and_keeps_reading_html() -> None:
    assert await fetched("/a/b/", reject=["pdf"]) == EVERYTHING - {"/a/b/page.pdf"}
    assert await fetched("/a/b/", reject=["html"]) == EVERYTHING


def test_one_string_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^accept= must be a sequence of patterns"):
        CrawlConfig.from_options(start_urls=["http://h/"], accept="pdf")


def test_cli_accept_takes_comma_lists(tmp_path: Path) -> None:
    got = cli_targets(tmp_path, "/a/b/", "--no-parent", "-A", "pdf,png", "--reject", "c.html")
    assert got == {
        "/a/b/",
        "/a/b/?sort=1",
        "/a/b/c.html",
        "/a/b/sub/",
        "/a/b/sub/deep.html",
        "/a/b/private/x.html",
        "/a/b/page.pdf",
    }


async def test_state_resume_with_other_lists_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "crawl.db")
    with serve_site(filter_site()) as server:
        with trio.fail_after(60):
            await run_crawl(server.url("/a/b/"), state=db, accept=["pdf", "png"])
            await run_crawl(server.url("/a/b/"), state=db, accept=["png", "pdf"])
            for other in ({"accept": ["pdf"]}, {"reject": ["pdf"]}, {}):
                with pytest.raises(trio_crawl.StateUsageError, match=r"\(filters differ\)"):
                    await run_crawl(server.url("/a/b/"), state=db, **other)  # type: ignore[arg-type]


def test_redis_join_adopts_the_lists_and_refuses_others(
    redis_server: redis_fixture.RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    pytest.importorskip("coredis")
    with serve_site(filter_site()) as server:
        base = ("--redis", redis_server.url, "--crawl-id", crawl_id, "-q", "--no-parent")
        first = run_cli(server.url("/a/b/"), *base, "-o", str(tmp_path / "a.jsonl"), "-A", "pdf")
        assert first.returncode == 0, first.stderr
        assert "/a/b/moved" not in server.targets() and "/a/b/page.pdf" in server.targets()
        other = run_cli(server.url("/a/b/"), *base, "-o", str(tmp_path / "b.jsonl"), "-R", "pdf")
        assert other.returncode == 2
        assert "other settings (filters differ)" in other.stderr
        joined = run_cli(*base[:-1], "-o", str(tmp_path / "c.jsonl"))  # adopts the lists
        assert joined.returncode == 0, joined.stderr
