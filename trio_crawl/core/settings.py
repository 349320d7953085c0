"""The groups of a crawl's settings: which links it follows, how far it
goes, how politely, how it fetches, with how many workers, whether it
renders, and what it saves.

Each group is a small frozen, keyword-only dataclass that checks its own
fields when it is made, as httpx's ``Timeout`` and ``Limits`` do, so a
mistake is a one-line ``ConfigError`` at once, naming the library argument
(``max_depth=``); the command line words it as its flag
(``ConfigError.worded``). The checks are pure: nothing here reads a file,
the PATH or the machine's limits. What needs those (a CA bundle that must
exist, the browser to run, a netrc file to read) is checked where the
resource is opened (``engine/resources.py``).

A field's name is the flat keyword option it stands for
(``run_crawl(url, max_depth=2)`` sets ``Budgets.max_depth``): the names are
unique across the groups, and ``CrawlConfig.from_options`` routes each
option to its group by them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from ..errors import ConfigError
from .filters import UrlFilter
from .host_budget import HostBudget
from .http import ClientSettings, FetchConfig
from .identity import HEADER_NAME, HEADER_VALUE, start_credentials, start_origins
from .scope import allowed_domain

#: The HTTP clients a crawl can fetch with (``backend=``, ``--fetcher``).
FETCHERS = ("curl", "httpx", "asks")

__all__ = [
    "FETCHERS",
    "Budgets",
    "Fetching",
    "Follow",
    "Output",
    "Politeness",
    "Pool",
    "Rendering",
]


def _refuse(checks: Sequence[tuple[bool, str, str]]) -> None:
    """Raise ``ConfigError`` for the first check that fails: its argument
    (``"max_depth="``) and what is wrong with it, on one line."""
    for ok, argument, problem in checks:
        if not ok:
            raise ConfigError(f"{argument} {problem}", argument)


def _patterns(name: str, value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # one pattern (or domain), not its characters
        raise ConfigError(f"{name}= must be a sequence of patterns, not one string", f"{name}=")
    return tuple(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Follow:
    """Which links a crawl follows, and what else it adds to its frontier.

    Scope is the start URLs' hosts (and ``allow_domains``); the filters
    narrow it to the URLs wanted there (``core/filters.py``). Example::

        Follow(allow_domains=["cdn.example.org"], exclude=[r"\\?sort="], no_parent=True)
    """

    #: Also crawl these hosts and their subdomains.
    allow_domains: Sequence[str] = field(default_factory=tuple)
    #: Follow links to any host (wget -H); robots.txt and politeness per host
    #: as ever. Pair it with ``max_hosts`` / ``max_pages_per_host`` / ``max_depth``.
    span_hosts: bool = False
    #: Regular expressions (``re.search`` on the canonical URL): a link is
    #: followed if it matches any ``include`` (or none is given) and no
    #: ``exclude``. Start URLs are not filtered; see ``core/filters.py``.
    include: Sequence[str] = field(default_factory=tuple)
    exclude: Sequence[str] = field(default_factory=tuple)
    #: Follow no link above the directory of a start URL on its site (wget -np).
    no_parent: bool = False
    #: File name suffixes (``"pdf"``) or shell patterns (``"*196?*"``) as
    #: wget's ``-A``/``-R``: a link is followed only if its file name matches
    #: ``accept`` (when given) and not ``reject``; pages named ``.html``/``.htm``
    #: and directory URLs are still followed for their links (core/filters.py).
    accept: Sequence[str] = field(default_factory=tuple)
    reject: Sequence[str] = field(default_factory=tuple)
    #: Also seed from the sitemaps robots.txt lists.
    sitemaps: bool = False
    #: Also fetch what each HTML page needs (images, scripts, stylesheets, frames...).
    page_requisites: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_domains", _patterns("allow_domains", self.allow_domains))
        for domain in self.allow_domains:
            allowed_domain(domain)  # ConfigError, now rather than when the crawl opens
        for name in ("include", "exclude", "accept", "reject"):
            object.__setattr__(self, name, _patterns(name, getattr(self, name)))
        # A pattern that does not compile: ConfigError, now rather than mid-crawl.
        UrlFilter(include=self.include, exclude=self.exclude)


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """How far a crawl goes: hops, pages, hosts and time (None: no limit).

    Example::

        Budgets(max_depth=2, max_pages=1_000, max_time=600)
    """

    #: Follow links at most this many hops from a start URL.
    max_depth: int | None = None
    #: Fetch at most this many pages.
    max_pages: int | None = None
    #: Admit at most this many URLs of one host:port.
    max_pages_per_host: int | None = None
    #: Crawl at most this many distinct hosts (host:port), start hosts included.
    max_hosts: int | None = None
    #: Stop gracefully this many seconds after the start, as ``stop()`` does:
    #: in-flight pages get ``grace`` seconds to finish.
    max_time: float | None = None

    def __post_init__(self) -> None:
        _refuse(
            [
                (
                    self.max_depth is None or self.max_depth >= 0,
                    "max_depth=",
                    f"must be >= 0 (got {self.max_depth})",
                ),
                (
                    self.max_pages is None or self.max_pages >= 0,
                    "max_pages=",
                    f"must be >= 0 (got {self.max_pages})",
                ),
                (
                    self.max_pages_per_host is None or self.max_pages_per_host >= 1,
                    "max_pages_per_host=",
                    f"must be at least 1 (got {self.max_pages_per_host})",
                ),
                (
                    self.max_hosts is None or self.max_hosts >= 1,
                    "max_hosts=",
                    f"must be at least 1 (got {self.max_hosts})",
                ),
                (
                    self.max_time is None or 0 < self.max_time < float("inf"),
                    "max_time=",
                    f"must be a number of seconds > 0 (got {self.max_time})",
                ),
            ]
        )

    def host_budget(self) -> HostBudget | None:
        """The per-host budgets, or None when there are none."""
        if self.max_pages_per_host is None and self.max_hosts is None:
            return None
        return HostBudget(max_pages_per_host=self.max_pages_per_host, max_hosts=self.max_hosts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Politeness:
    """How gently a crawl treats each host.

    Example::

        Politeness(rate=2, random_wait=True, per_host_concurrency=2)
    """

    #: At most this many requests per second to each host (None: no limit
    #: beyond robots.txt Crawl-delay).
    rate: float | None = None
    #: The most requests in flight to one host (None: see
    #: ``CrawlConfig.host_concurrency``).
    per_host_concurrency: int | None = None
    #: Neither fetch nor obey robots.txt.
    ignore_robots: bool = False
    #: Space a host's requests 0.5 to 1.5 times the ``rate`` interval at
    #: random (wget's --random-wait), never closer than its Crawl-delay.
    random_wait: bool = False
    #: The longest wait a Retry-After header can ask for before a retry.
    max_retry_after: float = 60.0
    #: The longest robots.txt Crawl-delay obeyed; larger ones are cut to it.
    max_crawl_delay: float = 60.0

    def __post_init__(self) -> None:
        _refuse(
            [
                (self.rate is None or self.rate > 0, "rate=", f"must be > 0 (got {self.rate})"),
                (
                    self.per_host_concurrency is None or self.per_host_concurrency >= 1,
                    "per_host_concurrency=",
                    f"must be >= 1 (got {self.per_host_concurrency})",
                ),
                (
                    self.max_retry_after >= 0,
                    "max_retry_after=",
                    f"must be >= 0 (got {self.max_retry_after})",
                ),
                (
                    not self.random_wait or self.rate is not None,
                    "random_wait=True",
                    "needs rate=: it varies the interval between a host's requests that "
                    "rate= sets",
                ),
                (
                    0 <= self.max_crawl_delay < float("inf"),
                    "max_crawl_delay=",
                    f"must be a number of seconds >= 0 (got {self.max_crawl_delay})",
                ),
            ]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetching(ClientSettings):
    """How a crawl's own fetcher talks to servers: the client, its limits,
    and the crawl's identity. A fetcher passed to ``run_crawl`` /
    ``open_crawler`` keeps its own. The fields it shares with ``FetchConfig``
    (``core/http.py``: ``user_agent``, ``timeout``, ``connect_timeout``,
    ``max_bytes``, ``html_only``, ``ca_bundle``, ``http2``, ``cookies``,
    ``proxy``) are written once, in ``ClientSettings``; ``fetch_config``
    gives the fetcher those with the crawl's connections, origins and
    credentials resolved. ``ca_bundle`` is checked, and the netrc file
    read, when the fetcher is opened. Example::

        Fetching(timeout=10, retries=1, headers=[("Accept-Language", "fr")])
    """

    #: Retries of transient failures (timeouts, refused connections, 429, 502-504).
    retries: int = 2
    #: The HTTP client: one of ``FETCHERS``.
    backend: str = "curl"
    #: Extra request headers, ``(name, value)``; credential headers
    #: (Authorization, Cookie) go to the start URLs' origins only (core.identity).
    headers: Sequence[tuple[str, str]] = field(default=(), repr=False)
    #: HTTP basic auth ``(user, password)`` for the start URLs' origins only.
    auth: tuple[str, str] | None = field(default=None, repr=False)
    #: A netrc file with basic-auth credentials for the start hosts (unless ``auth``).
    netrc_file: str | None = None

    def __post_init__(self) -> None:
        _refuse(
            [
                (self.timeout > 0, "timeout=", f"must be > 0 (got {self.timeout})"),
                (
                    self.connect_timeout > 0,
                    "connect_timeout=",
                    f"must be > 0 (got {self.connect_timeout})",
                ),
                (self.retries >= 0, "retries=", f"must be >= 0 (got {self.retries})"),
                (self.max_bytes > 0, "max_bytes=", f"must be > 0 (got {self.max_bytes})"),
                (self.backend in FETCHERS, "backend=", f"must be one of {', '.join(FETCHERS)}"),
                (bool(self.user_agent.strip()), "user_agent=", "must not be empty"),
                (
                    not self.user_agent.strip().startswith("/"),
                    "user_agent=",
                    "must begin with a product name (robots.txt rules are matched against "
                    f"the text before its first '/' or space; got {self.user_agent!r})",
                ),
            ]
        )
        self._check_identity()

    def _check_identity(self) -> None:
        """Headers, auth and proxy, with messages that never show a secret."""
        for name, value in self.headers:
            if not HEADER_NAME.fullmatch(name):
                raise ConfigError(f"headers=: invalid header name {name[:60]!r}", "headers=")
            if not HEADER_VALUE.fullmatch(value.strip(" \t")):
                raise ConfigError(
                    f"headers= {name}: the value has a line break, control character "
                    "or non-ASCII text",
                    "headers=",
                )
        if (self.auth is not None or self.netrc_file is not None) and any(
            name.lower() == "authorization" for name, _ in self.headers
        ):
            raise ConfigError(
                "headers= has an Authorization header and auth= (or netrc_file=) gives "
                "credentials too: keep one of them",
                "headers=",
                "auth=",
                "netrc_file=",
            )
        if self.proxy:
            try:
                parts = urlsplit(self.proxy)
                parts.port  # noqa: B018 - raises ValueError for a bad port
            except ValueError:
                parts = None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    "proxy= must be an http:// or https:// URL with a host", "proxy="
                )
            if self.backend == "asks":
                raise ConfigError("proxy= is not supported by the asks fetcher", "proxy=")

    def fetch_config(self, start_urls: Sequence[str], max_connections: int) -> FetchConfig:
        """The fetcher's configuration for a crawl of ``start_urls``: their
        origins get the credentials (``auth``, else the netrc file, read
        here: ``ValueError`` if it cannot be)."""
        return FetchConfig(
            user_agent=self.user_agent,
            timeout=self.timeout,
            connect_timeout=min(self.connect_timeout, self.timeout),
            max_bytes=self.max_bytes,
            max_connections=max_connections,
            html_only=self.html_only,
            ca_bundle=self.ca_bundle,
            http2=self.http2,
            headers=tuple((name, value.strip(" \t")) for name, value in self.headers),
            trusted_origins=start_origins(start_urls),
            credentials=start_credentials(start_urls, auth=self.auth, netrc_file=self.netrc_file),
            cookies=self.cookies,
            proxy=self.proxy,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """The crawl's worker tasks and how their work is shared out.

    Example::

        Pool(max_workers=200, grace=5)   # self-sized, up to 200 workers
        Pool(workers=8)                  # pinned at 8
    """

    #: Worker tasks: None (the default) sizes the pool by itself (``PoolSizer``,
    #: core/pool_sizing.py) within ``max_workers`` and the machine's limits; a
    #: number pins it.
    workers: int | None = None
    #: The most workers a sized pool may grow to (None: the descriptor and
    #: memory limits, ``machine_ceiling``).
    max_workers: int | None = None
    #: Extract links in a child process, on another CPU (docs/manual/performance.md):
    #: None (the default) where that can pay, i.e. two CPUs or more and a crawl
    #: that reads pages for links alone; True or False to force it.
    parse_process: bool | None = None
    #: Bodies larger than this are parsed in a worker thread (lxml releases the GIL).
    thread_parse_bytes: int = 1024 * 1024
    #: On a stop, the seconds in-flight pages get to finish.
    grace: float = 10.0

    def __post_init__(self) -> None:
        _refuse(
            [
                (
                    self.workers is None or self.workers >= 1,
                    "workers=",
                    f"must be at least 1 (got {self.workers})",
                ),
                (
                    self.max_workers is None or self.max_workers >= 1,
                    "max_workers=",
                    f"must be at least 1 (got {self.max_workers})",
                ),
                (self.grace >= 0, "grace=", f"must be >= 0 (got {self.grace})"),
                (
                    self.parse_process in (True, False, None),
                    "parse_process=",
                    f"must be True, False or None (got {self.parse_process!r})",
                ),
            ]
        )
        if self.workers and self.max_workers and self.workers > self.max_workers:
            raise ConfigError(
                f"workers= {self.workers} is more than max_workers= {self.max_workers}",
                "max_workers=",  # first: "workers=" is inside it
                "workers=",
            )
        if self.workers is not None and self.max_workers is not None:
            # One would be ignored: a pinned pool never grows, so never to max_workers.
            raise ConfigError(
                "workers= pins the number of workers, max_workers= bounds a self-sized "
                "pool: give one of them",
                "max_workers=",  # first: "workers=" is inside it
                "workers=",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendering:
    """Pages rendered in headless Chromium (``--render``; docs/manual/render.md).

    Example::

        Rendering(render="auto", render_wait=3)
    """

    #: True for every HTML page, "auto" where rendering adds links.
    render: bool | Literal["auto"] = False
    #: The longest wait for a rendered page to settle (load + quiet network).
    render_wait: float = 5.0
    #: The browser executable (``--browser``; else $TRIO_CRAWL_BROWSER, else
    #: chromium on PATH), looked up when the crawl's fetcher is opened.
    browser: str | None = None

    def __post_init__(self) -> None:
        _refuse(
            [
                (
                    self.render in (True, False, "auto"),
                    "render=",
                    f'must be True, False or "auto" (got {self.render!r})',
                ),
                (
                    0 < self.render_wait < float("inf"),
                    "render_wait=",
                    f"must be a number of seconds > 0 (got {self.render_wait})",
                ),
            ]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Output:
    """What a crawl saves besides its records: an offline copy of the site.

    Example::

        Output(mirror="site", convert_links=True, adjust_extension=True)
    """

    #: Save every 2xx body under this directory, as ``host[:port]/path``
    #: (``mirror/layout.py``): an offline copy, like ``wget -m``.
    mirror: str | None = None
    #: With ``mirror``: at the end, links to saved files become relative
    #: paths, the others absolute URLs (wget's ``-k``).
    convert_links: bool = False
    #: With ``mirror``: add ``.html`` / ``.css`` to names that lack them (wget's ``-E``).
    adjust_extension: bool = False
    #: With ``mirror``: a second run over the directory (a recrawl) removes
    #: the file of a page now ``gone`` (404/410, or a redirect where there
    #: was a page); by default it is kept, as wget keeps it.
    mirror_delete_gone: bool = False
    #: Crawl a finished ``state=`` file again (``docs/manual/recrawl.md``): each
    #: known URL is asked with the validators it came with, and every record
    #: says how it ``change``d since; a new crawl otherwise. Kept with the
    #: outputs: it is about what the crawl keeps and compares, not how it fetches.
    #: ``"due"``: only URLs whose revisit schedule says they are due, and new ones.
    recrawl: bool | Literal["due"] = False

    def __post_init__(self) -> None:
        if self.mirror is not None:
            object.__setattr__(self, "mirror", os.fspath(self.mirror))
            if not self.mirror:
                raise ConfigError("mirror= must name a directory (got an empty path)", "mirror=")
        if not isinstance(self.recrawl, bool) and self.recrawl != "due":
            raise ConfigError(
                f'recrawl= must be True, False or "due" (got {self.recrawl!r})', "recrawl="
            )
        for name in ("convert_links", "adjust_extension", "mirror_delete_gone"):
            if getattr(self, name) and self.mirror is None:
                raise ConfigError(
                    f"{name}=True needs mirror= (a directory to save the site in)",
                    f"{name}=True",
                    "mirror=",
                )
