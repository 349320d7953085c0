"""Google's robots.txt test suite, run against our robots.txt decisions.

The cases in this file were transcribed from ``robots_test.cc`` in Google's
open-source robots.txt parser, https://github.com/google/robotstxt (Copyright
2019 Google LLC, Apache License 2.0), at commit ``c8ac4b1``. Only the test
*data* was transcribed: each robots.txt body, user agent, URL and expected
answer, grouped under the name of the C++ test it comes from. No code was
copied; the long-line bodies of ``GoogleOnly_LineTooLong`` are rebuilt here
from the sizes that test states.

Three kinds of case:

* ``MATCHER_CASES``: Google's ``IsUserAgentAllowed(robotstxt, agent, url)``.
  Each runs twice. Through the engine's own entry point, exactly as
  ``RobotsCache`` decides: ``interpret_robots_response`` on a 200 with the body
  as bytes and a User-Agent *header* built from the agent, then
  ``policy.allows(url)``. And through ``RobotsTxt.allowed(agent, url)``, which
  takes the agent as the product token itself, as Google's function does.
* User-agent validity (``IsValidUserAgentToObey``) and the parser-level tests
  (line counting, byte order marks, sitemaps), mapped onto ``parse_lines``.
* Google's two integrity tests of internal helpers (path extraction and
  pattern escaping), mapped onto ours.

Where our API cannot express a case as Google states it, the case is still
transcribed verbatim and a separate test says what we do instead and why:
see ``test_agents_that_are_not_product_tokens``.

Run: ``pytest tests/test_robots_google.py -q``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from trio_crawl.robots.policy import RobotsFinal, decode_robots, interpret_robots_response
from trio_crawl.robots.rules import (
    RobotsTxt,
    escape_pattern,
    is_valid_product_token,
    parse_lines,
    path_params_query,
)


@dataclass(frozen=True)
class Case:
    test: str  # the robots_test.cc TEST it comes from
    robots: str
    agent: str
    url: str
    allowed: bool


MATCHER_CASES: list[Case] = []


def expect(test: str, robots: str, agent: str, *answers: tuple[str, bool]) -> None:
    """Record Google's EXPECT_TRUE/EXPECT_FALSE answers for one body and agent."""
    MATCHER_CASES.extend(Case(test, robots, agent, url, ok) for url, ok in answers)


T, F = True, False

# ---------------------------------------------------------------- GoogleOnly_SystemTest

FOOBOT_DISALLOW_ALL = "user-agent: FooBot\ndisallow: /\n"
expect("GoogleOnly_SystemTest", "", "FooBot", ("", T))  # empty robots.txt
expect("GoogleOnly_SystemTest", FOOBOT_DISALLOW_ALL, "", ("", T))  # empty user agent
expect("GoogleOnly_SystemTest", FOOBOT_DISALLOW_ALL, "FooBot", ("", F))  # empty URL is "/"
expect("GoogleOnly_SystemTest", "", "", ("", T))  # all empty

# ---------------------------------------------------------------- ID_LineSyntax_Line

expect(
    "ID_LineSyntax_Line", "user-agent: FooBot\ndisallow: /\n", "FooBot", ("http://foo.bar/x/y", F)
)
expect("ID_LineSyntax_Line", "foo: FooBot\nbar: /\n", "FooBot", ("http://foo.bar/x/y", T))
# Google-specific: a missing colon is accepted.
expect(
    "ID_LineSyntax_Line", "user-agent FooBot\ndisallow /\n", "FooBot", ("http://foo.bar/x/y", F)
)

# ---------------------------------------------------------------- ID_LineSyntax_Groups

GROUPS = (
    "allow: /foo/bar/\n"
    "\n"
    "user-agent: FooBot\n"
    "disallow: /\n"
    "allow: /x/\n"
    "user-agent: BarBot\n"
    "disallow: /\n"
    "allow: /y/\n"
    "\n"
    "\n"
    "allow: /w/\n"
    "user-agent: BazBot\n"
    "\n"
    "user-agent: FooBot\n"
    "allow: /z/\n"
    "disallow: /\n"
)
expect(
    "ID_LineSyntax_Groups",
    GROUPS,
    "FooBot",
    ("http://foo.bar/x/b", T),
    ("http://foo.bar/z/d", T),
    ("http://foo.bar/y/c", F),
)
expect(
    "ID_LineSyntax_Groups",
    GROUPS,
    "BarBot",
    ("http://foo.bar/y/c", T),
    ("http://foo.bar/w/a", T),
    ("http://foo.bar/z/d", F),
)
expect("ID_LineSyntax_Groups", GROUPS, "BazBot", ("http://foo.bar/z/d", T))
# Rules outside groups are ignored.
for _agent in ("FooBot", "BarBot", "BazBot"):
    expect("ID_LineSyntax_Groups", GROUPS, _agent, ("http://foo.bar/foo/bar/", F))

# ---------------------------------------------------------------- ID_LineSyntax_Groups_OtherRules

# Lines other than user-agent/allow/disallow do not close a group.
for _robots in (
    "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
    "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
):
    for _agent in ("FooBot", "BarBot"):
        expect("ID_LineSyntax_Groups_OtherRules", _robots, _agent, ("http://foo.bar/", F))

# ---------------------------------------------------------------- ID_REPLineNamesCaseInsensitive

for _robots in (
    "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
    "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
    "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
):
    expect(
        "ID_REPLineNamesCaseInsensitive",
        _robots,
        "FooBot",
        ("http://foo.bar/x/y", T),
        ("http://foo.bar/a/b", F),
    )

# ---------------------------------------------------------------- ID_UserAgentValueCaseInsensitive

for _agent in ("Foo", "foo"):
    for _robots in (
        "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
        "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
        "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
    ):
        expect(
            "ID_UserAgentValueCaseInsensitive",
            _robots,
            _agent,
            ("http://foo.bar/x/y", T),
            ("http://foo.bar/a/b", F),
        )

# ------------------------------------------------ GoogleOnly_AcceptUserAgentUpToFirstSpace

UP_TO_FIRST_SPACE = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
expect(
    "GoogleOnly_AcceptUserAgentUpToFirstSpace", UP_TO_FIRST_SPACE, "Foo", ("http://foo.bar/x/y", T)
)
expect(
    "GoogleOnly_AcceptUserAgentUpToFirstSpace",
    UP_TO_FIRST_SPACE,
    "Foo Bar",
    ("http://foo.bar/x/y", F),
)

# ---------------------------------------------------------------- ID_GlobalGroups_Secondary

GLOBAL = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
ONLY_SPECIFIC = (
    "user-agent: FooBot\nallow: /\n"
    "user-agent: BarBot\ndisallow: /\n"
    "user-agent: BazBot\ndisallow: /\n"
)
expect("ID_GlobalGroups_Secondary", "", "FooBot", ("http://foo.bar/x/y", T))
expect("ID_GlobalGroups_Secondary", GLOBAL, "FooBot", ("http://foo.bar/x/y", F))
expect("ID_GlobalGroups_Secondary", GLOBAL, "BarBot", ("http://foo.bar/x/y", T))
expect("ID_GlobalGroups_Secondary", ONLY_SPECIFIC, "QuxBot", ("http://foo.bar/x/y", T))

# ------------------------------------------------ ID_AllowDisallow_Value_CaseSensitive

expect(
    "ID_AllowDisallow_Value_CaseSensitive",
    "user-agent: FooBot\ndisallow: /x/\n",
    "FooBot",
    ("http://foo.bar/x/y", F),
)
expect(
    "ID_AllowDisallow_Value_CaseSensitive",
    "user-agent: FooBot\ndisallow: /X/\n",
    "FooBot",
    ("http://foo.bar/x/y", T),
)

# ---------------------------------------------------------------- ID_LongestMatch

PAGE = "http://foo.bar/x/page.html"
LM = "ID_LongestMatch"
expect(LM, "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", "FooBot", (PAGE, F))
expect(
    LM,
    "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
    "FooBot",
    (PAGE, T),
    ("http://foo.bar/x/", F),
)
# Equivalent allow and disallow patterns: allow wins.
expect(LM, "user-agent: FooBot\ndisallow: \nallow: \n", "FooBot", (PAGE, T))
expect(LM, "user-agent: FooBot\ndisallow: /\nallow: /\n", "FooBot", (PAGE, T))
expect(
    LM,
    "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
    "FooBot",
    ("http://foo.bar/x", F),
    ("http://foo.bar/x/", T),
)
expect(
    LM, "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n", "FooBot", (PAGE, T)
)
expect(
    LM,
    "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
    "FooBot",
    ("http://foo.bar/page.html", F),
    ("http://foo.bar/page", T),
)
expect(
    LM,
    "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
    "FooBot",
    (PAGE, T),
    ("http://foo.bar/x/y.html", F),
)
# The most specific group for FooBot implicitly allows /x/page.
expect(
    LM,
    "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
    "FooBot",
    ("http://foo.bar/x/page", T),
    ("http://foo.bar/y/page", F),
)

# ---------------------------------------------------------------- ID_Encoding

ENC = "ID_Encoding"
expect(
    ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
    "FooBot",
    ("http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par", T),
)
# A 3-byte character in a pattern is percent-encoded; the URL is the
# caller's to encode, so a raw one does not match.
expect(
    ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
    "FooBot",
    ("http://foo.bar/foo/bar/%E3%83%84", T),
    ("http://foo.bar/foo/bar/ツ", F),
)
expect(
    ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
    "FooBot",
    ("http://foo.bar/foo/bar/%E3%83%84", T),
    ("http://foo.bar/foo/bar/ツ", F),
)
# Percent-encoded unreserved characters in an Allow pattern are matched as
# written (Google: "illegal according to RFC3986 ... should not be relied on").
expect(
    ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
    "FooBot",
    ("http://foo.bar/foo/bar/baz", F),
    ("http://foo.bar/foo/bar/%62%61%7A", T),
)

# ---------------------------------------------------------------- ID_SpecialCharacters

SC = "ID_SpecialCharacters"
expect(
    SC,
    "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
    "FooBot",
    ("http://foo.bar/foo/bar/quz", F),
    ("http://foo.bar/foo/quz", T),
    ("http://foo.bar/foo//quz", T),
    ("http://foo.bar/foo/bax/quz", T),
)
expect(
    SC,
    "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
    "FooBot",
    ("http://foo.bar/foo/bar", F),
    ("http://foo.bar/foo/bar/qux", T),
    ("http://foo.bar/foo/bar/", T),
    ("http://foo.bar/foo/bar/baz", T),
)
expect(
    SC,
    "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
    "FooBot",
    ("http://foo.bar/foo/bar", T),
    ("http://foo.bar/foo/quz", F),
)

# ---------------------------------------------------------------- GoogleOnly_IndexHTMLisDirectory

expect(
    "GoogleOnly_IndexHTMLisDirectory",
    "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
    "foobot",
    ("http://foo.com/allowed-slash/", T),
    ("http://foo.com/allowed-slash/index.htm", F),
    ("http://foo.com/allowed-slash/index.html", T),
    ("http://foo.com/anyother-url", F),
)

# ---------------------------------------------------------------- GoogleOnly_LineTooLong

# Lines are cut after 8 * 2083 bytes. The test pads "/x/" with "a" (or "b")
# to 8 * 2083 - len("/x/") - len(directive) + len("\n") characters, so the
# cut falls inside the "/qux" that follows.
MAX_LINE = 2083 * 8
_size = MAX_LINE - len("/x/") - len("disallow: ") + 1  # the padded path's length
_long = "/x/" + "a" * (_size - len("/x/"))
expect(
    "GoogleOnly_LineTooLong",
    "user-agent: FooBot\n" + "disallow: " + _long + "/qux\n",
    "FooBot",
    ("http://foo.bar/fux", T),  # matches nothing
    ("http://foo.bar" + _long + "/fux", F),  # matches the cut-off disallow rule
)
_size = MAX_LINE - len("/x/") - len("allow: ") + 1
_long_a, _long_b = "/x/" + "a" * (_size - 3), "/x/" + "b" * (_size - 3)
expect(
    "GoogleOnly_LineTooLong",
    "user-agent: FooBot\ndisallow: /\n"
    + ("allow: " + _long_a + "/qux\n")
    + ("allow: " + _long_b + "/qux\n"),
    "FooBot",
    ("http://foo.bar/", F),
    ("http://foo.bar" + _long_a + "/qux", T),  # matches the allow rule exactly
    ("http://foo.bar" + _long_b + "/fux", T),  # matches the cut-off allow rule
)

# ---------------------------------------------------------------- GoogleOnly_DocumentationChecks

DOC = "GoogleOnly_DocumentationChecks"
# Section "URL matching based on path values".
expect(
    DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
    "FooBot",
    ("http://foo.bar/bar", F),
    ("http://foo.bar/fish", T),
    ("http://foo.bar/fish.html", T),
    ("http://foo.bar/fish/salmon.html", T),
    ("http://foo.bar/fishheads", T),
    ("http://foo.bar/fishheads/yummy.html", T),
    ("http://foo.bar/fish.html?id=anything", T),
    ("http://foo.bar/Fish.asp", F),
    ("http://foo.bar/catfish", F),
    ("http://foo.bar/?id=fish", F),
)
# "/fish*" equals "/fish".
expect(
    DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
    "FooBot",
    ("http://foo.bar/bar", F),
    ("http://foo.bar/fish", T),
    ("http://foo.bar/fish.html", T),
    ("http://foo.bar/fish/salmon.html", T),
    ("http://foo.bar/fishheads", T),
    ("http://foo.bar/fishheads/yummy.html", T),
    ("http://foo.bar/fish.html?id=anything", T),
    ("http://foo.bar/Fish.bar", F),
    ("http://foo.bar/catfish", F),
    ("http://foo.bar/?id=fish", F),
)
# "/fish/" does not equal "/fish".
expect(
    DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
    "FooBot",
    ("http://foo.bar/bar", F),
    ("http://foo.bar/fish/", T),
    ("http://foo.bar/fish/salmon", T),
    ("http://foo.bar/fish/?salmon", T),
    ("http://foo.bar/fish/salmon.html", T),
    ("http://foo.bar/fish/?id=anything", T),
    ("http://foo.bar/fish", F),
    ("http://foo.bar/fish.html", F),
    ("http://foo.bar/Fish/Salmon.html", F),
)
# "/*.php"
expect(
    DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
    "FooBot",
    ("http://foo.bar/bar", F),
    ("http://foo.bar/filename.php", T),
    ("http://foo.bar/folder/filename.php", T),
    ("http://foo.bar/folder/filename.php?parameters", T),
    ("http://foo.bar//folder/any.php.file.html", T),
    ("http://foo.bar/filename.php/", T),
    ("http://foo.bar/index?f=filename.php/", T),
    ("http://foo.bar/php/", F),
    ("http://foo.bar/index?php", F),
    ("http://foo.bar/windows.PHP", F),
)
# "/*.php$"
expect(
    DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
    "FooBot",
    ("http://foo.bar/bar", F),
    ("http://foo.bar/filename.php", T),
    ("http://foo.bar/folder/filename.php", T),
    ("http://foo.bar/filename.php?parameters", F),
    ("http://foo.bar/filename.php/", F),
    ("http://foo.bar/filename.php5", F),
    ("http://foo.bar/php/", F),
    ("http://foo.bar/filename?php", F),
    ("http://foo.bar/aaaphpaaa", F),
    ("http://foo.bar//windows.PHP", F),
)
# "/fish*.php"
expect(
    DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
    "FooBot",
    ("http://foo.bar/bar", F),
    ("http://foo.bar/fish.php", T),
    ("http://foo.bar/fishheads/catfish.php?parameters", T),
    ("http://foo.bar/Fish.PHP", F),
)
# Section "Order of precedence for group-member records".
expect(
    DOC, "user-agent: FooBot\nallow: /p\ndisallow: /\n", "FooBot", ("http://example.com/page", T)
)
expect(
    DOC,
    "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
    "FooBot",
    ("http://example.com/folder/page", T),
)
expect(
    DOC,
    "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
    "FooBot",
    ("http://example.com/page.htm", F),
)
expect(
    DOC,
    "user-agent: FooBot\nallow: /$\ndisallow: /\n",
    "FooBot",
    ("http://example.com/", T),
    ("http://example.com/page.html", F),
)


def _case_id(case: Case) -> str:
    return f"{case.test}-{MATCHER_CASES.index(case)}"


# Agents our engine cannot send as Google states them: a User-Agent header
# always has a non-empty product token without spaces.
NOT_PRODUCT_TOKENS = {"", "Foo Bar"}


def engine_allows(robots: bytes, user_agent: str, url: str) -> bool:
    """The decision exactly as RobotsCache reaches it for a 200 answer."""
    decision = interpret_robots_response(
        "http://foo.bar/robots.txt", 200, robots, None, user_agent=user_agent
    )
    assert isinstance(decision, RobotsFinal)
    return decision.policy.allows(url)


@pytest.mark.parametrize(
    "case",
    [c for c in MATCHER_CASES if c.agent not in NOT_PRODUCT_TOKENS],
    ids=_case_id,
)
@pytest.mark.parametrize("header", ["{}", "{}/0.1 (+https://example.org/bot.html)"])
def test_engine_decision(case: Case, header: str) -> None:
    user_agent = header.format(case.agent)
    assert engine_allows(case.robots.encode(), user_agent, case.url) is case.allowed


@pytest.mark.parametrize("case", MATCHER_CASES, ids=_case_id)
def test_matcher_decision(case: Case) -> None:
    assert RobotsTxt.parse(case.robots).allowed(case.agent, case.url) is case.allowed


def test_agents_that_are_not_product_tokens() -> None:
    """The three cases whose agent is no product token, through the engine's entry point.

    Google's function takes the product token itself; ours takes a User-Agent
    header and matches its product token, the text before the first "/" or
    space. So an empty agent is refused up front (RobotsCache refuses it when
    it is built), and the header "Foo Bar" has the product token "Foo", whose
    group applies. ``test_matcher_decision`` runs all three with Google's
    expectations through ``RobotsTxt.allowed``, which takes the token as is.
    """
    robots = FOOBOT_DISALLOW_ALL.encode()
    with pytest.raises(ValueError, match=r"^no product token"):
        engine_allows(robots, "", "")
    assert engine_allows(UP_TO_FIRST_SPACE.encode(), "Foo Bar", "http://foo.bar/x/y")
    assert engine_allows(UP_TO_FIRST_SPACE.encode(), "Foo", "http://foo.bar/x/y")


# ---------------------------------------------------------------- ID_VerifyValidUserAgentsToObey


@pytest.mark.parametrize(
    ("agent", "valid"),
    [
        ("Foobot", T),
        ("Foobot-Bar", T),
        ("Foo_Bar", T),
        ("", F),  # Google checks both a null and an empty string_view
        ("", F),
        ("ツ", F),
        ("Foobot*", F),
        (" Foobot ", F),
        ("Foobot/2.1", F),
        ("Foobot Bar", F),
        ("Foobot Bar", F),  # again in GoogleOnly_AcceptUserAgentUpToFirstSpace
    ],
)
def test_valid_product_token(agent: str, valid: bool) -> None:
    assert is_valid_product_token(agent) is valid


# ---------------------------------------------------------------- parser-level tests

# Google counts user-agent, allow, disallow and sitemap lines as "valid
# directives" and everything else with a key as unknown.
VALID = {"user-agent", "allow", "disallow", "sitemap"}


def directive_counts(body: bytes) -> tuple[int, int, int]:
    """(valid directives, unknown directives, last line with either) in ``body``."""
    lines = list(parse_lines(decode_robots(body)))
    valid = [line for line in lines if line.kind in VALID]
    unknown = [line for line in lines if line.kind == "unknown"]
    return len(valid), len(unknown), max((line.number for line in lines), default=0)


@pytest.mark.parametrize(
    "body",
    [
        b"User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
        b"User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
        b"User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
        b"User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
        b"User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
    ],
    ids=["unix", "dos", "mac", "no-final-newline", "mixed"],
)
def test_lines_numbers_are_counted_correctly(body: bytes) -> None:
    """ID_LinesNumbersAreCountedCorrectly: 4 directives, the last on line 6."""
    valid, _, last = directive_counts(body)
    assert (valid, last) == (4, 6)


@pytest.mark.parametrize(
    ("body", "valid", "unknown"),
    [
        (b"\xef\xbb\xbfUser-Agent: foo\nAllow: /AnyValue\n", 2, 0),
        (b"\xef\xbbUser-Agent: foo\nAllow: /AnyValue\n", 2, 0),  # partial BOMs too
        (b"\xefUser-Agent: foo\nAllow: /AnyValue\n", 2, 0),
        (b"\xef\x11\xbfUser-Agent: foo\nAllow: /AnyValue\n", 1, 1),  # broken: garbage line
        (b"User-Agent: foo\n\xef\xbb\xbfAllow: /AnyValue\n", 1, 1),  # only at the start
    ],
    ids=["full", "partial-2", "partial-1", "broken", "mid-file"],
)
def test_utf8_byte_order_mark_is_skipped(body: bytes, valid: int, unknown: int) -> None:
    """ID_UTF8ByteOrderMarkIsSkipped."""
    assert directive_counts(body)[:2] == (valid, unknown)


SITEMAP = "http://foo.bar/sitemap.xml"
GROUPS_FOR_SITEMAP = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"


@pytest.mark.parametrize(
    "robots",
    [GROUPS_FOR_SITEMAP + f"Sitemap: {SITEMAP}\n", f"Sitemap: {SITEMAP}\n" + GROUPS_FOR_SITEMAP],
    ids=["at-end", "at-start"],
)
def test_sitemap_anywhere(robots: str) -> None:
    """ID_NonStandardLineExample_Sitemap: a sitemap line may appear anywhere."""
    assert [line.value for line in parse_lines(robots) if line.kind == "sitemap"] == [SITEMAP]
    assert RobotsTxt.parse(robots).sitemaps == [SITEMAP]
    decision = interpret_robots_response(
        "http://foo.bar/robots.txt", 200, robots.encode(), None, user_agent="foo"
    )
    assert isinstance(decision, RobotsFinal)
    assert decision.policy.sitemaps == [SITEMAP]


# ---------------------------------------------------------------- integrity tests


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("", "/"),
        ("http://www.example.com", "/"),
        ("http://www.example.com/", "/"),
        ("http://www.example.com/a", "/a"),
        ("http://www.example.com/a/", "/a/"),
        ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
        ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("example.com", "/"),
        ("example.com/", "/"),
        ("example.com/a", "/a"),
        ("example.com/a/", "/a/"),
        ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("a", "/"),
        ("a/", "/"),
        ("/a", "/a"),
        ("a/b", "/b"),
        ("example.com?a", "/?a"),
        ("example.com/a;b#c", "/a;b"),
        ("//a/b/c", "/b/c"),
    ],
)
def test_get_path_params_query(url: str, path: str) -> None:
    """TestGetPathParamsQuery."""
    assert path_params_query(url) == path


@pytest.mark.parametrize(
    ("pattern", "escaped"),
    [
        ("http://www.example.com", "http://www.example.com"),
        ("/a/b/c", "/a/b/c"),
        ("á", "%C3%A1"),
        ("%aa", "%AA"),
    ],
)
def test_maybe_escape_pattern(pattern: str, escaped: str) -> None:
    """TestMaybeEscapePattern."""
    assert escape_pattern(pattern) == escaped


def test_case_count() -> None:
    """Every EXPECT on IsUserAgentAllowed in robots_test.cc is here, once."""
    assert len(MATCHER_CASES) == 145
    assert len({(c.robots, c.agent, c.url) for c in MATCHER_CASES}) == 145
