"""Sitemap parsing (``engine/sitemap_parse.py``): formats, gzip, limits, hostile XML.
No I/O but files."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.engine.sitemap_parse import MAX_SITEMAP_BYTES, MAX_SITEMAP_URLS, parse_sitemap
from trio_crawl.errors import SitemapError

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str, ns: str = NS) -> bytes:
    entries = "".join(f"<url><loc>{loc}</loc><lastmod>2024-01-01</lastmod></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>{entries}</urlset>'.encode()


def test_urlset() -> None:
    body = urlset("https://a.test/", "https://a.test/b?x=1&amp;y=2", "  https://a.test/c\n ")
    assert parse_sitemap(body) == (
        ["https://a.test/", "https://a.test/b?x=1&y=2", "https://a.test/c"],
        [],
    )


def test_sitemap_index() -> None:
    body = (
        f"<sitemapindex {NS}>"
        "<sitemap><loc>https://a.test/s1.xml</loc><lastmod>2024-01-01</lastmod></sitemap>"
        "<sitemap><loc>https://a.test/s2.xml.gz</loc></sitemap>"
        "</sitemapindex>"
    ).encode()
    assert parse_sitemap(body) == ([], ["https://a.test/s1.xml", "https://a.test/s2.xml.gz"])


def test_missing_or_odd_namespace_and_prefixes() -> None:
    expected: tuple[list[str], list[str]] = (["https://a.test/x"], [])
    assert parse_sitemap(urlset("https://a.test/x", ns="")) == expected
    assert parse_sitemap(urlset("https://a.test/x", ns='xmlns="http://wrong.test/"')) == expected
    prefixed = (
        b'<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sm:url><sm:loc>https://a.test/x</sm:loc></sm:url></sm:urlset>"
    )
    assert parse_sitemap(prefixed) == expected


def test_filters_and_deduplicates() -> None:
    body = urlset(
        "https://a.test/1",
        "/relative",
        "ftp://a.test/file",
        "javascript:alert(1)",
        "",
        "https://a.test/has space",
        "https://a.test/1",
        "HTTP://A.test/2",
    )
    assert parse_sitemap(body) == (["https://a.test/1", "HTTP://A.test/2"], [])


def test_gzip_detected_by_magic_bytes() -> None:
    body = urlset(*(f"https://a.test/{i}" for i in range(3)))
    assert parse_sitemap(gzip.compress(body)) == parse_sitemap(body)


def test_corrupt_and_truncated_gzip() -> None:
    packed = gzip.compress(urlset("https://a.test/"))
    with pytest.raises(SitemapError, match=r"^corrupt gzip sitemap: truncated stream$"):
        parse_sitemap(packed[: len(packed) // 2])
    with pytest.raises(SitemapError, match=r"^corrupt gzip sitemap: "):
        parse_sitemap(packed[:10] + b"\xff" * 40)


def test_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * (MAX_SITEMAP_BYTES + 10), compresslevel=9)
    assert len(bomb) < 100_000
    with pytest.raises(SitemapError, match=r"^sitemap larger than 50000000 bytes uncompressed$"):
        parse_sitemap(bomb)


def test_uncompressed_size_limit() -> None:
    with pytest.raises(SitemapError, match=r"^sitemap larger than 50000000 bytes$"):
        parse_sitemap(b"<urlset>" + b" " * MAX_SITEMAP_BYTES)


def test_url_count_limit() -> None:
    body = urlset(*(f"https://a.test/{i}" for i in range(MAX_SITEMAP_URLS + 5)))
    pages, _ = parse_sitemap(body)
    assert len(pages) == MAX_SITEMAP_URLS
    assert pages[-1] == f"https://a.test/{MAX_SITEMAP_URLS - 1}"


def test_plain_text_sitemap() -> None:
    body = b"\xef\xbb\xbfhttps://a.test/1\r\n\nhttps://a.test/2\nnot a url\nhttps://a.test/1\n"
    assert parse_sitemap(body) == (["https://a.test/1", "https://a.test/2"], [])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<!doctype html><html><body>Not found</body></html>", r"^not a sitemap: "),
        (b"<html><body>Not found</body></html>", r"^not a sitemap: root element <html>$"),
        (b"<rss><channel/></rss>", r"^not a sitemap: root element <rss>$"),
        (b"just words", r"^not a sitemap: neither XML nor a list of URLs$"),
        (b"", r"^not a sitemap: neither XML nor a list of URLs$"),
        (b"<", r"^not a sitemap"),
    ],
)
def test_not_a_sitemap(body: bytes, message: str) -> None:
    with pytest.raises(SitemapError, match=message):
        parse_sitemap(body)


def test_empty_urlset_is_valid() -> None:
    assert parse_sitemap(f"<urlset {NS}></urlset>".encode()) == ([], [])


def test_malformed_xml_keeps_what_it_read() -> None:
    unescaped = f"<urlset {NS}><url><loc>https://a.test/?a=1&b=2</loc></url></urlset>\n"
    assert parse_sitemap(unescaped.encode()) == (["https://a.test/?a=1&b=2"], [])
    # Cut short: the last URL may be cut too, so it is dropped.
    body = f"<urlset {NS}><url><loc>https://a.test/1</loc></url><url><loc>https://a.t".encode()
    assert parse_sitemap(body) == (["https://a.test/1"], [])
    index = b"<sitemapindex><sitemap><loc>https://a.test/1.xml</loc></sitemap></sitemapindex >"
    assert parse_sitemap(index) == ([], ["https://a.test/1.xml"])


def test_billion_laughs_is_not_expanded() -> None:
    levels = ['<!ENTITY lol0 "lol">']
    for i in range(1, 10):
        levels.append(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">')
    body = (
        '<?xml version="1.0"?><!DOCTYPE urlset [' + "".join(levels) + "]>"
        f"<urlset {NS}><url><loc>https://a.test/&lol9;</loc></url>"
        "<url><loc>https://a.test/plain</loc></url></urlset>"
    ).encode()
    started = time.perf_counter()
    pages, sitemaps = parse_sitemap(body)
    assert time.perf_counter() - started < 1.0
    assert "lollol" not in "".join(pages)
    assert sitemaps == []


def test_external_entities_and_dtds_are_not_loaded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("https://secret.test/leaked")
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY inject "https://secret.test/from-dtd">')
    body = (
        f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "{dtd.as_uri()}" '
        f'[<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>'
        f"<urlset {NS}><url><loc>&xxe;</loc></url><url><loc>&inject;</loc></url>"
        "<url><loc>https://a.test/ok</loc></url></urlset>"
    ).encode()
    assert parse_sitemap(body) == (["https://a.test/ok"], [])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_lists_or_sitemap_error(body: bytes) -> None:
    try:
        pages, sitemaps = parse_sitemap(body)
    except SitemapError:
        return
    assert all(u.lower().startswith(("http://", "https://")) for u in pages + sitemaps)


@given(st.lists(st.from_regex(r"https://a\.test/[a-z0-9/]{0,20}", fullmatch=True), max_size=20))
def test_urlset_round_trip(urls: list[str]) -> None:
    assert parse_sitemap(urlset(*urls)) == (list(dict.fromkeys(urls)), [])
    assert parse_sitemap(gzip.compress(urlset(*urls))) == (list(dict.fromkeys(urls)), [])
