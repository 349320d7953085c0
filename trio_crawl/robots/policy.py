"""robots.txt as a pure policy: RFC 9309 decisions for one origin and one crawler.

Rules (RFC 9309 section numbers in brackets):

1. One robots.txt per origin: ``scheme://host[:port]/robots.txt`` [2.3]. The
   key drops user info and the scheme's default port, so every spelling of an
   origin shares one file.
2. 2xx: parse the body [2.3.1.1]. At most ``MAX_ROBOTS_BYTES`` (500 KiB) are
   read [2.5]; a line cut by that limit is dropped whole, so a truncated
   ``Disallow: /private`` never becomes a broader ``Disallow: /pr``. Bytes are
   decoded as UTF-8 with replacement, after skipping a UTF-8 byte order mark
   at the start, whole or partial (``EF BB BF``, ``EF BB`` or ``EF``), as
   Google's reference parser does.
3. 3xx: follow ``Location`` (the fetcher never does) for up to
   ``MAX_ROBOTS_REDIRECTS`` (5) hops, even to another origin, and apply the
   file found there to the *original* origin [2.3.1.2]. Beyond 5 hops, or
   with no usable ``Location``, the file is "unavailable": allow all.
4. 4xx: "unavailable": allow all [2.3.1.3]. Exception: 429 Too Many Requests
   is read as "unreachable" (rule 5), as the major crawlers do: a site that
   asks us to slow down has not told us that everything is allowed.
5. 5xx, any other status, or no answer at all (a ``FetchError``):
   "unreachable": disallow all [2.3.1.4], but only for
   ``retry_period`` seconds, after which the file is fetched again.
6. A parsed file is used for at most ``max_age`` seconds (24 h) [2.4].

Parsing and matching live in ``rules.py`` (see its docstring): RFC 9309,
read as Google's reference parser reads it, whose public test suite passes.
We match the file against our *product token*, the user agent up to the
first ``/`` or space (so ``"trio-crawl/0.1 (+https://...)"`` becomes
``"trio-crawl"``), because matching the whole header would let a group named
after a word in our contact URL apply to us. A group applies when its name is
our token, case-insensitively; failing that, the group whose name our token
extends with ``-`` or ``_`` (``User-agent: trio`` applies to ``trio-crawl``);
failing that, ``*``. The longest matching path pattern wins, and on a tie
Allow beats Disallow; ``*`` matches any run of characters and a trailing
``$`` anchors the pattern to the end of the path (query included).

This module never imports trio: ``engine/robots_gate.py`` (``RobotsCache``) does the I/O.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from .rules import RobotsRules, RobotsTxt

#: RFC 9309 section 2.5: crawlers must parse at least 500 KiB.
MAX_ROBOTS_BYTES = 500 * 1024
#: RFC 9309 section 2.3.1.2: follow at least five consecutive redirects.
MAX_ROBOTS_REDIRECTS = 5
#: Seconds an "unreachable" robots.txt keeps its origin disallowed before a refetch.
DEFAULT_RETRY_PERIOD = 60.0
#: RFC 9309 section 2.4: do not use a cached robots.txt for more than 24 hours.
DEFAULT_MAX_AGE = 24 * 3600.0

_DEFAULT_PORTS = {"http": 80, "https": 443}
_PRODUCT_TOKEN = re.compile(r"[^\s/]+")


def robots_url(url: str) -> str:
    """The robots.txt URL that governs ``url``: ``scheme://host[:port]/robots.txt``.

    Memoized by the URL's ``scheme://authority`` prefix: it is asked once per
    page on the hot path, and a crawl has few origins.

    The scheme and host are lower-cased, user info is dropped and the scheme's
    default port is omitted, so the result doubles as a per-origin cache key.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL with a host, or its
            port is not a number.
    """
    end = url.find("/", url.find("//") + 2) if "//" in url else -1
    if end > 0 and "@" not in url[:end] and "?" not in url[:end] and "#" not in url[:end]:
        return _robots_url_of_origin(url[:end])
    return _robots_url_uncached(url)


@functools.lru_cache(maxsize=4096)
def _robots_url_of_origin(origin: str) -> str:
    return _robots_url_uncached(origin + "/")


def _robots_url_uncached(url: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname  # lower-cased, brackets stripped
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    port = parts.port  # raises ValueError for a malformed port
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return f"{scheme}://{host}/robots.txt"


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent header: the text before the first ``/`` or space.

    ``"trio-crawl/0.1 (+https://example.org)"`` gives ``"trio-crawl"``.

    Raises:
        ValueError: ``user_agent`` is empty or starts with ``/``.
    """
    match = _PRODUCT_TOKEN.match(user_agent.strip())
    if match is None:
        raise ValueError(f"no product token in user agent {user_agent!r}")
    return match.group()


class RobotsPolicy:
    """What one origin's robots.txt lets us do: ``allows(url)`` plus two hints.

    Build one with ``parse`` (a fetched file), ``allow_all`` or ``disallow_all``.
    ``crawl_delay`` is the ``Crawl-delay`` of the group that applies to us
    (``None`` when absent or malformed); ``sitemaps`` lists ``Sitemap`` lines as
    written (they should be absolute URLs). ``reason`` says where the policy
    came from, for records and logs. ``temporary`` is true for the disallow-all
    that stands in for an unreachable file: the engine may prefer to wait for
    the refetch rather than give up on the URLs it blocks.
    """

    __slots__ = ("_allowed", "_rules", "crawl_delay", "reason", "sitemaps", "temporary")

    def __init__(
        self,
        *,
        rules: RobotsRules | None,
        allowed: bool,
        crawl_delay: float | None,
        sitemaps: list[str],
        reason: str,
        temporary: bool,
    ) -> None:
        # Private: use the constructors below.
        self._rules = rules
        self._allowed = allowed
        self.crawl_delay = crawl_delay
        self.sitemaps = sitemaps
        self.reason = reason
        self.temporary = temporary

    @classmethod
    def parse(cls, text: str, user_agent: str) -> RobotsPolicy:
        """The policy a robots.txt ``text`` sets for ``user_agent``.

        ``user_agent`` may be a whole User-Agent header; only its product token
        is matched against the file's groups (see the module docstring).
        """
        token = product_token(user_agent)
        robots = RobotsTxt.parse(text)
        return cls(
            rules=robots.rules_for(token),
            allowed=True,
            crawl_delay=robots.crawl_delay(token),
            sitemaps=robots.sitemaps,
            reason="parsed",
            temporary=False,
        )

    @classmethod
    def allow_all(cls, reason: str = "allow all") -> RobotsPolicy:
        """Everything allowed: no file (4xx), or too many redirects."""
        return cls(
            rules=None,
            allowed=True,
            crawl_delay=None,
            sitemaps=[],
            reason=reason,
            temporary=False,
        )

    @classmethod
    def disallow_all(
        cls, reason: str = "disallow all", *, temporary: bool = False
    ) -> RobotsPolicy:
        """Nothing allowed; ``temporary`` when it stands in for an unreachable file."""
        return cls(
            rules=None,
            allowed=False,
            crawl_delay=None,
            sitemaps=[],
            reason=reason,
            temporary=temporary,
        )

    def allows(self, url: str) -> bool:
        """True when we may fetch ``url`` (an absolute URL on this policy's origin).

        Only the path, params and query are matched. ``url`` should be
        percent-encoded, as canonical URLs are (see ``rules.py`` on
        percent-encoding). The caller picks the policy for the right origin
        (``robots_url(url)``).
        """
        rules = self._rules
        if rules is None:
            return self._allowed
        return rules.allows(url)

    def __repr__(self) -> str:
        delay = f", crawl_delay={self.crawl_delay}" if self.crawl_delay is not None else ""
        return f"<RobotsPolicy {self.reason}{delay}>"


@dataclass(frozen=True, slots=True)
class RobotsFollow:
    """Decision: fetch ``url`` next (a redirect hop for the same origin's rules)."""

    url: str


@dataclass(frozen=True, slots=True)
class RobotsFinal:
    """Decision: ``policy`` applies for ``ttl`` seconds, then fetch robots.txt again."""

    policy: RobotsPolicy
    ttl: float


RobotsDecision = RobotsFollow | RobotsFinal


#: A UTF-8 byte order mark; files may start with all of it or with its first bytes.
_BOM = b"\xef\xbb\xbf"


def decode_robots(body: bytes) -> str:
    """``body`` as text: the first ``MAX_ROBOTS_BYTES``, cut back to a whole line.

    A byte order mark at the start is skipped, even a partial one (``EF BB``
    or ``EF``), as Google's reference parser does; it is never decoded into
    U+FFFD, which would spoil the first line.
    """
    if len(body) > MAX_ROBOTS_BYTES:
        cut = body[:MAX_ROBOTS_BYTES]
        end = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
        body = cut[: end + 1] if end >= 0 else b""
    for size in (3, 2, 1):
        if body[:size] == _BOM[:size]:
            body = body[size:]
            break
    return body.decode("utf-8", errors="replace")


def interpret_robots_response(
    url: str,
    status: int | None,
    body: bytes,
    location: str | None,
    *,
    user_agent: str,
    hops: int = 0,
    max_redirects: int = MAX_ROBOTS_REDIRECTS,
    retry_period: float = DEFAULT_RETRY_PERIOD,
    max_age: float = DEFAULT_MAX_AGE,
) -> RobotsDecision:
    """Decide what one robots.txt answer means (rules 2 to 6 of the module docstring).

    Args:
        url: the URL that was requested (redirect targets resolve against it).
        status: the HTTP status, or ``None`` when no answer came (a FetchError).
        body: the response body (ignored unless 2xx).
        location: the ``Location`` header, if any.
        user_agent: our User-Agent (or product token) for group matching.
        hops: redirects already followed to reach ``url``.
        max_redirects: how many consecutive redirects to follow.
        retry_period: lifetime of the temporary disallow-all for an unreachable file.
        max_age: lifetime of a parsed file or an allow-all.

    Returns:
        ``RobotsFollow(next_url)`` or ``RobotsFinal(policy, ttl)``.
    """
    if status is None:
        return RobotsFinal(
            RobotsPolicy.disallow_all("robots.txt unreachable: no response", temporary=True),
            retry_period,
        )
    if 200 <= status < 300:
        return RobotsFinal(RobotsPolicy.parse(decode_robots(body), user_agent), max_age)
    if 300 <= status < 400:
        target = _redirect_target(url, location)
        if target is None:
            return RobotsFinal(
                RobotsPolicy.allow_all(f"robots.txt unavailable: {status} without Location"),
                max_age,
            )
        if hops >= max_redirects:
            return RobotsFinal(
                RobotsPolicy.allow_all(
                    f"robots.txt unavailable: more than {max_redirects} redirects"
                ),
                max_age,
            )
        return RobotsFollow(target)
    if 400 <= status < 500 and status != 429:
        return RobotsFinal(RobotsPolicy.allow_all(f"robots.txt unavailable: {status}"), max_age)
    return RobotsFinal(
        RobotsPolicy.disallow_all(f"robots.txt unreachable: {status}", temporary=True),
        retry_period,
    )


def _redirect_target(url: str, location: str | None) -> str | None:
    """``location`` resolved against ``url``, or None unless it is an http(s) URL."""
    if not location or not location.strip():
        return None
    try:
        target = urljoin(url, location.strip())
        parts = urlsplit(target)
        _ = parts.port  # a malformed port is no usable Location
    except ValueError:
        return None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts._replace(fragment="").geturl()
