"""Rule 1 of ``core/parse.py``: cutting the fragment off a raw href before
resolution never changes the link it resolves to."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_crawl.core.parse import _cut_fragment, extract_links
from trio_crawl.core.url import resolve

BASES = ["http://example.com/dir/page.html?q=1#f", "https://[::1]:8443/a/b/", "http://h/"]
_parts = st.sampled_from(
    [
        "#", "#x", "?", "?a=1", "/", "//", "\\", "..", ".", "a", "b.html", ":", "@", "[", "]",
        "::1", "http:", "https://", "h.example", "%", "%23", " ", "\t", "\n", "\x00", "é",
        "javascript:", "mailto:", "xn--", ":80", "user:pw@",
    ]
)  # fmt: skip
_hrefs = st.one_of(st.text(max_size=40), st.lists(_parts, max_size=12).map("".join))


@settings(max_examples=500, deadline=None)
@given(href=_hrefs, base=st.sampled_from(BASES))
@example(href="http://user#@host/", base=BASES[0])
@example(href="http://[::1#]/", base=BASES[0])
@example(href="  #x", base=BASES[0])
@example(href="0 #", base=BASES[0])
@example(href="0\t#", base=BASES[0])
def test_cutting_the_fragment_first_changes_nothing(href: str, base: str) -> None:
    assert resolve(_cut_fragment(href), base) == resolve(href, base)


def test_fragment_variants_give_one_link_in_first_seen_order() -> None:
    body = b"""<a href="os.html#a">1</a><a href="#top">2</a><a href="os.html#b">3</a>
      <a href="path.html">4</a><a href="os.html">5</a><a href="?x#y">6</a>
      <a href="sp #a">7</a><a href="sp#b">8</a>"""
    assert extract_links(body, "http://example.com/lib/page.html", None) == [
        "http://example.com/lib/os.html",
        "http://example.com/lib/page.html",
        "http://example.com/lib/path.html",
        "http://example.com/lib/page.html?x",
        "http://example.com/lib/sp%20",
        "http://example.com/lib/sp",
    ]
