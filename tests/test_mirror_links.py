"""``--convert-links`` on one page or stylesheet (``mirror/links.py``):
which values change, to what, and that every other byte stays as it was.
The saved files are given as a set; no disk."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.mirror import links
from trio_crawl.mirror.convert import file_kind
from trio_crawl.mirror.layout import MirrorLayout
from trio_crawl.mirror.links import LinkConverter, attribute_spans

LAYOUT = MirrorLayout()
SAVED = {
    ("h", "index.html"),
    ("h", "docs", "index.html"),
    ("h", "docs", "intro.html"),
    ("h", "css", "site.css"),
    ("h", "img", "a.png"),
    ("h", "img", "a-2x.png"),
    ("h", "img", "bg.png"),
    ("h", "page?x=1"),
    ("h", "a", "index.html"),
}


def lookup(url: str) -> tuple[str, ...] | None:
    return next((c for c in LAYOUT.candidates(url) if c in SAVED), None)


def convert(page: tuple[str, ...], html: str) -> str | None:
    converter = LinkConverter(page, "http://h/" + "/".join(page[1:]), lookup)
    out = converter.page_html(html.encode())
    return None if out is None else out.decode()


def test_links_to_saved_files_become_relative_the_rest_absolute() -> None:
    page = (
        "<!DOCTYPE html>\n<!-- keep   me -->\n<html><head>"
        "<link rel=stylesheet href='/css/site.css' >\n"
        '<title>T &amp; t</title></head><BODY  class="x">'
        '<a href="docs/#top">d</a> <A HREF=docs/intro.html>i</A> <a href="/missing?q=1#f">m</a>'
        ' <a href="page?x=1">q</a> <a href="/a">a</a> <a href="mailto:x@y">@</a>'
        ' <a href="#s">s</a>'
        ' <a href="http://other.test/z">o</a>'
        '<img src="/img/a.png" srcset="/img/a.png 1x, /img/a-2x.png 2x">'
        '<div style="background: url(/img/bg.png)"></div>'
        "<style>p { background: url('img/bg.png') }</style></BODY></html>"
    )
    out = convert(("h", "index.html"), page)
    assert out == (
        "<!DOCTYPE html>\n<!-- keep   me -->\n<html><head>"
        "<link rel=stylesheet href='css/site.css' >\n"
        '<title>T &amp; t</title></head><BODY  class="x">'
        '<a href="docs/index.html#top">d</a> <A HREF=docs/intro.html>i</A>'
        ' <a href="http://h/missing?q=1#f">m</a>'
        ' <a href="page%3Fx=1">q</a> <a href="a/index.html">a</a> <a href="mailto:x@y">@</a>'
        ' <a href="#s">s</a> <a href="http://other.test/z">o</a>'
        '<img src="img/a.png" srcset="img/a.png 1x, img/a-2x.png 2x">'
        '<div style="background: url(img/bg.png)"></div>'
        "<style>p { background: url('img/bg.png') }</style></BODY></html>"
    )


def test_links_are_relative_to_the_saved_file_and_a_base_no_longer_applies() -> None:
    page = '<head><base href="/docs/"></head><a href="intro.html">i</a><a href="../">up</a>'
    out = convert(("h", "page?x=1"), page)
    assert out == (
        '<head><base data-trio-crawl-base-href="/docs/"></head>'
        '<a href="docs/intro.html">i</a><a href="index.html">up</a>'
    )
    # Converting again (a resumed crawl) changes nothing more.
    assert convert(("h", "page?x=1"), out) is None


def test_a_converted_page_converts_to_itself_and_unchanged_pages_are_not_rewritten() -> None:
    once = convert(("h", "docs", "index.html"), '<a href="/">home</a><a href="/nope">n</a>')
    assert once == '<a href="../index.html">home</a><a href="http://h/nope">n</a>'
    assert convert(("h", "docs", "index.html"), once) is None
    assert convert(("h", "docs", "index.html"), "<p>no links</p>") is None


def test_values_are_escaped_for_their_quoting() -> None:
    out = convert(("h", "index.html"), "<a href=/missing?a=1&amp;b=2>x</a>")
    assert out == '<a href="http://h/missing?a=1&amp;b=2">x</a>'


def test_non_utf8_bytes_outside_links_are_kept() -> None:
    raw = b'<meta charset="windows-1252"><p>caf\xe9</p><a href="/docs/">d</a>'
    converter = LinkConverter(("h", "index.html"), "http://h/index.html", lookup)
    assert converter.page_html(raw) == raw.replace(b'"/docs/"', b'"docs/index.html"')


def test_stylesheets_convert_url_and_import_in_place() -> None:
    css = (
        b'@import "/css/site.css";\n@import url(missing.css);\n'
        b"/* url(/img/a.png) */ a { background: URL( '../img/bg.png' ) }\n"
        b'b { background: url("data:image/png;base64,AA==") }'
    )
    converter = LinkConverter(("h", "css", "site.css"), "http://h/css/site.css", lookup)
    assert converter.stylesheet(css) == (
        b'@import "site.css";\n@import url(http://h/css/missing.css);\n'
        b"/* url(../img/a.png) */ a { background: URL( '../img/bg.png' ) }\n"
        b'b { background: url("data:image/png;base64,AA==") }'
    )


def test_which_saved_files_are_pages_and_stylesheets() -> None:
    assert file_kind("a.html", b"") == "html"
    assert file_kind("page?x=1", b"  <!DOCTYPE html><html>") == "html"
    assert file_kind("page?x=1", b'<a href="/">') == "html"
    assert file_kind("s.css?v=3", b"body{}") == "css"
    assert file_kind("x.png", b"\x89PNG") is None
    assert file_kind("data.json", b'{"a": "<html>"}') is None


def test_the_shared_memo_changes_no_result() -> None:
    """One memo across pages of different directories, with and without a
    <base>, gives the same bytes as converting each page on its own."""
    pages = [
        (("h", "index.html"), '<a href="docs/">d</a><a href="?x=1">q</a><a href="a">a</a>'),
        (
            ("h", "docs", "index.html"),
            '<a href="docs/">d</a><a href="../a">a</a><a href="a">a</a>',
        ),
        (("h", "docs", "intro.html"), '<base href="/"><a href="docs/">d</a><a href="a">a</a>'),
        (("h", "page?x=1"), '<a href="docs/">d</a><a href="#t">t</a><a href=" a">a</a>'),
    ]
    memo: dict[tuple[str, tuple[str, ...], str], str] = {}
    for _ in range(2):
        for page, text in pages:
            url = "http://h/" + "/".join(page[1:])
            alone = LinkConverter(page, url, lookup).page_html(text.encode())
            shared = LinkConverter(page, url, lookup, memo).page_html(text.encode())
            assert shared == alone, page
    assert memo  # it was used


def test_files_named_as_images_scripts_or_media_are_not_pages() -> None:
    for name in ("a.png", "app.js", "f.woff2", "doc.pdf", "logo.svg?v=2", "data.json"):
        assert file_kind(name, b"<html><a href=x>") is None, name


#: The regular expression ``attribute_spans`` replaced (for speed): it must
#: find the very same attributes.
_REFERENCE = re.compile(
    r"""(?<=[\s"'/])(href|src|srcset|imagesrcset|poster|data|background|style)(\s*=\s*)"""
    r"""("[^"]*"|'[^']*'|[^\s"'<>`]+)""",
    re.I,
)


#: Pieces of markup around the attribute names, and look-alikes (``ſ``
#: is ``s`` to a case-insensitive regular expression).
# fmt: off
_PIECES = (
    "href", "HREF", "src", "srcset", "imagesrcset", "data", "style", "\u017frc", "x",
    "=", " ", "\n", "\u00a0", '"', "'", "/", "<", ">", "a=b", "-", "`",
    "bac\u212aground", "background", "\u0131magesrcset", "\u0130MAGESRCSET", "poster", "Data",
)
# fmt: on


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_attribute_spans_find_what_the_regular_expression_found(text: str) -> None:
    expected = [(m.start(), m.end(1), m.start(3), m.end()) for m in _REFERENCE.finditer(text)]
    assert list(attribute_spans(text)) == expected


def test_the_names_match_every_character_a_case_insensitive_expression_takes() -> None:
    """``attribute_spans`` spells each letter's cases out (no ``re.I``): every
    character that ``re.I`` takes for a letter of the names is in its set."""
    letters = sorted(set("".join(links._NAMES)))
    anything = re.compile("[" + "".join(letters) + "]", re.I)
    for code in range(0x110000):
        char = chr(code)
        if anything.fullmatch(char):
            for letter in letters:
                expected = re.fullmatch(letter, char, re.I) is not None
                assert (re.fullmatch(links._any_case(letter), char) is not None) == expected


def test_style_attributes_however_spelled_are_converted() -> None:
    """The style attributes are asked of lxml only when the bytes hold
    ``style``, blanks and ``=`` (any ASCII case): each spelling libxml2
    reads as a style attribute is still converted."""
    for spelling in ("style=", "STYLE =", "sTyLe\f=", "style\r\n\t ="):
        page = f"<p {spelling}'background: url(/img/bg.png)'>x</p>"
        expected = page.replace("/img/bg.png", "img/bg.png")
        assert convert(("h", "index.html"), page) == expected, spelling
    assert convert(("h", "index.html"), "<p data-x='style'>url(/img/bg.png)</p>") is None
