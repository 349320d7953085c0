"""The pure ``--mirror`` layout (``mirror/layout.py``): where a URL is
saved, checked case by case and with hypothesis (never outside the mirror
directory, names at most 255 bytes, no two URLs on one file), and the
relative links between saved files, resolved back as a browser would."""

from __future__ import annotations

import posixpath
from urllib.parse import unquote, urljoin

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_crawl.core.url import canonicalize
from trio_crawl.mirror.layout import (
    MAX_NAME_BYTES,
    MirrorLayout,
    relative_href,
    url_of_path,
)

PLAIN = MirrorLayout()
ADJUST = MirrorLayout(adjust_extension=True)
FOLD = MirrorLayout(case_insensitive=True)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("http://127.0.0.1:8000/", ("127.0.0.1:8000", "index.html")),
        ("http://example.com/docs/", ("example.com", "docs", "index.html")),
        ("https://example.com:443/a/b.css", ("example.com", "a", "b.css")),
        ("http://example.com:443/a", ("example.com:443", "a")),
        ("http://h/page?x=1&y=2", ("h", "page?x=1&y=2")),
        ("http://h/dir/?x=1", ("h", "dir", "index.html?x=1")),
        ("http://h/a%20b/c%C3%A9", ("h", "a b", "cé")),
        ("http://h/%2e%2e/%2E/x", ("h", "%2E%2E", "%2E", "x")),
        ("http://h/a%2Fb%5Cc%00d", ("h", "a%2Fb%5Cc%00d")),
        ("http://h/100%25", ("h", "100%25")),
        ("http://h/%FF", ("h", "%FF")),
        ("http://h/a//b", ("h", "a", "b")),
        ("http://h/q?a/../b", ("h", "q?a%2F..%2Fb")),
        ("http://[::1]:8080/x", ("[::1]:8080", "x")),
    ],
)
def test_urls_map_to_files_as_wget_lays_them_out(url: str, path: tuple[str, ...]) -> None:
    assert PLAIN.path(url) == path


@pytest.mark.parametrize(
    ("url", "content_type", "name"),
    [
        ("http://h/a", "text/html; charset=utf-8", "a.html"),
        ("http://h/a.htm", "text/html", "a.htm"),
        ("http://h/A.HTML", "text/html", "A.HTML"),
        ("http://h/a.php?x=1", "text/html", "a.php?x=1.html"),
        ("http://h/", "text/html", "index.html"),
        ("http://h/s", "text/css", "s.css"),
        ("http://h/s.css", "text/css", "s.css"),
        ("http://h/x.png", "image/png", "x.png"),
        ("http://h/a", None, "a"),
        ("http://h/x.xhtml", "application/xhtml+xml", "x.xhtml.html"),
    ],
)
def test_adjust_extension_adds_html_and_css(url: str, content_type: str | None, name: str) -> None:
    assert ADJUST.path(url, content_type)[-1] == name
    assert PLAIN.path(url, content_type)[-1] == PLAIN.path(url)[-1]  # only with the option


def test_an_overlong_name_is_cut_with_a_hash_keeping_its_extension() -> None:
    long_a = "http://h/" + "a" * 300 + ".html"
    long_b = "http://h/" + "a" * 299 + "b.html"
    name_a, name_b = PLAIN.path(long_a)[-1], PLAIN.path(long_b)[-1]
    assert len(name_a.encode()) == MAX_NAME_BYTES and name_a.endswith(".html")
    assert name_a != name_b
    multibyte = PLAIN.path("http://h/" + "%C3%A9" * 200)[-1]
    assert len(multibyte.encode()) <= MAX_NAME_BYTES
    multibyte.encode().decode("utf-8")  # cut at a character boundary


def test_case_folding_file_systems_get_distinct_lower_case_names() -> None:
    upper, lower = FOLD.path("http://h/Docs/A.html"), FOLD.path("http://h/docs/a.html")
    assert lower == ("h", "docs", "a.html")  # lower-case names are unchanged
    assert upper[1].startswith("docs~") and upper[2].startswith("a~")
    assert upper[2].endswith(".html")
    assert all(part == part.lower() for part in upper)
    # A marked name maps to itself: a converted link finds the same file again.
    again = FOLD.path(url_of_path("http", upper))
    assert again == upper
    assert PLAIN.path("http://h/Docs/A.html") == ("h", "Docs", "A.html")


def test_candidates_cover_adjusted_names_and_the_directory_index() -> None:
    assert PLAIN.candidates("http://h/a") == [("h", "a"), ("h", "a", "index.html")]
    assert ADJUST.candidates("http://h/a") == [
        ("h", "a"),
        ("h", "a.html"),
        ("h", "a.css"),
        ("h", "a", "index.html"),
    ]
    assert PLAIN.candidates("http://h/d/") == [("h", "d", "index.html")]


def test_relative_href_examples() -> None:
    assert relative_href(("h", "index.html"), ("h", "docs", "index.html")) == "docs/index.html"
    assert relative_href(("h", "a", "b", "c"), ("h", "x"), "top") == "../../x#top"
    assert relative_href(("h", "a"), ("h", "a:b")) == "a%3Ab"  # never read as a scheme
    assert relative_href(("h", "p"), ("h", "p?x=1")) == "p%3Fx=1"  # never read as a query
    assert relative_href(("h", "p"), ("h", "100%25")) == "100%2525"
    assert relative_href(("h", "p"), ("g:81", "q")) == "../g%3A81/q"


# -- properties ------------------------------------------------------------------

PIECES = [*"aAbZ.-_~%/\\?&=#:; ", "%2e", "%2E", "%2f", "%00", "%5c", "..", "é", "%ff", "\x00"]
SEGMENT = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
LONG = st.integers(200, 400).map(lambda n: "x" * n)


@st.composite
def urls(draw: st.DrawFn) -> str:
    host = draw(st.sampled_from(["h", "example.com", "127.0.0.1:8000", "[::1]:81", "b.test:80"]))
    segments = draw(st.lists(st.one_of(SEGMENT, LONG), max_size=6))
    tail = draw(st.sampled_from(["", "/", "?q=1", "?a/../../b", "#f"]))
    return f"http://{host}/" + "/".join(segments) + tail


def _inside(root: str, parts: tuple[str, ...]) -> bool:
    joined = posixpath.normpath(posixpath.join(root, *parts))
    return joined.startswith(root + "/")


@settings(max_examples=200, deadline=None)
@given(urls(), st.booleans(), st.booleans(), st.sampled_from([None, "text/html", "text/css"]))
@example("http://h/%2e%2e/%2e%2e/etc/passwd", False, False, None)
@example("http://h/..%2f..%2fetc", False, False, None)
@example("http://h/a%00b/%5c..%5c", False, False, None)
def test_a_path_never_leaves_the_mirror_directory(
    raw: str, adjust: bool, fold: bool, content_type: str | None
) -> None:
    url = canonicalize(raw)
    if url is None:
        return
    parts = MirrorLayout(adjust_extension=adjust, case_insensitive=fold).path(url, content_type)
    assert len(parts) >= 2
    for part in parts:
        assert part not in ("", ".", "..")
        assert "/" not in part and "\\" not in part and "\x00" not in part
        assert not any(ord(c) < 32 for c in part)
        assert len(part.encode("utf-8")) <= MAX_NAME_BYTES
    assert _inside("/mirror", parts)


@settings(max_examples=200, deadline=None)
@given(urls(), urls())
def test_two_urls_share_a_file_only_when_their_decoded_paths_match(a: str, b: str) -> None:
    ua, ub = canonicalize(a), canonicalize(b)
    if ua is None or ub is None:
        return
    if PLAIN.path(ua) != PLAIN.path(ub):
        return

    # Same file: same host and the same percent-decoded, slash-collapsed path and query.
    def key(url: str) -> tuple[str, ...]:
        rest = url.split("://", 1)[1]
        path, _, query = rest.partition("?")
        host, _, path = path.partition("/")
        segs = [unquote(s) for s in path.split("/")]
        last = segs[-1] or "index.html"
        return (host.removesuffix(":80"), *[s for s in segs[:-1] if s], last, unquote(query))

    assert key(ua) == key(ub)


@settings(max_examples=200, deadline=None)
@given(urls(), urls(), st.text(alphabet="abc-", max_size=4))
def test_a_relative_href_leads_a_browser_to_the_exact_file(a: str, b: str, fragment: str) -> None:
    ua, ub = canonicalize(a), canonicalize(b)
    if ua is None or ub is None:
        return
    source, target = PLAIN.path(ua), PLAIN.path(ub)
    href = relative_href(source, target, fragment)
    assert ":" not in href.split("/", 1)[0] or href.startswith("..")  # no scheme
    page = "file:///m/" + "/".join(_url_name(p) for p in source)
    resolved = urljoin(page, href)
    path, _, got_fragment = resolved.partition("#")
    assert got_fragment == fragment
    assert unquote(path) == "file:///m/" + "/".join(target)


def _url_name(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


@settings(max_examples=200, deadline=None)
@given(urls(), st.integers(min_value=1, max_value=2**64))
def test_on_a_case_folding_file_system_urls_differing_in_case_get_different_files(
    raw: str, mask: int
) -> None:
    url = canonicalize(raw)
    if url is None:
        return
    scheme, rest = url.split("://", 1)
    host, slash, tail = rest.partition("/")
    flipped = "".join(c.swapcase() if mask >> (i % 64) & 1 else c for i, c in enumerate(tail))
    other = canonicalize(f"{scheme}://{host}{slash}{flipped}")
    if other is None or other == url:
        return
    a, b = FOLD.path(url), FOLD.path(other)
    if PLAIN.path(url) == PLAIN.path(other):
        return  # the same file even on a case-sensitive system (%2f vs %2F)
    assert tuple(p.casefold() for p in a) != tuple(p.casefold() for p in b)
