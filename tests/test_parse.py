"""Link extraction on its own: bytes in, canonical links out. No I/O.

Each rule of ``trio_crawl/core/parse.py``'s docstring has tests here; a hypothesis
test feeds arbitrary bytes and content types to check that nothing raises.
"""

from __future__ import annotations

import concurrent.futures
import time

import lxml.html
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.core.parse import extract_links, parse_html
from trio_crawl.core.url import canonicalize

URL = "http://example.com/dir/page.html"
HTML = "text/html; charset=utf-8"


def links(body: bytes | str, content_type: str | None = HTML, url: str = URL) -> list[str]:
    data = body.encode() if isinstance(body, str) else body
    return extract_links(data, url, content_type)


# --- rule 1: which elements, resolution, dedup -------------------------------------


def test_a_and_area_hrefs_resolved_canonical_deduped_in_order() -> None:
    body = """<!doctype html><html><head>
      <link rel=stylesheet href="/style.css"><script src="/app.js"></script></head>
      <body><a href="b.html">b</a> <a href="/root">r</a>
      <img src="/img.png"> <iframe src="/frame"></iframe> <form action="/form"></form>
      <map name=m><area href="../area" shape=rect coords="0,0,1,1"></map>
      <a href="b.html#part">again</a> <a href="#top">top</a> <a>no href</a>
      <a href="HTTP://Other.Example:80/%7Ex?">abs</a> <a href="mailto:x@example.com">m</a>
      <a href="javascript:void(0)">js</a> <a href="tel:+15550100">t</a> <a href="">self</a>
      </body></html>"""
    assert links(body) == [
        "http://example.com/dir/b.html",
        "http://example.com/root",
        "http://example.com/area",
        "http://example.com/dir/page.html",
        "http://other.example/~x",
    ]


def test_links_differing_only_by_fragment_collapse() -> None:
    body = '<a href="/a#one">1</a><a href="/a#two">2</a><a href="/a">3</a><a href="#x">4</a>'
    assert links(body, url="http://example.com/a#frag") == ["http://example.com/a"]


def test_attribute_values_are_html_decoded_and_whitespace_stripped() -> None:
    body = "<a href='/q?a=1&amp;b=2&lt;'>x</a><a href=\"\n  /spaced\t \">y</a><a href=/bare>z</a>"
    assert links(body) == [
        "http://example.com/q?a=1&b=2%3C",
        "http://example.com/spaced",
        "http://example.com/bare",
    ]


def test_first_href_attribute_wins() -> None:
    assert links('<a href="/first" href="/second">x</a>') == ["http://example.com/first"]


def test_markup_in_scripts_comments_and_textareas_is_not_a_link() -> None:
    body = """<script>document.write('<a href="/in-script">')</script>
      <!-- <a href="/in-comment"> --><textarea><a href="/in-textarea"></textarea>
      <style>a[href="/in-style"]{}</style><a href="/real">real</a>"""
    assert links(body) == ["http://example.com/real"]


# --- rule 2: <base href> -------------------------------------------------------------


def test_base_href_is_resolved_against_the_document_and_applies_to_every_link() -> None:
    body = """<a href="before">1</a><head><base target=_blank><base href="../other/">
      <base href="/ignored/"></head><a href="after">2</a><a href="/abs">3</a>"""
    assert links(body) == [
        "http://example.com/other/before",
        "http://example.com/other/after",
        "http://example.com/abs",
    ]


def test_base_href_in_the_body_still_counts() -> None:
    body = '<body><p><a href="x">x</a><base href="https://cdn.example/root/"></p></body>'
    assert links(body) == ["https://cdn.example/root/x"]


@pytest.mark.parametrize("base", ["http://[broken", "javascript:alert(1)", "data:text/html,x"])
def test_unusable_base_falls_back_to_the_document_url(base: str) -> None:
    body = f'<base href="{base}"><a href="x">x</a>'
    assert links(body) == ["http://example.com/dir/x"]


def test_base_with_another_scheme_keeps_only_absolute_links() -> None:
    body = '<base href="ftp://files.example/pub/"><a href="x">x</a><a href="http://h.example/">'
    assert links(body) == ["http://h.example/"]


# --- rule 3: content types -------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "image/png", "text/plain; charset=utf-8", "application/pdf"],
)
def test_non_html_content_types_give_no_links(content_type: str) -> None:
    assert links('<a href="/x">x</a>', content_type) == []
    assert parse_html(b'<a href="/x">x</a>', content_type) is None


@pytest.mark.parametrize(
    "content_type", [None, "", "text/html", "TEXT/HTML; Charset=UTF-8", "application/xhtml+xml"]
)
def test_html_and_missing_content_types_are_parsed(content_type: str | None) -> None:
    assert links('<a href="/x">x</a>', content_type) == ["http://example.com/x"]


@pytest.mark.parametrize("body", [b"", b"   \n\t", b"<!-- nothing -->", b"\x00\x00", b"<html>"])
def test_bodies_without_links(body: bytes) -> None:
    assert links(body) == []


# --- rule 4: encodings -------------------------------------------------------------------


def test_latin1_page_from_the_header() -> None:
    body = '<a href="/café">x</a><a href="/s?q=naïve">y</a>'.encode("latin-1")
    # The path is always UTF-8 once decoded (WHATWG); the query too (a known gap:
    # browsers would use the page's encoding for the query).
    assert links(body, "text/html; charset=ISO-8859-1") == [
        "http://example.com/caf%C3%A9",
        "http://example.com/s?q=na%C3%AFve",
    ]


def test_latin1_label_decodes_as_windows_1252_like_browsers() -> None:
    body = b'<a href="/\x80">euro</a>'
    expected = ["http://example.com/%E2%82%AC"]  # U+20AC, not U+0080
    assert links(body, "text/html; charset=iso-8859-1") == expected
    assert links(body, "text/html; charset=us-ascii") == expected


def test_meta_charset_is_used_without_a_header_charset() -> None:
    for meta in ('<meta charset="windows-1251">', "<META CHARSET=windows-1251>"):
        body = (meta + '<a href="/Москва">x</a>').encode("cp1251")
        assert links(body, "text/html") == [
            "http://example.com/%D0%9C%D0%BE%D1%81%D0%BA%D0%B2%D0%B0"
        ]


def test_meta_http_equiv_charset() -> None:
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
        '<a href="/日本">x</a>'
    ).encode("shift_jis")
    assert links(body, None) == ["http://example.com/%E6%97%A5%E6%9C%AC"]


def test_header_charset_beats_meta() -> None:
    body = '<meta charset="iso-8859-1"><a href="/é">x</a>'.encode()
    assert links(body, "text/html; charset=utf-8") == ["http://example.com/%C3%A9"]


def test_byte_order_mark_beats_header_and_meta() -> None:
    body = '\ufeff<meta charset="iso-8859-1"><a href="/é">x</a>'.encode("utf-16-le")
    assert links(body, "text/html; charset=iso-8859-1") == ["http://example.com/%C3%A9"]
    utf8_bom = '\ufeff<a href="/é">x</a>'.encode()
    assert links(utf8_bom, "text/html; charset=iso-8859-1") == ["http://example.com/%C3%A9"]


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html; charset=no-such-charset",
        "text/html; charset=",
        "text/html; charset=undefined",
        "text/html; charset=base64",
        "text/html; charset=rot13",
        "text/html; charset=utf-7",
        "text/html; charset=utf-32",
        "text/html; charset=x\x00y",
    ],
)
def test_garbage_header_charset_falls_back_to_meta_then_utf8(content_type: str) -> None:
    assert links('<a href="/é">x</a>'.encode(), content_type) == ["http://example.com/%C3%A9"]
    meta = '<meta charset="windows-1252"><a href="/é">x</a>'.encode("cp1252")
    assert links(meta, content_type) == ["http://example.com/%C3%A9"]


def test_utf16_meta_on_an_ascii_readable_page_means_utf8() -> None:
    body = '<meta charset="utf-16"><a href="/é">x</a>'.encode()
    assert links(body, "text/html") == ["http://example.com/%C3%A9"]


def test_undecodable_bytes_become_replacement_characters() -> None:
    body = b'<p>\xff\xfe\xc3</p><a href="/a\xffb">x</a><a href="/after">y</a>'
    assert links(body) == ["http://example.com/a%EF%BF%BDb", "http://example.com/after"]
    assert links(body, "text/html; charset=shift_jis")[-1] == "http://example.com/after"


def test_utf16_without_bom_is_read_when_declared() -> None:
    body = '<a href="/é">x</a><a href="/ok">ok</a>'.encode("utf-16-le")
    assert isinstance(links(body, "text/html; charset=utf-8"), list)  # mislabelled: no raise
    assert links(body, "text/html; charset=utf-16le") == [
        "http://example.com/%C3%A9",
        "http://example.com/ok",
    ]


# --- rule 5: malformed and huge pages ----------------------------------------------------


def test_malformed_html_is_recovered() -> None:
    body = (
        "<html><body><div><p>unclosed <b><i>tags<a href=one>1</b></i>"
        "<table><tr><td><a href=two>2<td><a href='three'>3</table>"
        '<a href="four" <a href=five>5</a></a></div></span></html></html><a href=six>6'
    )
    assert links(body) == [
        f"http://example.com/dir/{n}" for n in ("one", "two", "three", "four", "six")
    ]


def test_content_after_the_end_of_html_is_still_parsed() -> None:
    # Browsers parse it into the body; libxml2 alone would drop it.
    body = "<html><body><a href=in>1</a></body></html>\n<a href=after>2</a></HTML >"
    assert links(body) == ["http://example.com/dir/in", "http://example.com/dir/after"]
    tree = parse_html(b"<p>x</p></html><!-- c --><A HREF=/late>l</A>", None)
    assert tree is not None and tree.xpath("//a/@href") == ["/late"]
    # The usual ending (comments after </html> included) is left alone.
    assert links("<a href=x>x</a></html>\n<!-- 1 ms -->") == ["http://example.com/dir/x"]


def test_nul_bytes_and_xml_declaration() -> None:
    body = (
        b'<?xml version="1.0" encoding="iso-8859-1"?>\n'
        b'<html xmlns="http://www.w3.org/1999/xhtml"><a href="/a">\x00</a>\x00'
        b'<a href="/b">b</a></html>'
    )
    assert links(body) == ["http://example.com/a", "http://example.com/b"]


def test_nesting_past_libxml2_limit_is_read_to_the_end() -> None:
    """libxml2's tree builder stops 2048 elements deep (the requisite
    extractor then reads the page with the tokenizer); the link extractor
    builds no tree and reads it to the end. Both give every link."""
    body = (
        "<html><head><base href='/base/'></head><body><a href='before'>b</a>"
        + "<div>" * 5000
        + "<a href='deep'>d</a><script>'<a href=\"/no\">'</script>"
        + "</div>" * 5000
        + "<a href='after'>a</a><area href='/area'>"
    )
    assert links(body) == [
        "http://example.com/base/before",
        "http://example.com/base/deep",
        "http://example.com/base/after",
        "http://example.com/area",
    ]


def test_links_in_several_threads_at_once() -> None:
    """Each thread parses with its own parser (one is made per thread and
    kept): pages parsed in four threads at once give what they give alone."""
    pages = [
        (
            f"<base href='/b{i}/'>" + "".join(f"<p><a href='p{j}#f'>x</a>" for j in range(i * 7))
        ).encode()
        for i in range(1, 40)
    ]
    alone = [extract_links(page, URL, None) for page in pages]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            assert list(pool.map(lambda page: extract_links(page, URL, None), pages)) == alone
    assert alone[0] == [f"http://example.com/b1/p{j}" for j in range(7)]


def test_moderate_nesting_uses_lxml() -> None:
    body = "<div>" * 1500 + "<a href='/deep'>d</a>"
    assert links(body) == ["http://example.com/deep"]


def test_five_megabyte_page() -> None:
    chunk = "<p>" + "filler text " * 40 + "</p>"
    parts = [f'<a href="/p/{i}">{i}</a>{chunk}' for i in range(10_000)]
    body = ("<html><body>" + "".join(parts) + '<a href="/last">last</a></body></html>').encode()
    assert len(body) > 5_000_000
    start = time.perf_counter()
    found = links(body)
    elapsed = time.perf_counter() - start
    assert len(found) == 10_001
    assert found[0] == "http://example.com/p/0" and found[-1] == "http://example.com/last"
    assert elapsed < 10, f"5 MB page took {elapsed:.1f}s"


# --- parse_html -----------------------------------------------------------------------


def test_parse_html_gives_an_lxml_html_tree() -> None:
    body = '<meta charset="cp1252"><title>T\x80</title><p class=x>Hello <a href="/a">a</a>'
    root = parse_html(body.encode("latin-1"), "text/html")
    assert isinstance(root, lxml.html.HtmlElement)
    assert root.findtext(".//title") == "T€"
    assert root.xpath("//p[@class='x']")[0].text_content() == "Hello a"


@pytest.mark.parametrize("body", [b"", b"   ", b"<!-- c -->"])
def test_parse_html_of_nothing_is_none(body: bytes) -> None:
    assert parse_html(body, "text/html") is None


# --- never raise on bytes ---------------------------------------------------------------

_fragments = st.sampled_from(
    [
        b"<a href='", b"'>", b'<a href="/x">', b"</a>", b"<base href=", b"<area href=/y>",
        b"<meta charset=", b"utf-16", b"shift_jis", b"\xff\xfe", b"\xef\xbb\xbf", b"\x00",
        b"<!--", b"-->", b"<script>", b"</script>", b"<![CDATA[", b"&amp;", b"&#", b"<div>",
        b"\xc3", b"\xe9", b"%", b"#", b"javascript:", b"//h", b"http://[", b"?", b" ",
    ]
)  # fmt: skip
_bodies = st.one_of(st.binary(max_size=300), st.lists(_fragments, max_size=30).map(b"".join))
_content_types = st.one_of(
    st.none(),
    st.sampled_from(["text/html", "text/html; charset=latin-1", "text/html; charset=bogus"]),
    st.text(max_size=30).map(lambda s: "text/html; charset=" + s),
)


@settings(max_examples=300, deadline=None)
@given(body=_bodies, content_type=_content_types)
def test_any_bytes_give_canonical_links_without_raising(
    body: bytes, content_type: str | None
) -> None:
    found = extract_links(body, URL, content_type)
    assert len(found) == len(set(found))
    for url in found:
        assert canonicalize(url) == url
    parse_html(body, content_type)
