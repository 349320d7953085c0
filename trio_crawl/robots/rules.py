"""robots.txt files, parsed and matched: RFC 9309 as Google's reference parser reads it.

Pure: no I/O, no trio. ``policy.RobotsPolicy`` wraps it for the engine.

RFC 9309 is the contract (section numbers in brackets). Where it leaves room,
or where a test in Google's open-source reference parser (google/robotstxt)
pins a behaviour, we do what that parser does, and its whole public test
suite passes (``tests/test_robots_google.py``). Our own behaviour, not the
reference parser's, is marked (*ours*).

Lines. The text is split on CR, LF or CRLF, and a leading U+FEFF is dropped.
Each line is cut to its first ``MAX_LINE_BYTES`` bytes of UTF-8 before
anything else, as the reference parser does. Then a ``#`` starts a comment,
and what is left is ``key: value``. A missing colon is forgiven when the line
is two words (``disallow /``), and so is a known key followed by a space
(``Sitemap https://...``; *ours*). Keys are case-insensitive and common
typos are accepted (``useragent``, ``disalow``, ...). A line with a key we do
not know is "unknown" and ignored [2.2.4].

Groups [2.1, 2.2.1]. A group is one or more ``user-agent`` lines and the
``allow``/``disallow`` rules after them; a ``user-agent`` line after a rule
starts a new group. Nothing else ends a group: blank lines, ``sitemap``,
``crawl-delay`` and unknown lines are transparent [2.2.4]. Rules before the
first ``user-agent`` line are ignored. Groups that name the same agent merge.

Names. A ``user-agent`` value of ``*`` (or ``*`` then a space and anything)
names the global group. Any other value names the run of letters, digits,
``-`` and ``_`` it starts with, so ``Foo Bar`` names ``foo`` and
``FooBot/1.0`` names ``foobot`` (case-insensitively). The reference parser
stops at digits too; we keep them so ``MyBot2`` names ``mybot2`` (*ours*).

The group for a product token: the groups whose name equals the token
(case-insensitively); else (*ours*) the longest name that the token extends
with ``-`` or ``_``, so ``User-agent: trio`` applies to ``trio-crawl`` when
no ``trio-crawl`` group exists; else the ``*`` groups; else none, and
everything is allowed. A group that applies but has no rules allows
everything.

Rules [2.2.2, 2.2.3]. A rule matches the URL's path, params and query (no
fragment) from its first character; ``*`` matches any run of characters and a
``$`` at the end of a pattern anchors it to the end. The longest matching
pattern (in characters, as escaped below) wins; on a tie Allow wins; no match
allows. Empty patterns match nothing. ``/robots.txt`` itself is always
allowed. An Allow pattern whose last segment starts with ``index.htm`` also
allows its directory (``/a/index.html`` allows ``/a/``), as Google does.

Percent-encoding [2.2.2]. In patterns, non-ASCII characters are encoded as
UTF-8 escapes and escapes are upper-cased (``%aa`` becomes ``%AA``). URLs
are expected already encoded, as the engine's canonical URLs are: a raw
``ツ`` in a URL does not match a ``ツ`` in a pattern, as in the reference
parser. The RFC also says a percent-encoded *unreserved* character
(letters, digits, ``-._~``) in a URI is to be compared decoded, while the
reference parser compares as written, and its suite pins that an
``Allow: /foo/bar/%62%61%7A`` does *not* allow ``/foo/bar/baz``. We do both
where they do not conflict (*ours*), erring towards not fetching: a rule
matches a URL as written or with its unreserved escapes decoded, and a
Disallow pattern also matches with its own unreserved escapes decoded. So
``Disallow: /baz`` blocks ``/%62az`` and ``Disallow: /%62az`` blocks
``/baz``, but ``Allow: /%62az`` allows only ``/%62az``.

Matching is linear in the URL per pattern part, never a backtracking regex:
the patterns come from the site.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

#: The reference parser keeps at most 8 * 2083 - 1 bytes of a line (2083 is
#: an old browser's URL limit): the rest of a longer line is ignored.
MAX_LINE_BYTES = 2083 * 8 - 1

LineKind = Literal["user-agent", "allow", "disallow", "sitemap", "crawl-delay", "unknown"]

_KEYS: dict[str, LineKind] = {
    "user-agent": "user-agent",
    "useragent": "user-agent",
    "user agent": "user-agent",
    "allow": "allow",
    "disallow": "disallow",
    "dissallow": "disallow",
    "dissalow": "disallow",
    "disalow": "disallow",
    "diasllow": "disallow",
    "disallaw": "disallow",
    "sitemap": "sitemap",
    "sitemaps": "sitemap",
    "site-map": "sitemap",
    "crawl-delay": "crawl-delay",
    "crawl delay": "crawl-delay",
}
_WHITESPACE = " \t\v\f"  # what the reference parser strips, line breaks aside
_TWO_WORDS = re.compile(r"([^ \t]+)[ \t]+([^ \t]+)")
_NAME = re.compile(r"[A-Za-z0-9_-]*")
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# An escape that _decode_unreserved changes: lower-case hex, or an unreserved
# character (digit, letter, "-", ".", "_", "~"). Most escaped URLs have none.
_CHANGING_ESCAPE = re.compile(
    r"%(?:[0-9A-F][a-f]|[a-f][0-9A-Fa-f]|3[0-9]|[46][1-9A-F]|[57][0-9A]|2[DE]|5F|7E)"
)
_ESCAPE_OR_NON_ASCII = re.compile(r"%[0-9A-Fa-f]{2}|[^\x00-\x7f]+")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Scheme and authority of an http(s) URL, then the path, params and query.
_HTTP_PATH = re.compile(r"https?://[^/?;#]*([/?;][^#]*)?")
_PATH_START = re.compile(r"[/?;]")


def is_valid_product_token(token: str) -> bool:
    """True if ``token`` is an RFC 9309 product token: letters, ``-`` and ``_`` only."""
    return _PRODUCT_TOKEN.fullmatch(token) is not None


@dataclass(frozen=True, slots=True)
class RobotsLine:
    """One ``key: value`` line: its 1-based number, what it is, and its text."""

    number: int
    kind: LineKind
    key: str  # as written
    value: str  # as written, stripped of surrounding whitespace


def parse_lines(text: str) -> Iterator[RobotsLine]:
    """The ``key: value`` lines of a robots.txt, in order (blank and comment lines skipped)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, raw in enumerate(lines, 1):
        line = raw
        if len(line) * 4 > MAX_LINE_BYTES:  # might be longer than the cut in UTF-8
            encoded = line.encode("utf-8", "surrogatepass")
            if len(encoded) > MAX_LINE_BYTES:
                line = encoded[:MAX_LINE_BYTES].decode("utf-8", "ignore")
        line = line.partition("#")[0].strip(_WHITESPACE)
        if not line:
            continue
        key, colon, value = line.partition(":")
        key = key.rstrip(_WHITESPACE)
        if not colon or key.lower() not in _KEYS:
            # No colon, or none after a known key: "disallow /" (as the
            # reference parser) and "Sitemap https://..." (ours) still count.
            words = _TWO_WORDS.fullmatch(line)
            if words is not None and (not colon or words[1].lower() in _KEYS):
                key, value = words[1], words[2]
            elif not colon:
                continue  # no separator: not a key-value line
        if key:
            kind = _KEYS.get(key.lower(), "unknown")
            yield RobotsLine(number, kind, key, value.strip(_WHITESPACE))


def escape_pattern(pattern: str) -> str:
    """``pattern`` with non-ASCII characters percent-encoded and escapes upper-cased."""
    if pattern.isascii() and "%" not in pattern:
        return pattern
    return _ESCAPE_OR_NON_ASCII.sub(_escape, pattern)


def _escape(match: re.Match[str]) -> str:
    text = match.group()
    if text[0] == "%":
        return text.upper()
    return "".join(f"%{byte:02X}" for byte in text.encode("utf-8", "surrogatepass"))


def _decode_unreserved(text: str) -> str:
    """``text`` with escapes upper-cased, and those of unreserved characters decoded."""
    return _ESCAPE.sub(_decode_escape, text)


def _decode_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group()[1:], 16))
    return char if char in _UNRESERVED else match.group().upper()


def path_params_query(url: str) -> str:
    """What rules match against: ``url`` without scheme, authority and fragment.

    Always starts with ``/``; ``"/"`` when ``url`` has no path.
    """
    http = _HTTP_PATH.match(url)
    if http is not None:
        path = http.group(1)
        if not path:
            return "/"
        return path if path[0] == "/" else "/" + path
    # Anything else, as the reference parser reads it: an optional "//",
    # an optional "scheme://" and an authority, then the path.
    start = 2 if url.startswith("//") else 0
    scheme_end = url.find("://", start)
    first_delimiter = _PATH_START.search(url, start)
    if scheme_end != -1 and (first_delimiter is None or first_delimiter.start() > scheme_end):
        start = scheme_end + 3
    found = _PATH_START.search(url, start)
    if found is None:
        return "/"
    path_start = found.start()
    fragment = url.find("#", 2 if url.startswith("//") else 0)
    if fragment != -1 and fragment < path_start:
        return "/"
    path = url[path_start:] if fragment == -1 else url[path_start:fragment]
    return path if path[0] == "/" else "/" + path


def _agent_name(value: str) -> str:
    """The group name a ``user-agent`` value gives: ``"*"``, a lower-case name, or ``""``."""
    if value == "*" or (value[:1] == "*" and value[1:2] in (" ", "\t")):
        return "*"
    name = _NAME.match(value)
    return name.group().lower() if name else ""


class _Rule:
    """One compiled pattern. ``rank`` orders rules: the first that matches decides."""

    __slots__ = ("allow", "anchored", "head", "last", "middle", "priority", "rank", "wild")

    def __init__(self, allow: bool, pattern: str) -> None:
        self.allow = allow
        self.priority = len(pattern)
        self.rank = 0
        self.anchored = pattern.endswith("$")
        if self.anchored:
            pattern = pattern[:-1]
        parts = pattern.split("*")
        self.wild = len(parts) > 1
        self.head = parts[0]
        self.middle = tuple(part for part in parts[1:-1] if part)
        self.last = parts[-1] if self.wild else ""

    def matches(self, path: str) -> bool:
        if not self.wild:
            return path == self.head if self.anchored else path.startswith(self.head)
        if not path.startswith(self.head):
            return False
        # The leftmost place for each part leaves the most room for the rest.
        pos = len(self.head)
        for part in self.middle:
            pos = path.find(part, pos)
            if pos < 0:
                return False
            pos += len(part)
        if self.anchored:
            return len(path) - len(self.last) >= pos and path.endswith(self.last)
        return path.find(self.last, pos) >= 0


class RobotsRules:
    """The rules of the group that applies to one product token: ``allows(url)``."""

    __slots__ = ("_allow_all", "_plain", "_rules", "_special")

    def __init__(self, rules: list[tuple[bool, str]]) -> None:
        compiled: list[_Rule] = []
        for allow, value in rules:
            pattern = escape_pattern(value)
            if not pattern:
                continue  # an empty pattern matches nothing
            compiled.append(_Rule(allow, pattern))
            if allow:
                # Google: ".../index.htm..." also allows its directory.
                slash = pattern.rfind("/")
                if slash >= 0 and pattern.startswith("/index.htm", slash):
                    compiled.append(_Rule(True, pattern[: slash + 1] + "$"))
            elif "%" in pattern:
                decoded = _decode_unreserved(pattern)
                if decoded != pattern:
                    compiled.append(_Rule(False, decoded))
        # Longest first, Allow first on a tie: the first rule that matches decides.
        compiled.sort(key=lambda rule: (-rule.priority, not rule.allow))
        for rank, rule in enumerate(compiled):
            rule.rank = rank
        self._rules = compiled
        # A path that starts with none of the plain prefixes can only match
        # the other rules: one startswith() call rules out all of them.
        self._plain = tuple(r.head for r in compiled if not r.wild and not r.anchored)
        self._special = [r for r in compiled if r.wild or r.anchored]
        #: No Disallow rule (none at all, or ``Allow: /``): whichever rule
        #: matches, the answer is yes, so no URL needs matching.
        self._allow_all = all(rule.allow for rule in compiled)

    def allows(self, url: str) -> bool:
        """True unless the longest rule matching ``url`` (absolute, or a path) disallows it."""
        if self._allow_all:
            return True
        path = path_params_query(url)
        if path == "/robots.txt":
            return True  # RFC 9309 2.2.2: implicitly allowed
        rule = self._first_match(path)
        if "%" in path and _CHANGING_ESCAPE.search(path):
            other = self._first_match(_decode_unreserved(path))
            if other is not None and (rule is None or other.rank < rule.rank):
                rule = other
        return rule is None or rule.allow

    def _first_match(self, path: str) -> _Rule | None:
        for rule in self._rules if path.startswith(self._plain) else self._special:
            # _Rule.matches, with its most frequent outcomes inlined: this
            # runs for every rule on every page.
            if not path.startswith(rule.head):
                continue
            if not rule.wild:
                if not rule.anchored or path == rule.head:
                    return rule
            elif not rule.middle and not rule.anchored:
                if path.find(rule.last, len(rule.head)) >= 0:
                    return rule
            elif rule.matches(path):
                return rule
        return None


class RobotsTxt:
    """A parsed robots.txt: the rules and ``Crawl-delay`` for any product token, and sitemaps."""

    __slots__ = ("_cache", "_delays", "_groups", "sitemaps")

    def __init__(
        self,
        groups: dict[str, list[tuple[bool, str]]],
        delays: dict[str, float],
        sitemaps: list[str],
    ) -> None:
        self._groups = groups
        self._delays = delays
        self._cache: dict[str, RobotsRules] = {}
        #: ``Sitemap`` values in file order, as written.
        self.sitemaps = sitemaps

    @classmethod
    def parse(cls, text: str) -> RobotsTxt:
        groups: dict[str, list[tuple[bool, str]]] = {}  # name -> rules, merged
        delays: dict[str, float] = {}
        sitemaps: list[str] = []
        agents: list[str] = []  # names of the current group
        in_group = False  # a user-agent line was seen
        starting = False  # the last group line was a user-agent line
        # Crawl-delay is not part of RFC 9309, so it must not change the
        # groups above. For itself, a user-agent line after a Crawl-delay
        # starts afresh: "User-agent: a / Crawl-delay: 5 / User-agent: b"
        # gives a delay to a only (*ours*, as protego did).
        delay_agents: list[str] = []
        delay_starting = False
        for line in parse_lines(text):
            kind = line.kind
            if kind == "user-agent":
                name = _agent_name(line.value)
                if not starting:
                    agents, starting, in_group = [], True, True
                if not delay_starting:
                    delay_agents, delay_starting = [], True
                if name:
                    agents.append(name)
                    delay_agents.append(name)
                    groups.setdefault(name, [])
            elif kind == "allow" or kind == "disallow":
                if in_group:
                    starting = delay_starting = False
                    for name in agents:
                        groups[name].append((kind == "allow", line.value))
            elif kind == "crawl-delay":
                delay_starting = False
                delay = _parse_delay(line.value)
                if delay is not None:
                    for name in delay_agents:  # several: the most polite
                        delays[name] = max(delays.get(name, delay), delay)
            elif kind == "sitemap" and line.value:
                sitemaps.append(line.value)
        return cls(groups, delays, sitemaps)

    def group_name(self, token: str) -> str | None:
        """The name of the groups that apply to ``token`` (see the module docstring)."""
        token = token.lower()
        if token in self._groups:
            return token
        best = None
        for name in self._groups:
            if (
                len(name) < len(token)
                and token[len(name)] in "-_"
                and token.startswith(name)
                and (best is None or len(name) > len(best))
            ):
                best = name
        if best is not None:
            return best
        return "*" if "*" in self._groups else None

    def rules_for(self, token: str) -> RobotsRules:
        """The compiled rules that apply to product token ``token``."""
        key = token.lower()
        rules = self._cache.get(key)
        if rules is None:
            name = self.group_name(key)
            rules = self._cache[key] = RobotsRules(self._groups[name] if name else [])
        return rules

    def crawl_delay(self, token: str) -> float | None:
        """The ``Crawl-delay`` (seconds) for ``token``'s group, or None."""
        name = self.group_name(token)
        return None if name is None else self._delays.get(name)

    def allowed(self, token: str, url: str) -> bool:
        """May ``token`` fetch ``url``? Google's ``OneAgentAllowedByRobots``."""
        return self.rules_for(token).allows(url)


def _parse_delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if 0 <= delay < float("inf") else None
