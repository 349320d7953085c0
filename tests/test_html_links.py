"""Rule 8 of ``core/parse.py``: small pages are read by lexbor (``html_links``),
which gives libxml2's links on well-formed markup and a browser's reading of
broken markup; pages whose markup the HTML Standard hides stay with libxml2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_parse_stream import BODIES
from test_requisites import EVERY_KIND

from trio_crawl.core import parse
from trio_crawl.core.html_links import html_links
from trio_crawl.core.libxml2_links import parse_links, reopen_html_end, tokenize_links
from trio_crawl.core.parse import extract_links

URL = "http://example.com/dir/page.html"
HTML = "text/html; charset=utf-8"


def libxml2_links(data: bytes) -> tuple[str | None, list[str]]:
    """(base, hrefs) as ``extract_links`` read every page before rule 8."""
    data = reopen_html_end(data)
    found = parse_links(data)
    return tokenize_links(data) if found is None else found


def links_with_libxml2(body: bytes, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as patch:
        patch.setattr(parse, "_LEXBOR_BYTES", 0)
        return extract_links(body, URL, HTML)


# -- the same links where the markup is sound ------------------------------------

SOUND = [EVERY_KIND, *(body for body in BODIES if "\x00" not in body)]


@pytest.mark.parametrize("body", SOUND, ids=range(len(SOUND)))
def test_sound_pages_give_libxml2s_links(body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert extract_links(body.encode(), URL, HTML) == links_with_libxml2(
        body.encode(), monkeypatch
    )


_HREF = st.text(alphabet="abc/._-?=&%#~ 0123456789", max_size=12)
_TAG = st.sampled_from(["div", "p", "span", "section", "li", "em", "td"])


@st.composite
def _element(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["a", "area", "base", "text", "wrap", "wrap"]))
    href = draw(_HREF).replace('"', "")
    if kind == "a":
        return f'<a href="{href}">{draw(st.text(alphabet="xyz ", max_size=3))}</a>'
    if kind == "area":
        return f'<area href="{href}">'
    if kind == "base":
        return f'<base href="{href}">' if draw(st.booleans()) else "<base>"
    if kind == "text" or depth > 3:
        return draw(st.text(alphabet="xyz ", max_size=5))
    tag = draw(_TAG)
    inner = "".join(draw(st.lists(_element(depth + 1), max_size=4)))
    return f"<{tag}>{inner}</{tag}>"


@settings(max_examples=300, deadline=None)
@given(st.lists(_element(), max_size=8))
def test_well_formed_documents_read_alike(elements: list[str]) -> None:
    data = f"<!doctype html><html><body>{''.join(elements)}</body></html>".encode()
    assert html_links(data) == libxml2_links(data)


# -- what the Standard's reading changes, as a browser reads it --------------------


def test_markup_inside_mathml_is_read_as_a_browser_reads_it() -> None:
    body = b"<math><xmp><a href=/in-math>x</a></xmp></math>"
    assert libxml2_links(body) == (None, [])  # libxml2: an <xmp> is text
    assert extract_links(body, URL, HTML) == ["http://example.com/in-math"]


def test_an_unquoted_href_may_hold_a_less_than_sign() -> None:
    assert html_links(b"<a href=</html<a>") == (None, ["</html<a"])


def test_a_bare_href_links_to_the_page_itself() -> None:
    assert html_links(b"<a href>x</a><a href=''>y</a>") == (None, ["", ""])
    assert extract_links(b"<a href>x</a>", URL, HTML) == [URL]


def test_an_svg_xlink_href_is_not_a_link_but_an_svg_href_is() -> None:
    body = b"<svg><a xlink:href=/xlink>x</a><a href=/svg>y</a></svg>"
    assert html_links(body) == libxml2_links(body) == (None, ["/svg"])


def test_only_a_area_and_base_hrefs_count_among_elements_with_one() -> None:
    """The selector takes every element with an ``href``; a ``<link>``, an
    SVG ``<image>``, a custom element (whose tag id lexbor makes up per
    document, above every known one) are none of the three, and none hides
    markup (rule 5)."""
    body = (
        b"<link rel=stylesheet href=/s.css><x-card href=/custom></x-card>"
        b"<svg><image href=/i.png /></svg><my-template href=/t></my-template>"
        b"<a href=/a>a</a><map><area href=/area></map><base href=/b/>"
    )
    assert html_links(body) == libxml2_links(body) == ("/b/", ["/a", "/area"])


def test_the_first_base_with_an_href_wins() -> None:
    body = b"<a href=x></a><base target=_top><base href=/one/><base href=/two/>"
    assert html_links(body) == libxml2_links(body) == ("/one/", ["x"])


def test_fragments_are_cut_as_rule_1_cuts_them() -> None:
    body = b"<a href='a#b'></a><a href='a #b'></a><a href='#top'></a><a HREF=B#c></a>"
    assert html_links(body) == libxml2_links(body) == (None, ["a", "a #b", "", "B"])


def test_a_page_read_as_windows_1251_is_read_as_the_utf_8_it_became() -> None:
    body = '<meta charset="windows-1251"><a href="/привет">x</a>'.encode("cp1251")
    assert extract_links(body, URL, "text/html") == [
        "http://example.com/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82"
    ]


# -- markup the Standard hides stays with libxml2 ---------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "<template><a href=/first>x</a></template><a href=/second>y</a>",
        "<TEMPLATE id=t><a href=/first></a></TEMPLATE><a href=/second></a>",
        # the Standard drops a frameset page's body; libxml2 reads it
        "<title>t</title><frameset><frame src=f.html></frameset>"
        "<body><a href=/first>x</a><a href=/second>y</a></body>",
    ],
)
def test_hidden_markup_is_read_by_libxml2(body: str) -> None:
    assert html_links(body.encode()) is None
    assert extract_links(body.encode(), URL, HTML) == [
        "http://example.com/first",
        "http://example.com/second",
    ]


def test_the_word_template_in_text_or_a_script_keeps_lexbor() -> None:
    body = b"<script>'<template>'</script><p>&lt;template&gt;</p><a href=/x>x</a>"
    assert html_links(body) == (None, ["/x"])


def test_large_bodies_are_not_read_by_lexbor(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[bytes] = []

    def counting(data: bytes) -> tuple[str | None, list[str]] | None:
        read.append(data)
        return html_links(data)

    monkeypatch.setattr(parse, "html_links", counting)
    small = b"<a href=/small>x</a>"
    assert extract_links(small, URL, HTML) == ["http://example.com/small"]
    monkeypatch.setattr(parse, "_LEXBOR_BYTES", len(small))
    assert extract_links(small, URL, HTML) == ["http://example.com/small"]
    assert read == [small]  # the second time, at the threshold, libxml2 read it
