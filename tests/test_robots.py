"""robots.txt: the pure policy (``robots/policy.py``) and the cache (``engine/robots_gate.py``).

Rules of this suite: no sockets at all. The cache talks to ``FakeFetcher``, an
in-memory site; anything timed runs on the autojump ``MockClock`` and asserts
exact virtual times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_crawl.core.models import FetchResult
from trio_crawl.engine.robots_gate import RobotsCache
from trio_crawl.errors import FetchError
from trio_crawl.robots.policy import (
    MAX_ROBOTS_BYTES,
    RobotsFinal,
    RobotsFollow,
    RobotsPolicy,
    decode_robots,
    interpret_robots_response,
    product_token,
    robots_url,
)
from trio_crawl.robots.rules import RobotsTxt, path_params_query

UA = "trio-crawl/0.1 (+https://github.com/trio-crawl/trio-crawl)"


# ---------------------------------------------------------------- robots_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/a/b?c=d#e", "http://example.com/robots.txt"),
        ("https://example.com", "https://example.com/robots.txt"),
        ("HTTP://User:pw@Example.COM:80/x", "http://example.com/robots.txt"),
        ("https://example.com:443/", "https://example.com/robots.txt"),
        ("https://example.com:8443/x", "https://example.com:8443/robots.txt"),
        ("http://127.0.0.1:51234/shop/", "http://127.0.0.1:51234/robots.txt"),
        ("http://[::1]:8080/", "http://[::1]:8080/robots.txt"),
    ],
)
def test_robots_url(url: str, expected: str) -> None:
    assert robots_url(url) == expected


@pytest.mark.parametrize("url", ["ftp://example.com/", "/relative", "http:///nohost", ""])
def test_robots_url_rejects_non_http(url: str) -> None:
    with pytest.raises(ValueError, match=r"^not an absolute http\(s\) URL: "):
        robots_url(url)


def test_product_token() -> None:
    assert product_token(UA) == "trio-crawl"
    assert product_token("  MyBot ") == "MyBot"
    with pytest.raises(ValueError, match=r"^no product token in user agent '  '$"):
        product_token("  ")


# ---------------------------------------------------------------- RobotsPolicy


def allowed(robots: str, path: str, ua: str = UA) -> bool:
    return RobotsPolicy.parse(robots, ua).allows("http://example.com" + path)


def test_wildcard_and_end_anchor() -> None:
    robots = "User-agent: *\nDisallow: /*.pdf$\nDisallow: /tmp*/cache\nDisallow: /search?q=\n"
    assert not allowed(robots, "/files/a.pdf")
    assert allowed(robots, "/files/a.pdf?download=1")  # $ anchors at the end of the query
    assert allowed(robots, "/files/a.pdfx")
    assert not allowed(robots, "/tmp/cache")
    assert not allowed(robots, "/tmp-01/x/cache/y")
    assert allowed(robots, "/tmp/x")
    assert not allowed(robots, "/search?q=shoes")
    assert allowed(robots, "/search?page=2")
    assert allowed(robots, "/")


def test_exact_path_with_dollar() -> None:
    robots = "User-agent: *\nDisallow: /$\n"
    assert not allowed(robots, "/")
    assert allowed(robots, "/index.html")


def test_longest_match_wins_and_allow_wins_ties() -> None:
    robots = (
        "User-agent: *\n"
        "Disallow: /shop/\n"
        "Allow: /shop/public/\n"
        "Disallow: /shop/public/secret\n"
        "Allow: /tie\n"
        "Disallow: /tie\n"
    )
    assert not allowed(robots, "/shop/cart")
    assert allowed(robots, "/shop/public/item")
    assert not allowed(robots, "/shop/public/secret-plans")
    assert allowed(robots, "/tie/x")  # equal length: Allow wins
    assert allowed(robots, "/other")


def test_crawl_delay_and_sitemaps() -> None:
    robots = (
        "Sitemap: https://example.com/sitemap.xml\n"
        "User-agent: *\nCrawl-delay: 2.5\n\n"
        "User-agent: slowbot\nCrawl-delay: 10\n"
        "Sitemap: https://example.com/news.xml\n"
    )
    policy = RobotsPolicy.parse(robots, UA)
    assert policy.crawl_delay == 2.5
    assert policy.sitemaps == ["https://example.com/sitemap.xml", "https://example.com/news.xml"]
    assert RobotsPolicy.parse(robots, "slowbot/2").crawl_delay == 10.0
    assert RobotsPolicy.parse("User-agent: *\nDisallow: /x\n", UA).crawl_delay is None
    assert RobotsPolicy.parse("User-agent: *\nCrawl-delay: soon\n", UA).crawl_delay is None
    assert repr(policy) == "<RobotsPolicy parsed, crawl_delay=2.5>"


def test_user_agent_groups() -> None:
    robots = (
        "User-agent: *\nDisallow: /\n\n"
        "User-agent: Trio-Crawl\nDisallow: /private/\n\n"
        "User-agent: github\nAllow: /\n"  # a word in our contact URL: must not apply to us
    )
    # Case-insensitive match on our product token; the specific group replaces "*".
    assert allowed(robots, "/shop/", UA)
    assert not allowed(robots, "/private/x", UA)
    # Another crawler falls back to "*".
    assert not allowed(robots, "/shop/", "otherbot/1.0")
    # Failing an exact match, a name our token extends with "-" or "_" applies...
    assert not allowed("User-agent: trio\nDisallow: /\n", "/a", UA)
    assert allowed("User-agent: trio\nDisallow: /\n\nUser-agent: trio-crawl\n", "/a", UA)
    # ... but not one in the middle of a word, nor a mere prefix.
    assert allowed("User-agent: crawl\nDisallow: /\n", "/a", UA)
    assert allowed("User-agent: tri\nDisallow: /\n", "/a", UA)
    # A name is the value up to the first character not in [A-Za-z0-9_-].
    assert not allowed("User-agent: trio-crawl/2 (beta)\nDisallow: /\n", "/a", UA)
    assert not allowed("User-agent: MyBot2\nDisallow: /\n", "/a", "MyBot2/1.0")
    assert allowed("User-agent: MyBot2\nDisallow: /\n", "/a", "MyBot/1.0")


def test_group_merging_over_several_user_agent_lines() -> None:
    robots = "User-agent: a-bot\nUser-agent: trio-crawl\nDisallow: /both/\n"
    assert not allowed(robots, "/both/x")
    assert not allowed(robots, "/both/x", "a-bot")
    assert allowed(robots, "/both/x", "c-bot")


def test_line_syntax() -> None:
    assert not allowed("user-agent trio-crawl\ndisallow /x\n", "/x")  # no colons
    assert not allowed("User-agent: *\nDisalow: /x\n", "/x")  # a common typo
    assert allowed("User-agent: *\nDisallow /x /y\n", "/x")  # three words: no directive
    assert allowed("User-agent: *\nDisallow: /x\n", "/y#/x")  # the fragment is not matched
    sitemap = "https://example.com/s.xml"
    assert RobotsTxt.parse(f"Sitemap {sitemap}\nSITEMAP:{sitemap}\n").sitemaps == [sitemap] * 2


def test_only_rules_end_a_group() -> None:
    """RFC 9309 2.2.4: sitemap, crawl-delay and unknown lines never end a group."""
    for line in ("Sitemap: https://example.com/s.xml", "Crawl-delay: 5", "Foo: bar", "", "# hi"):
        robots = f"User-agent: a-bot\n{line}\nUser-agent: trio-crawl\nDisallow: /x\n"
        assert not allowed(robots, "/x", "a-bot"), line
        assert not allowed(robots, "/x"), line
    assert allowed("Disallow: /x\nUser-agent: *\n", "/x")  # rules before any group: ignored


def test_crawl_delay_belongs_to_the_user_agent_lines_before_it() -> None:
    robots = "User-agent: a-bot\nCrawl-delay: 5\nUser-agent: b-bot\nDisallow: /x\n"
    assert RobotsPolicy.parse(robots, "a-bot").crawl_delay == 5.0
    assert RobotsPolicy.parse(robots, "b-bot").crawl_delay is None
    assert not RobotsPolicy.parse(robots, "a-bot").allows("http://example.com/x")
    # Several for one agent, merged groups included: the largest.
    robots = "User-agent: *\nCrawl-delay: 1\nCrawl-delay: 3\n\nUser-agent: *\nCrawl-delay: 2\n"
    assert RobotsPolicy.parse(robots, UA).crawl_delay == 3.0
    for bad in ("-1", "nan", "inf", ""):
        assert RobotsPolicy.parse(f"User-agent: *\nCrawl-delay: {bad}\n", UA).crawl_delay is None


def test_percent_encoding() -> None:
    # Non-ASCII in patterns is compared UTF-8-encoded; escapes are case-insensitive.
    assert not allowed("User-agent: *\nDisallow: /café\n", "/caf%C3%A9/menu")
    assert not allowed("User-agent: *\nDisallow: /caf%c3%a9\n", "/caf%C3%A9/menu")
    assert not allowed("User-agent: *\nDisallow: /caf%C3%A9\n", "/caf%c3%a9/menu")
    # RFC 9309 2.2.2: an encoded unreserved character in the URL compares decoded...
    assert not allowed("User-agent: *\nDisallow: /baz\n", "/%62az")
    assert not allowed("User-agent: *\nDisallow: /%7Euser/\n", "/~user/x")
    # ... so does one in a Disallow pattern, while an Allow pattern is taken as
    # written (Google's suite pins that; when in doubt, we do not fetch).
    assert not allowed("User-agent: *\nDisallow: /%62az\n", "/baz")
    assert not allowed("User-agent: *\nDisallow: /\nAllow: /%62az\n", "/baz")
    assert allowed("User-agent: *\nDisallow: /\nAllow: /%62az\n", "/%62az")
    assert allowed("User-agent: *\nDisallow: /\nAllow: /baz\n", "/%62az")
    # Reserved characters stay encoded: "/a%2Fb" is not "/a/b".
    assert allowed("User-agent: *\nDisallow: /a/b\n", "/a%2Fb")
    assert not allowed("User-agent: *\nDisallow: /a%2fb\n", "/a%2Fb")


def test_robots_txt_itself_and_long_lines() -> None:
    assert allowed("User-agent: *\nDisallow: /\n", "/robots.txt")  # RFC 9309 2.2.2
    assert not allowed("User-agent: *\nDisallow: /\n", "/robots.txt?x")
    # Google's cut at 8 * 2083 - 1 bytes counts UTF-8 bytes, not characters.
    robots = "User-agent: *\nDisallow: /" + "é" * 9000 + "\n"
    cut = "/" + "é" * ((8 * 2083 - 1 - len("Disallow: /")) // 2)
    assert not allowed(robots, quote(cut))
    assert allowed(robots, quote(cut[:-1]))


# Small alphabets so that patterns and paths often meet. No "%", digits or
# capitals in patterns: they could match the inside of an escape.
PATTERN = st.text("/ab-.~?=*$", max_size=8)
PATH = st.text("/ab-.~?=", max_size=10).map(lambda path: "/" + path)
RULES = st.lists(st.tuples(st.booleans(), PATTERN), max_size=6)


def robots_of(rules: list[tuple[bool, str]]) -> str:
    lines = [f"{'Allow' if allow else 'Disallow'}: {pattern}" for allow, pattern in rules]
    return "User-agent: *\n" + "".join(line + "\n" for line in lines)


def reference_allows(rules: list[tuple[bool, str]], path: str) -> bool:
    """RFC 9309 longest match, by brute force with regular expressions."""
    best: dict[bool, int] = {True: -1, False: -1}
    for allow, pattern in rules:
        anchored = pattern.endswith("$")
        body = pattern[:-1] if anchored else pattern
        regex = "".join(".*" if char == "*" else re.escape(char) for char in body)
        if pattern and re.fullmatch(regex + ("" if anchored else ".*"), path, re.DOTALL):
            best[allow] = max(best[allow], len(pattern))
    return best[False] <= best[True]


@settings(max_examples=400, deadline=None)
@given(RULES, PATH)
def test_decision_is_the_longest_match(rules: list[tuple[bool, str]], path: str) -> None:
    assert allowed(robots_of(rules), path) is reference_allows(rules, path)


@settings(max_examples=500, deadline=None)
@given(st.text("/ab*$", max_size=7), st.text("/ab", max_size=8))
@example("/a*a", "a")  # a part may not match inside the text before it
@example("/a*a$", "a")
@example("/*a*b", "aba")  # each part is taken at its leftmost place
def test_one_pattern_matches_as_a_regular_expression_would(pattern: str, tail: str) -> None:
    path = "/" + tail
    for allow in (False, True):
        rules = [(allow, pattern), (not allow, "/")]  # "/" decides when the pattern misses
        assert allowed(robots_of(rules), path) is reference_allows(rules, path)


@settings(max_examples=200, deadline=None)
@given(RULES, PATH, st.data())
def test_encoding_an_unreserved_character_never_changes_the_decision(
    rules: list[tuple[bool, str]], path: str, data: st.DataObject
) -> None:
    encode = data.draw(st.lists(st.booleans(), min_size=len(path), max_size=len(path)))
    encoded = "".join(
        f"%{ord(char):02{data.draw(st.sampled_from('Xx'))}}"
        if flip and char not in "/?="
        else char
        for char, flip in zip(path, encode, strict=True)
    )
    robots = robots_of(rules)
    assert allowed(robots, encoded) is allowed(robots, path), encoded


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.text(max_size=40), st.text(max_size=40))
def test_any_file_agent_and_url_gives_a_decision(robots: str, agent: str, url: str) -> None:
    assert RobotsTxt.parse(robots).allowed(agent, url) in (True, False)
    assert RobotsTxt.parse(robots).allowed(agent, "http://example.com/" + url) in (True, False)


def test_allow_all_and_disallow_all() -> None:
    assert RobotsPolicy.allow_all().allows("http://example.com/x")
    denied = RobotsPolicy.disallow_all("because", temporary=True)
    assert not denied.allows("http://example.com/x")
    assert denied.temporary
    assert denied.crawl_delay is None
    assert denied.sitemaps == []
    assert repr(denied) == "<RobotsPolicy because>"


def test_decode_robots_drops_bom_and_replaces_bad_bytes() -> None:
    assert decode_robots(b"\xef\xbb\xbfUser-agent: *\n") == "User-agent: *\n"
    assert decode_robots(b"\xef\xbbUser-agent: *\n") == "User-agent: *\n"  # partial
    assert decode_robots(b"\xefUser-agent: *\n") == "User-agent: *\n"
    assert decode_robots(b"\xef\x11User-agent: *\n") == "\x11User-agent: *\n"
    assert decode_robots(b"\n\xef\xbb\xbf") == "\n\ufeff"  # only at the start
    assert decode_robots(b"Disallow: /caf\xe9\n") == "Disallow: /caf\ufffd\n"
    policy = RobotsPolicy.parse(decode_robots(b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n"), UA)
    assert not policy.allows("http://example.com/x")


def test_decode_robots_caps_at_500_kib_on_a_line_boundary() -> None:
    line = b"Disallow: /private-directory-number-0001\n"
    body = b"User-agent: *\n" + line * (2 * MAX_ROBOTS_BYTES // len(line))
    text = decode_robots(body)
    assert len(text) <= MAX_ROBOTS_BYTES
    assert len(text) > MAX_ROBOTS_BYTES - len(line)
    assert text.endswith("\n")
    assert text.splitlines()[-1] == line.decode().strip()
    assert decode_robots(b"x" * (MAX_ROBOTS_BYTES + 1)) == ""  # no whole line fits


# ---------------------------------------------------------------- interpret_robots_response


def interpret(
    status: int | None, body: bytes = b"", location: str | None = None, hops: int = 0
) -> RobotsFinal | RobotsFollow:
    return interpret_robots_response(
        "http://example.com/robots.txt", status, body, location, user_agent=UA, hops=hops
    )


def test_interpret_2xx_parses() -> None:
    decision = interpret(200, b"User-agent: *\nDisallow: /x\n")
    assert isinstance(decision, RobotsFinal)
    assert decision.ttl == 24 * 3600.0
    assert decision.policy.reason == "parsed"
    assert not decision.policy.allows("http://example.com/x")


def test_interpret_redirects() -> None:
    assert interpret(301, location="/real-robots.txt") == RobotsFollow(
        "http://example.com/real-robots.txt"
    )
    assert interpret(302, location="https://cdn.example.net/r.txt#f", hops=4) == RobotsFollow(
        "https://cdn.example.net/r.txt"
    )
    for status, location, hops, reason in [
        (301, "/again", 5, "robots.txt unavailable: more than 5 redirects"),
        (302, None, 0, "robots.txt unavailable: 302 without Location"),
        (307, "mailto:x@example.com", 0, "robots.txt unavailable: 307 without Location"),
        (308, "http://example.com:99999/", 0, "robots.txt unavailable: 308 without Location"),
    ]:
        decision = interpret(status, location=location, hops=hops)
        assert isinstance(decision, RobotsFinal)
        assert decision.policy.reason == reason
        assert decision.policy.allows("http://example.com/anything")
        assert not decision.policy.temporary


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
def test_interpret_4xx_allows_all(status: int) -> None:
    decision = interpret(status, b"User-agent: *\nDisallow: /\n")
    assert isinstance(decision, RobotsFinal)
    assert decision.policy.allows("http://example.com/x")
    assert decision.policy.reason == f"robots.txt unavailable: {status}"
    assert decision.ttl == 24 * 3600.0


@pytest.mark.parametrize("status", [None, 429, 500, 503, 599, 100, 600])
def test_interpret_unreachable_disallows_for_a_while(status: int | None) -> None:
    decision = interpret(status)
    assert isinstance(decision, RobotsFinal)
    assert not decision.policy.allows("http://example.com/x")
    assert decision.policy.temporary
    assert decision.ttl == 60.0


# ---------------------------------------------------------------- RobotsCache


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    location: str | None = None
    delay: float = 0.0
    error: str | None = None  # FetchError kind
    skipped: bool = False


class FakeFetcher:
    """An in-memory site: each URL answers its list in turn, the last one repeating."""

    def __init__(self, routes: Mapping[str, Sequence[Answer]]) -> None:
        self.routes = routes
        self.calls: list[tuple[float, str]] = []

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        assert any_body, "robots.txt must be fetched with any_body=True"
        answers = self.routes.get(url, [Answer(404)])
        seen = sum(1 for _, u in self.calls if u == url)
        answer = answers[min(seen, len(answers) - 1)]
        self.calls.append((trio.current_time(), url))
        await trio.sleep(answer.delay)
        if answer.error:
            raise FetchError(answer.error, "fake")
        headers_out = {"content-type": "text/plain"}
        if answer.location:
            headers_out["location"] = answer.location
        return FetchResult(
            url=url,
            status=answer.status,
            headers=headers_out,
            body=b"" if answer.skipped else answer.body,
            elapsed=answer.delay,
            body_skipped=answer.skipped,
        )

    async def aclose(self) -> None:
        pass

    def urls(self) -> list[str]:
        return [u for _, u in self.calls]


A = "http://a.test/robots.txt"
B = "http://b.test/robots.txt"
DISALLOW_X = b"User-agent: *\nDisallow: /x\nCrawl-delay: 1.5\n"


async def test_cache_fetches_once_and_reuses(autojump_clock: trio.testing.MockClock) -> None:
    fetcher = FakeFetcher({A: [Answer(body=DISALLOW_X)]})
    cache = RobotsCache(fetcher, UA)
    assert cache.policy_nowait("http://a.test/x") is None
    policy = await cache.policy_for("http://a.test/x")
    assert not policy.allows("http://a.test/x")
    assert policy.crawl_delay == 1.5
    assert await cache.policy_for("http://A.test:80/y?z") is policy
    assert cache.policy_nowait("http://a.test/other") is policy
    assert fetcher.urls() == [A]
    assert repr(cache) == "<RobotsCache origins=1 fetching=0 requests=1 unreachable=0>"


async def test_cache_4xx_allows_all(autojump_clock: trio.testing.MockClock) -> None:
    fetcher = FakeFetcher({})
    cache = RobotsCache(fetcher, UA)
    policy = await cache.policy_for("http://a.test/anything")
    assert policy.allows("http://a.test/anything")
    assert policy.reason == "robots.txt unavailable: 404"
    await cache.policy_for("http://a.test/else")
    assert fetcher.urls() == [A]


async def test_cache_5xx_disallows_then_refetches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fetcher = FakeFetcher({A: [Answer(503), Answer(body=DISALLOW_X)]})
    cache = RobotsCache(fetcher, UA, retry_period=60.0)
    start = trio.current_time()
    policy = await cache.policy_for("http://a.test/page")
    assert not policy.allows("http://a.test/page")
    assert policy.temporary
    assert policy.reason == "robots.txt unreachable: 503"
    await trio.sleep(59.5)
    assert await cache.policy_for("http://a.test/page") is policy  # still cached
    await trio.sleep(0.5)
    assert cache.policy_nowait("http://a.test/page") is None  # expired exactly at +60
    fresh = await cache.policy_for("http://a.test/page")
    assert fresh.allows("http://a.test/page")
    assert not fresh.allows("http://a.test/x")
    assert [t - start for t, _ in fetcher.calls] == [0.0, 60.0]
    assert cache.statistics().unreachable == 1


async def test_cache_fetch_error_is_unreachable(autojump_clock: trio.testing.MockClock) -> None:
    fetcher = FakeFetcher({A: [Answer(error="connect"), Answer(error="timeout", delay=5.0)]})
    cache = RobotsCache(fetcher, UA, retry_period=30.0)
    start = trio.current_time()
    policy = await cache.policy_for("http://a.test/")
    assert policy.reason.startswith("robots.txt unreachable (connect: ")
    assert not policy.allows("http://a.test/")
    await trio.sleep(30.0)
    await cache.policy_for("http://a.test/")
    # The second decision is stored when its 5 s fetch ends, so it lasts until 30 + 5 + 30.
    assert trio.current_time() - start == 35.0
    await trio.sleep(29.5)
    assert cache.policy_nowait("http://a.test/") is not None
    await trio.sleep(0.5)
    assert cache.policy_nowait("http://a.test/") is None
    assert [t - start for t, _ in fetcher.calls] == [0.0, 30.0]


async def test_cache_parsed_policy_expires_after_max_age(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fetcher = FakeFetcher({A: [Answer(body=DISALLOW_X)]})
    cache = RobotsCache(fetcher, UA)
    await cache.policy_for("http://a.test/")
    await trio.sleep(24 * 3600.0)
    await cache.policy_for("http://a.test/")
    assert len(fetcher.calls) == 2


async def test_cache_follows_five_redirects(autojump_clock: trio.testing.MockClock) -> None:
    hops = [f"http://a.test/r{i}" for i in range(1, 5)]
    routes = {A: [Answer(301, location="/r1")]}
    for here, there in zip(hops, [*hops[1:], "http://cdn.test/robots.txt"], strict=True):
        routes[here] = [Answer(302, location=there)]
    routes["http://cdn.test/robots.txt"] = [Answer(body=DISALLOW_X)]
    fetcher = FakeFetcher(routes)
    cache = RobotsCache(fetcher, UA)
    policy = await cache.policy_for("http://a.test/x")
    assert policy.reason == "parsed"
    assert not policy.allows("http://a.test/x")  # the file found applies to a.test
    assert fetcher.urls() == [A, *hops, "http://cdn.test/robots.txt"]
    assert cache.statistics().requests == 6
    # The target's own origin is not cached by following a redirect to it.
    assert cache.policy_nowait("http://cdn.test/") is None


async def test_cache_gives_up_after_five_redirects(
    autojump_clock: trio.testing.MockClock,
) -> None:
    loop = {
        A: [Answer(301, location="/loop")],
        "http://a.test/loop": [Answer(301, location="/loop")],
    }
    fetcher = FakeFetcher(loop)
    cache = RobotsCache(fetcher, UA)
    policy = await cache.policy_for("http://a.test/x")
    assert policy.allows("http://a.test/x")
    assert policy.reason == "robots.txt unavailable: more than 5 redirects"
    assert fetcher.urls() == [A] + ["http://a.test/loop"] * 5


async def test_concurrent_callers_share_one_fetch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fetcher = FakeFetcher(
        {A: [Answer(body=DISALLOW_X, delay=10.0)], B: [Answer(body=b"", delay=1.0)]}
    )
    cache = RobotsCache(fetcher, UA)
    got: list[tuple[str, float, RobotsPolicy]] = []
    start = trio.current_time()

    async def ask(url: str) -> None:
        policy = await cache.policy_for(url)
        got.append((url, trio.current_time() - start, policy))

    with trio.fail_after(100):  # a stranded waiter fails in virtual time
        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(ask, f"http://a.test/{i}")
            await trio.testing.wait_all_tasks_blocked()
            assert cache.statistics().fetching == 1
            nursery.start_soon(ask, "http://b.test/")  # not blocked behind a.test
    assert fetcher.urls() == [A, B]
    assert got[0][:2] == ("http://b.test/", 1.0)
    assert sorted((u, t) for u, t, _ in got[1:]) == [
        (f"http://a.test/{i}", 10.0) for i in range(5)
    ]
    assert len({id(p) for u, _, p in got if "a.test" in u}) == 1


async def test_cancelled_fetcher_does_not_strand_waiters(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fetcher = FakeFetcher({A: [Answer(body=DISALLOW_X, delay=10.0)]})
    cache = RobotsCache(fetcher, UA)
    start = trio.current_time()
    waiter_result: list[tuple[float, RobotsPolicy]] = []

    async def waiter() -> None:
        policy = await cache.policy_for("http://a.test/w")
        waiter_result.append((trio.current_time() - start, policy))

    with trio.fail_after(100):  # a stranded waiter fails in virtual time
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(3.0) as scope:
                nursery.start_soon(waiter)  # starts after we are parked in the fetch
                await cache.policy_for("http://a.test/first")
            assert scope.cancelled_caught
            # Abandoned: nothing stored, nobody fetching until the waiter runs.
            assert cache.statistics().fetching == 0
            assert cache.policy_nowait("http://a.test/") is None
    # The waiter took over at t=3 and its own fetch took 10 s.
    assert [t for t, _ in waiter_result] == [13.0]
    assert not waiter_result[0][1].allows("http://a.test/x")
    assert [t - start for t, _ in fetcher.calls] == [0.0, 3.0]
    assert cache.statistics().fetching == 0


async def test_cancelled_waiter_leaves_fetch_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fetcher = FakeFetcher({A: [Answer(body=DISALLOW_X, delay=10.0)]})
    cache = RobotsCache(fetcher, UA)
    with trio.fail_after(100):  # a stranded waiter fails in virtual time
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cache.policy_for, "http://a.test/first")
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1.0):
                await cache.policy_for("http://a.test/second")
    assert cache.policy_nowait("http://a.test/") is not None
    assert len(fetcher.calls) == 1


async def test_fetcher_that_skips_the_body_is_a_loud_bug(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cache = RobotsCache(FakeFetcher({A: [Answer(body=DISALLOW_X, skipped=True)]}), UA)
    with pytest.raises(RuntimeError, match=r"a Fetcher bug$"):
        await cache.policy_for("http://a.test/")
    assert cache.statistics().fetching == 0


def test_cache_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError, match=r"^no product token"):
        RobotsCache(FakeFetcher({}), "")
    with pytest.raises(ValueError, match=r"must be >= 0$"):
        RobotsCache(FakeFetcher({}), UA, retry_period=-1.0)


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(["/", "/a", "/a*", "/a$", "*", "/index.html", ""]), max_size=4),
    st.lists(st.sampled_from(["", "/", "/a", "/a*b", "/a$", "/*.php$", "/b/"]), max_size=4),
    st.text(st.sampled_from("/ab.indexhtmlp?=$*"), max_size=12),
)
def test_rules_answer_as_their_longest_match(
    allows: list[str], disallows: list[str], path: str
) -> None:
    """Whatever the rules (those with no Disallow are answered without
    matching), the answer is the first matching rule's in rank order (longest
    first, Allow first on a tie), yes when none matches: a model that asks
    every rule."""
    lines = [f"Allow: {a}" for a in allows] + [f"Disallow: {d}" for d in disallows]
    rules = RobotsTxt.parse("User-agent: *\n" + "\n".join(lines) + "\n").rules_for("bot")
    url = "http://h.example/" + path.lstrip("/")
    ranked = sorted(rules._rules, key=lambda rule: rule.rank)
    matching = [rule.allow for rule in ranked if rule.matches(path_params_query(url))]
    assert rules.allows(url) == (matching[0] if matching else True)
    if not any(disallows):
        assert rules.allows(url)
