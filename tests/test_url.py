"""The URL layer on its own: WPT conformance, the canonicalization policy, scope.

No I/O besides reading the WPT data file. The policy table tests pin every rule
of ``trio_crawl/core/url.py``'s docstring (and of ``core/scope.py``'s); hypothesis
checks the invariants (idempotence, fixed points, ``resolve_many`` == ``resolve``
despite its memo).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_crawl.core import url as _url
from trio_crawl.core.scope import Scope, is_path_trap
from trio_crawl.core.url import (
    canonicalize,
    host_port,
    join,
    mask_credentials,
    parse_start_url,
    resolve,
    resolve_many,
)
from trio_crawl.errors import ConfigError

#: Vendored, with its BSD licence and provenance: tests/data/wpt/README.md.
WPT_FILE = Path(__file__).parent / "data" / "wpt" / "urltestdata.json"
HTTP = ("http:", "https:")


def _wpt_cases() -> list[dict[str, Any]]:
    data = json.loads(WPT_FILE.read_text(encoding="utf-8"))
    return [case for case in data if isinstance(case, dict)]


def _expected(case: dict[str, Any]) -> str | None:
    """What we must return for a WPT case: our canonical form of the expected
    href when it is http(s), else None."""
    if case.get("failure") or case["protocol"] not in HTTP:
        return None
    expected = canonicalize(case["href"])
    assert expected is not None, f"canonicalize rejected WPT's own href {case['href']!r}"
    return expected


# --- WPT conformance ---------------------------------------------------------


def test_wpt_resolve_cases_with_a_base() -> None:
    cases = [c for c in _wpt_cases() if c.get("base") is not None]
    failures = [
        (c["input"], c["base"], resolve(c["input"], c["base"]), _expected(c))
        for c in cases
        if resolve(c["input"], c["base"]) != _expected(c)
    ]
    assert not failures, f"{len(failures)} of {len(cases)} WPT cases differ: {failures[:5]}"
    http_cases = sum(1 for c in cases if _expected(c) is not None)
    print(f"WPT: {len(cases)} cases with a base checked, {http_cases} of them http(s)")
    assert len(cases) >= 300 and http_cases >= 100  # the file is the full suite


def test_wpt_canonicalize_cases_without_a_base() -> None:
    cases = [c for c in _wpt_cases() if c.get("base") is None]
    failures = [
        (c["input"], canonicalize(c["input"]), _expected(c))
        for c in cases
        if canonicalize(c["input"]) != _expected(c)
    ]
    assert not failures, f"{len(failures)} of {len(cases)} WPT cases differ: {failures[:5]}"
    print(f"WPT: {len(cases)} cases without a base checked")


def test_wpt_resolve_many_agrees_with_resolve_for_every_input_and_base() -> None:
    cases = _wpt_cases()
    bases = sorted({c["base"] for c in cases if c.get("base")})
    inputs = [c["input"] for c in cases]
    _url._RESOLVE_CACHE.clear()
    for _ in range(2):  # cold memo, then warm
        for base in bases:
            expected = list(dict.fromkeys(r for i in inputs if (r := resolve(i, base))))
            assert resolve_many(inputs, base) == expected, base


# --- the policy, rule by rule ------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # WHATWG: case, default port, empty path, dot segments, IDNA, IP literals
        ("HTTP://Example.COM/", "http://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),
        ("https://example.com:8443", "https://example.com:8443/"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/../../x", "http://example.com/x"),
        ("http://Bücher.example/ä", "http://xn--bcher-kva.example/%C3%A4"),
        ("http://[0:0::1]:8080/", "http://[::1]:8080/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        # userinfo dropped: links never make us send credentials (#18 item 7)
        ("http://user:pw@example.com/", "http://example.com/"),
        ("https://token@example.com:8443/a", "https://example.com:8443/a"),
        ("http://a%40b:p@ss@example.com/", "http://example.com/"),
        ("http://:@example.com/", "http://example.com/"),
        ("http:\\\\example.com\\a\\b", "http://example.com/a/b"),
        # fragment dropped
        ("http://example.com/a#top", "http://example.com/a"),
        ("http://example.com/a?q=1#", "http://example.com/a?q=1"),
        # unreserved escapes decoded, others upper-cased
        ("http://example.com/%7Euser/%7e", "http://example.com/~user/~"),
        ("http://example.com/%41%2d%2E%5f%30", "http://example.com/A-._0"),
        ("http://example.com/a%2fb%3f?x=%2a%c3%a9", "http://example.com/a%2Fb%3F?x=%2A%C3%A9"),
        ("http://example.com/?q=%7e", "http://example.com/?q=~"),
        ("http://user%7e:p%41@example.com/a%7e", "http://example.com/a~"),
        # stray '%': kept, and then escapes only upper-cased
        ("http://example.com/100%", "http://example.com/100%"),
        ("http://example.com/%%341/%7e", "http://example.com/%%341/%7E"),
        # empty query dropped, non-empty kept, order kept
        ("http://example.com/a?", "http://example.com/a"),
        ("http://example.com/?", "http://example.com/"),
        ("http://example.com/a??", "http://example.com/a??"),
        ("http://example.com/a?b=2&a=1&b=1", "http://example.com/a?b=2&a=1&b=1"),
        # WHATWG percent-encodes what must be
        ("http://example.com/a b?c d", "http://example.com/a%20b?c%20d"),
        ('http://example.com/"<>`', "http://example.com/%22%3C%3E%60"),
        # not http(s), or invalid
        ("ftp://example.com/", None),
        ("javascript:alert(1)", None),
        ("mailto:a@example.com", None),
        ("data:text/html,hi", None),
        ("file:///etc/passwd", None),
        ("/relative/path", None),
        ("http://", None),
        ("http://exa mple.com/", None),
        ("http://[::1/", None),
        ("http://xn--/", None),
        ("", None),
    ],
)
def test_canonicalize_policy(url: str, expected: str | None) -> None:
    assert canonicalize(url) == expected


BASE = "https://example.com/dir/page.html?x=1#frag"


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("other.html", "https://example.com/dir/other.html"),
        ("../up", "https://example.com/up"),
        ("../../../../above-root", "https://example.com/above-root"),
        ("/abs", "https://example.com/abs"),
        ("//cdn.example.net/lib", "https://cdn.example.net/lib"),
        ("//cdn.example.net", "https://cdn.example.net/"),
        ("?y=2", "https://example.com/dir/page.html?y=2"),
        ("#section", "https://example.com/dir/page.html?x=1"),
        ("", "https://example.com/dir/page.html?x=1"),
        ("http://Other.Example:80/%7E?", "http://other.example/~"),
        # whitespace: stripped at the ends, tabs and newlines removed anywhere
        ("  /spaced  ", "https://example.com/spaced"),
        ("\t/a\nb\r/c\n", "https://example.com/ab/c"),
        ("\x00\x1f /ctl", "https://example.com/ctl"),
        ("/inner space", "https://example.com/inner%20space"),
        ("java\nscript:alert(1)", None),
        (" javascript:void(0)", None),
        ("JavaScript:void(0)", None),
        ("mailto:someone@example.com", None),
        ("tel:+1-555-0100", None),
        ("data:text/plain,x", None),
        ("ftp://example.com/file", None),
        ("irc://example.com", None),
        ("https:sub", "https://example.com/dir/sub"),
        ("http:sub", "http://sub/"),
        ("https://[::1]/x", "https://[::1]/x"),
        ("https://münchen.example/", "https://xn--mnchen-3ya.example/"),
        ("http://a:99999/", None),
        ("https://exa%mple.com/", None),
    ],
)
def test_resolve_policy(href: str, expected: str | None) -> None:
    assert resolve(href, BASE) == expected
    assert resolve_many([href], BASE) == ([] if expected is None else [expected])


def test_an_invalid_base_resolves_nothing() -> None:
    # As the URL API (``new URL(href, base)``): the base is parsed first.
    assert resolve("/a", "not a url") is None
    assert resolve("https://example.com/a", "not a url") is None
    assert resolve_many(["/a", "http://x.example/"], "") == []


def test_lone_surrogates_become_replacement_characters() -> None:
    assert resolve("/a\ud800b", BASE) == "https://example.com/a%EF%BF%BDb"
    assert resolve_many(["/a\ud800b"], "https://example.com/\udfff") == [
        "https://example.com/a%EF%BF%BDb"
    ]


def test_resolve_many_dedups_in_first_seen_order() -> None:
    hrefs = ["b", "a#1", "/dir/a", "#x", "mailto:x@y", "b", "a#2", "A", "?", ""]
    assert resolve_many(hrefs, "http://h.example/dir/") == [
        "http://h.example/dir/b",
        "http://h.example/dir/a",
        "http://h.example/dir/",
        "http://h.example/dir/A",
    ]


def test_resolve_many_memo_never_leaks_across_bases() -> None:
    # Same hrefs, bases that share (or almost share) the memo's key prefixes.
    hrefs = ["x", "/x", "http:?q", "http:x", "?q", "", "../x", "ht\ttp:?q", ".", "//h2/x"]
    bases = [
        "http://h.example/a/b",
        "http://h.example/a/c?q=1",
        "http://h.example/a/b/..",
        "http://h.example/a/%2e%2e/b",
        "https://h.example/a/b",
        "http://h.example:81/a/b",
        "http://u@h.example/a/b",
        "mailto:x@h.example",
        "http://h.example/a\\b",
    ]
    for _ in range(2):
        for base in bases:
            expected = list(dict.fromkeys(r for h in hrefs if (r := resolve(h, base))))
            assert resolve_many(hrefs, base) == expected, base


def test_resolve_many_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_url, "_RESOLVE_CACHE_SIZE", 10)
    _url._RESOLVE_CACHE.clear()
    resolve_many([f"/p{i}" for i in range(25)], "http://h.example/")
    assert 0 < len(_url._RESOLVE_CACHE) <= 10


def test_join_is_plain_whatwg() -> None:
    assert join("../b#f", "mailto:x") is None
    assert join("b#f", "http://h.example/a/") == "http://h.example/a/b#f"
    assert join("ftp://x/%7e", "http://h.example/") == "ftp://x/%7e"
    assert join("[", "[") is None


# --- host_port, Scope, start URLs -----------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/", "example.com:80"),
        ("https://example.com/a?b", "example.com:443"),
        ("http://example.com:8080/", "example.com:8080"),
        ("https://user:pw@example.com:8443/", "example.com:8443"),
        ("http://[::1]/", "[::1]:80"),
        ("http://[::1]:8080/x", "[::1]:8080"),
        ("http://127.0.0.1:5/", "127.0.0.1:5"),
    ],
)
def test_host_port(url: str, expected: str) -> None:
    assert host_port(url) == expected


@pytest.mark.parametrize("url", ["ftp://example.com/", "example.com", "mailto:x"])
def test_host_port_rejects_non_http(url: str) -> None:
    with pytest.raises(ValueError, match=r"^not an absolute http\(s\) URL: "):
        host_port(url)


def test_scope_defaults_to_the_start_urls_host_ports() -> None:
    scope = Scope(["http://example.com/start", "https://Other.Example:8443/x"])
    assert scope.host_ports == {"example.com:80", "example.com:443", "other.example:8443"}
    assert scope.allows("http://example.com/anything?q")
    assert scope.allows("https://other.example:8443/")
    assert scope.allows("https://example.com/")  # the default-port upgrade
    assert not scope.allows("http://other.example:443/")
    assert not scope.allows("http://example.com:8080/")
    assert not scope.allows("http://www.example.com/")  # no subdomains by default
    assert not scope.allows("https://other.example/")
    assert not scope.allows("http://evil.example/?u=http://example.com/")
    assert not scope.allows("http://example.com@evil.example/")


_SCOPE_HOSTS = ["a.example", "b.example", "x.a.example", "a.example.evil", "[::1]", "127.0.0.1"]


@settings(max_examples=200, deadline=None)
@given(
    urls=st.lists(
        st.builds(
            "{}://{}{}{}{}{}".format,
            st.sampled_from(["http", "https"]),
            st.sampled_from(["", "u@", "a.example@", "u:p@"]),
            st.sampled_from(_SCOPE_HOSTS),
            st.sampled_from(["", ":80", ":443", ":8080"]),
            st.sampled_from(["", "?q=/", "#f/", "?q"]),
            st.sampled_from(["", "/", "/p/q", "/b.example/"]),
        ),
        max_size=30,
    )
)
@example(urls=["http://a.example?q=/", "http://a.example.evil?q=/", "http://a.example@b.example/"])
def test_scope_answers_by_the_authority_whatever_it_cached(urls: list[str]) -> None:
    """``allows`` caches its answer by the text before the path; a run of
    URLs through one Scope answers each as a fresh Scope (nothing cached)."""
    kept = Scope(["http://a.example/", "https://[::1]:8080/"], ["b.example"])
    for url in urls:
        fresh = Scope(["http://a.example/", "https://[::1]:8080/"], ["b.example"])
        assert kept.allows(url) == fresh.allows(url), url


def test_scope_allow_domains_widen_to_subdomains_on_any_port() -> None:
    scope = Scope(
        ["http://start.example/"],
        allow_domains=["Example.ORG", ".bücher.example.", "*.wild.example"],
    )
    assert scope.allows("http://wild.example/") and scope.allows("http://a.wild.example/")
    assert scope.allows("http://start.example/")
    assert scope.allows("http://example.org/")
    assert scope.allows("https://example.org:8443/")
    assert scope.allows("http://a.b.example.org/")
    assert scope.allows("https://shop.xn--bcher-kva.example/")
    assert not scope.allows("http://notexample.org/")
    assert not scope.allows("http://example.org.evil.example/")
    assert not scope.allows("http://org/")
    assert "example.org" in repr(scope) and "start.example:80" in repr(scope)


def test_scope_answers_stay_right_when_its_cache_is_cleared() -> None:
    scope = Scope(["http://a.example/"], cache_size=2)
    answers = [scope.allows(f"http://{h}.example/") for h in "abcab"]
    assert answers == [True, False, False, True, False]


@pytest.mark.parametrize(
    ("start", "message"),
    [
        (
            "ftp://example.com/",
            r"^start URL is not an absolute http\(s\) URL: 'ftp://example.com/'$",
        ),
        ("example.com", r"^start URL is not an absolute http\(s\) URL: 'example.com'$"),
    ],
)
def test_scope_rejects_bad_start_urls(start: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scope([start])


@pytest.mark.parametrize(
    "domain", ["", "example.com/path", "example.com:80", "a b", "[::1]", "*.", "a.*.com", "*"]
)
def test_scope_rejects_bad_allow_domains(domain: str) -> None:
    with pytest.raises(ConfigError, match=r"^allow_domains= takes host names like example\.com"):
        Scope(["http://a.example/"], allow_domains=[domain])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://example.com", "http://example.com/"),
        ("  HTTPS://Example.com:443/a#x  ", "https://example.com/a"),
        ("example.com", "http://example.com/"),
        ("example.com/docs?x=1", "http://example.com/docs?x=1"),
        ("localhost:8000", "http://localhost:8000/"),
        ("127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
        ("[::1]:8080/", "http://[::1]:8080/"),
        ("//cdn.example.net/a", "http://cdn.example.net/a"),
        ("bücher.example", "http://xn--bcher-kva.example/"),
    ],
)
def test_parse_start_url(text: str, expected: str) -> None:
    assert parse_start_url(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"^empty start URL$"),
        ("   ", r"^empty start URL$"),
        (
            "ftp://example.com/",
            r"^unsupported scheme 'ftp' in start URL 'ftp://example.com/'"
            r" \(only http and https\)$",
        ),
        ("mailto:a@example.com", r"^unsupported scheme 'mailto' in start URL"),
        ("javascript:alert(1)", r"^unsupported scheme 'javascript' in start URL"),
        ("http://", r"^invalid start URL 'http://'$"),
        ("exa mple.com", r"^invalid start URL 'exa mple.com'$"),
        ("http://[::1", r"^invalid start URL 'http://\[::1'$"),
        (
            "http://ann:hunter2@example.com/",
            r"^start URL 'http://ann:\*\*\*@example.com/' holds a user name or password: "
            r"credentials in URLs are never sent; give them with auth=$",
        ),
        ("https://tok3n@example.com/", r"^start URL 'https://\*\*\*@example.com/' holds"),
        ("ann:hunter2@example.com", r"^unsupported scheme 'ann' in start URL 'ann:\*\*\*@"),
        ("ftp://ann:hunter2@x/", r"^unsupported scheme 'ftp' in start URL 'ftp://ann:\*\*\*@x/'"),
        ("http://ann:hunter2@[::1", r"^invalid start URL 'http://ann:\*\*\*@\[::1'$"),
    ],
)
def test_parse_start_url_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_start_url(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no url here", "no url here"),
        ("at http://ann:pw@h.example/a", "at http://ann:***@h.example/a"),
        ("'https://TOKEN@h.example/'", "'https://***@h.example/'"),
        ("http://a@b:c@h.example/x@y", "http://a@b:***@h.example/x@y"),
        ("ann:pw@h.example and bob:x@y", "ann:***@h.example and bob:***@y"),
        ("to me@example.com or out@2.jsonl", "to me@example.com or out@2.jsonl"),
        ("http://h.example/path@x?q=a@b", "http://h.example/path@x?q=a@b"),
    ],
)
def test_mask_credentials(text: str, expected: str) -> None:
    assert mask_credentials(text) == expected


# --- properties ---------------------------------------------------------------------

_pieces = st.sampled_from(
    [
        "/", "//", "\\", ".", "..", "./", "../", "?", "#", "%", "%7e", "%7E", "%41", "%2f",
        "%2e", "%%", "%zz", "%3", "a", "B", "~", "-", "_", " ", "\t", "\n", "é", "ü",
        "@", ":", "[::1]", "xn--", "http:", "https:", "//Example.COM", "//bücher.de",
        "javascript:", "mailto:", ";", "=", "&", "+", "'", '"', "<", "\x00", "\x7f",
    ]
)  # fmt: skip
hrefs = st.one_of(st.lists(_pieces, max_size=12).map("".join), st.text(max_size=30))
bases = st.sampled_from(
    [
        "http://example.com/",
        "https://example.com/a/b/c?q=1#f",
        "http://user:pw@example.com:8080/a/b",
        "https://[::1]/x/",
        "http://example.com/a/%2e%2e/b",
        "http://xn--bcher-kva.de/dir/",
        "mailto:x@example.com",
        "not a base",
    ]
)


@settings(max_examples=400, deadline=None)
@given(href=hrefs, base=bases)
@example(href="%%341", base="http://example.com/")
@example(href="%25%34%31", base="http://example.com/")
def test_resolve_output_is_canonical_http_without_fragment(href: str, base: str) -> None:
    url = resolve(href, base)
    if url is not None:
        assert url.startswith(("http://", "https://"))
        assert "#" not in url
        assert "?" not in url or url.partition("?")[2]  # no empty query
        assert url.isascii()
        assert "@" not in url.split("/")[2]  # no userinfo, ever
        assert canonicalize(url) == url
    assert resolve_many([href, href], base) == ([] if url is None else [url])


@settings(max_examples=300, deadline=None)
@given(url=st.one_of(bases, hrefs.map(lambda h: "http://example.com/" + h), hrefs))
def test_canonicalize_is_idempotent(url: str) -> None:
    once = canonicalize(url)
    if once is not None:
        assert canonicalize(once) == once


_UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=_UNRESERVED, min_size=1, max_size=20), lower=st.booleans())
def test_percent_encoded_unreserved_equals_plain(text: str, lower: bool) -> None:
    encoded = "".join(f"%{ord(c):02x}" if lower else f"%{ord(c):02X}" for c in text)
    plain = canonicalize(f"http://example.com/p/{text}?q={text}")
    assert plain is not None
    # (WHATWG treats "%2e" like "." in dot segments, so "." and ".." agree too.)
    assert canonicalize(f"http://example.com/p/{encoded}?q={encoded}") == plain
    assert canonicalize(plain) == plain


@settings(max_examples=200, deadline=None)
@given(hrefs=st.lists(hrefs, max_size=8), base=bases)
def test_resolve_many_equals_resolve_deduplicated(hrefs: list[str], base: str) -> None:
    expected = list(dict.fromkeys(r for h in hrefs if (r := resolve(h, base)) is not None))
    assert resolve_many(hrefs, base) == expected


@pytest.mark.parametrize(
    ("url", "trap"),
    [
        ("http://a.example/docs/v1/guide/intro.html", False),
        ("http://a.example/a/a/a/x", False),
        ("http://a.example/a/a/a/a/x", True),
        ("http://a.example/a/b/a/b/a/b/a/b", True),
        ("http://a.example/" + "/".join(f"s{i}" for i in range(32)), False),
        ("http://a.example/" + "/".join(f"s{i}" for i in range(33)), True),
        ("http://a.example/x?p=/a/a/a/a/a", False),  # only the path counts
    ],
)
def test_path_traps(url: str, trap: bool) -> None:
    assert is_path_trap(url) is trap
    assert Scope(["http://a.example/"]).allows(url) is not trap


def test_overlong_urls_are_out_of_scope() -> None:
    scope = Scope(["http://a.example/"])
    base = "http://a.example/?q="
    assert scope.allows(base + "x" * (2083 - len(base)))
    assert not scope.allows(base + "x" * (2084 - len(base)))
