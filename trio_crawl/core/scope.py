"""Which canonical URLs a crawl may visit: its hosts, its allow-domains, and no traps.

``Scope`` answers once per extracted link, so it works on canonical URLs
(``url.py`` makes them) by slicing, and caches its answer per origin. The
rules (which hosts and ports a start URL admits, what an allow-domain widens
it to, which paths are traps) are in ``Scope``'s and ``is_path_trap``'s
docstrings; ``filters.FilteredScope`` adds the URL filters on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..errors import ConfigError
from .url import DEFAULT_PORTS, canonicalize, host_port, mask_credentials, split_authority

__all__ = ["MAX_URL_LENGTH", "Scope", "is_path_trap"]


def allowed_domain(text: str) -> str:
    """An allow-domain normalized the way WHATWG normalizes a URL's host
    (lower case, UTS #46 IDNA, IPv4 forms), so that it compares with the
    hosts of canonical URLs. A leading ``*.`` or ``.`` is accepted and ignored:
    subdomains are always included."""
    name = text.strip()
    name = name.removeprefix("*.").strip(".")
    if not name or any(c in name for c in "/\\:?#@[]* "):
        raise ConfigError(
            f"allow_domains= takes host names like example.com, got {mask_credentials(text)!r}",
            "allow_domains=",
        )
    url = canonicalize(f"http://{name}/")
    if url is None:
        raise ConfigError(
            f"allow_domains= takes host names like example.com, got {text!r}",
            "allow_domains=",
        )
    return split_authority(url)[1]


#: Links longer than this are skipped (Scrapy's URLLENGTH_LIMIT default; also
#: the old browser limit): endlessly growing URLs are a classic crawler trap.
MAX_URL_LENGTH = 2083
#: Paths deeper than this many segments are skipped.
MAX_PATH_SEGMENTS = 32
#: A path segment that occurs more often than this (``/a/b/a/b/a/b/a/b``,
#: what a relative link on a misconfigured server produces forever) marks a trap.
MAX_SEGMENT_REPEATS = 3


def is_path_trap(url: str) -> bool:
    """True for URLs whose path looks machine-generated without end: too many
    segments, or one segment repeated more than ``MAX_SEGMENT_REPEATS`` times.
    Such links are left out of every crawl's scope (start URLs excepted)."""
    start = url.find("/", url.find("//") + 2)
    if start < 0:
        return False
    end = len(url)
    for mark in "?#":
        found = url.find(mark, start)
        if 0 <= found < end:
            end = found
    segments = [seg for seg in url[start:end].split("/") if seg]
    if len(segments) > MAX_PATH_SEGMENTS:
        return True
    if len(segments) <= MAX_SEGMENT_REPEATS:
        return False
    counts: dict[str, int] = {}
    for seg in segments:
        counts[seg] = counts.get(seg, 0) + 1
        if counts[seg] > MAX_SEGMENT_REPEATS:
            return True
    return False


class Scope:
    """Which canonical URLs the crawl may visit.

    The default scope is the set of ``host:port`` of the start URLs: exactly
    those hosts and ports, no subdomains. A start URL on its scheme's default
    port also admits the host's other default port, so ``http://example.com``
    admits ``https://example.com`` (sites upgrade with a redirect) but not
    ``http://example.com:8080``; a start URL with an explicit non-default port
    admits only that port. Each allow-domain
    HOST widens it to that host and all its subdomains, on any port and either
    scheme: ``allow_domains=["example.com"]`` admits ``http://example.com:8080/``
    and ``https://docs.example.com/`` but not ``https://notexample.com/``.
    Allow-domains are written ``example.com`` (``.example.com`` and
    ``*.example.com`` mean the same); IDN names may be given in Unicode.
    ``span_hosts=True`` admits every host (wget ``-H``): only the trap rules
    below (and, in ``FilteredScope``, the URL filters) still refuse.

    ``allows`` runs once per extracted link, so its answer is cached per
    ``host:port`` (the cache is cleared when it grows past ``cache_size``).
    It also refuses crawler traps: URLs over ``MAX_URL_LENGTH`` characters and
    paths that ``is_path_trap`` flags.

    >>> scope = Scope(["http://example.com/start"], allow_domains=["example.org"])
    >>> scope.allows("http://example.com/x"), scope.allows("https://example.com/x")
    (True, True)
    >>> scope.allows("http://example.com:8080/x")
    False
    >>> scope.allows("https://www.example.org:8443/")
    True
    """

    __slots__ = ("_cache", "_cache_size", "_domains", "_suffixes", "host_ports", "span_hosts")

    def __init__(
        self,
        start_urls: Iterable[str],
        allow_domains: Iterable[str] = (),
        *,
        cache_size: int = 65536,
        span_hosts: bool = False,
    ) -> None:
        self.span_hosts = span_hosts
        host_ports = set()
        for url in start_urls:
            canonical = canonicalize(url)
            if canonical is None:
                raise ValueError(
                    f"start URL is not an absolute http(s) URL: {mask_credentials(url)!r}"
                )
            key = host_port(canonical)
            host_ports.add(key)
            host, _, port = key.rpartition(":")
            if port in ("80", "443"):  # the http <-> https upgrade stays in scope
                host_ports.add(f"{host}:{'443' if port == '80' else '80'}")
        self.host_ports: frozenset[str] = frozenset(host_ports)
        domains = tuple(dict.fromkeys(allowed_domain(d) for d in allow_domains))
        self._domains = frozenset(domains)
        self._suffixes = tuple("." + d for d in domains)
        self._cache: dict[str, bool] = {}
        self._cache_size = cache_size

    def allows(self, url: str) -> bool:
        """Whether the canonical http(s) ``url`` is in scope (and no trap)."""
        if len(url) > MAX_URL_LENGTH or (url.count("/") > 6 and is_path_trap(url)):
            return False
        if self.span_hosts:
            return True
        # The answer depends on the scheme, host and port alone, so it is
        # cached by the URL's text up to the path's first "/": that holds the
        # whole authority (a canonical URL always has a path, and "/" in a
        # userinfo is escaped), and slicing it costs a fraction of parsing
        # it, for every link of every page.
        slash = url.find("/", 8)  # past "https://" or the host's first character
        origin = url[:slash] if slash > 0 else url
        cache = self._cache
        answer = cache.get(origin)
        if answer is None:
            scheme, host, port = split_authority(url)
            key = f"{host}:{port or DEFAULT_PORTS[scheme]}"
            answer = (
                key in self.host_ports
                or host in self._domains
                or (bool(self._suffixes) and host.endswith(self._suffixes))
            )
            if len(cache) >= self._cache_size:
                cache.clear()
            cache[origin] = answer
        return answer

    def allows_unfiltered(self, url: str) -> bool:
        """Whether ``url`` is in scope whatever the URL filters say (page
        requisites, a start URL's redirects, sitemap files): here the same as
        ``allows``; ``core.filters.FilteredScope`` skips its filters."""
        return self.allows(url)

    def judge_redirect(self, first: str) -> Callable[[str], bool]:
        """The predicate for the targets of a redirect chain that began at
        ``first``: here ``allows``; ``core.filters.FilteredScope`` spares the
        redirects of start URLs its URL filters."""
        return self.allows

    def __repr__(self) -> str:
        span = ", span_hosts=True" if self.span_hosts else ""
        return (
            f"Scope(host_ports={sorted(self.host_ports)!r}, "
            f"allow_domains={sorted(self._domains)!r}{span})"
        )
