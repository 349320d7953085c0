"""Validated, keyword-only crawl configuration.

``CrawlConfig`` is what the library takes and what the CLI builds from its
arguments. Validation happens here, once, with one-line messages that the CLI
prints as they are (exit 2).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..machine import machine_ceiling
from .browser import find_browser
from .filters import FilteredScope, UrlFilter
from .host_budget import HostBudget
from .http import DEFAULT_USER_AGENT, FetchConfig
from .identity import HEADER_NAME, HEADER_VALUE, start_credentials, start_origins
from .pool_sizing import DEFAULT_PER_HOST, INITIAL_WORKERS
from .scope import Scope
from .scrape import Handler, Request
from .url import parse_start_url

if TYPE_CHECKING:
    # Only in annotations: http.cookiejar pulls in urllib.request and
    # http.client (~8 ms at start-up); a crawl with cookies imports it itself.
    from http.cookiejar import CookieJar

FETCHERS = ("curl", "httpx", "asks")


@dataclass(frozen=True, slots=True, kw_only=True)
class CrawlConfig:
    """Everything a crawl needs besides its fetcher.

    Example::

        CrawlConfig(start_urls=["http://127.0.0.1:8000/"], max_depth=2)
    """

    #: Canonical URLs, or ``Request`` s that name a handler for their page.
    start_urls: Sequence[str | Request]
    #: Worker tasks: None (the default) sizes the pool by itself (``PoolSizer``,
    #: core/pool_sizing.py) within ``max_workers`` and the machine's limits; a
    #: number pins it.
    workers: int | None = None
    #: The most workers a sized pool may grow to (None: the descriptor and
    #: memory limits, ``machine_ceiling``).
    max_workers: int | None = None
    max_depth: int | None = None
    max_pages: int | None = None
    timeout: float = 30.0
    connect_timeout: float = 10.0
    retries: int = 2
    rate: float | None = None
    per_host_concurrency: int | None = None
    ignore_robots: bool = False
    sitemaps: bool = False
    #: Also fetch what each HTML page needs (images, scripts, stylesheets, frames...).
    page_requisites: bool = False
    allow_domains: Sequence[str] = field(default_factory=tuple)
    #: Follow links to any host (wget -H); robots.txt and politeness per host
    #: as ever. Pair it with ``max_hosts`` / ``max_pages_per_host`` / ``max_depth``.
    span_hosts: bool = False
    #: Admit at most this many URLs of one host:port (None: no limit).
    max_pages_per_host: int | None = None
    #: Crawl at most this many distinct hosts (host:port), start hosts included.
    max_hosts: int | None = None
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
    user_agent: str = DEFAULT_USER_AGENT
    max_bytes: int = 10 * 1024 * 1024
    html_only: bool = True
    grace: float = 10.0
    #: Stop gracefully this many seconds after the start (None: no limit),
    #: as ``stop()`` does: in-flight pages get ``grace`` seconds to finish.
    max_time: float | None = None
    #: Space a host's requests 0.5 to 1.5 times the ``rate`` interval at
    #: random (wget's --random-wait), never closer than its Crawl-delay.
    random_wait: bool = False
    max_retry_after: float = 60.0
    #: The longest robots.txt Crawl-delay obeyed; larger ones are cut to it.
    max_crawl_delay: float = 60.0
    backend: str = "curl"
    #: CA certificates (PEM file or hashed directory) for https; see FetchConfig.
    ca_bundle: str | None = None
    #: Offer HTTP/2 on https connections (default: HTTP/1.1 only).
    http2: bool = False
    #: Bodies larger than this are parsed in a worker thread (lxml releases the GIL).
    thread_parse_bytes: int = 1024 * 1024
    #: Extract links in a child process, on another CPU (README, Performance):
    #: None (the default) where that can pay, i.e. two CPUs or more and a crawl
    #: that reads pages for links alone; True or False to force it.
    parse_process: bool | None = None
    debug: bool = False
    #: The handler for pages whose Request names none (None: follow links).
    handler: Handler | None = None
    #: Re-raise the first handler exception (cancelling the crawl) instead
    #: of recording it with kind "handler".
    fail_fast: bool = False
    #: Identity (the fields up to ``proxy``) configures the fetcher the crawl
    #: opens; a fetcher passed to ``run_crawl`` / ``open_crawler`` keeps its own.
    #: Extra request headers, ``(name, value)``; credential headers
    #: (Authorization, Cookie) go to the start URLs' origins only (core.identity).
    headers: Sequence[tuple[str, str]] = field(default=(), repr=False)
    #: HTTP basic auth ``(user, password)`` for the start URLs' origins only.
    auth: tuple[str, str] | None = field(default=None, repr=False)
    #: A netrc file with basic-auth credentials for the start hosts (unless ``auth``).
    netrc_file: str | None = None
    #: Cookies sent and kept during the crawl (None: no cookies); the caller saves it.
    cookies: CookieJar | None = field(default=None, repr=False, compare=False)
    #: Proxy URL for every request; "" for none; None: HTTP(S)_PROXY / NO_PROXY.
    proxy: str | None = field(default=None, repr=False)
    #: Render HTML pages in headless Chromium (``--render``; README, Rendering):
    #: True for every page, "auto" where rendering adds links (``--render auto``).
    render: bool | Literal["auto"] = False
    #: The longest wait for a rendered page to settle (load + quiet network).
    render_wait: float = 5.0
    #: The browser executable (``--browser``; else $TRIO_CRAWL_BROWSER, else
    #: chromium on PATH); resolved to a path when ``render`` is set.
    browser: str | None = None
    #: Save every 2xx body under this directory, as ``host[:port]/path``
    #: (``mirror/layout.py``): an offline copy, like ``wget -m``.
    mirror: str | None = None
    #: With ``mirror``: at the end, links to saved files become relative
    #: paths, the others absolute URLs (wget's ``-k``).
    convert_links: bool = False
    #: With ``mirror``: add ``.html`` / ``.css`` to names that lack them (wget's ``-E``).
    adjust_extension: bool = False

    def __post_init__(self) -> None:
        # Messages name library arguments ("workers="); the CLI words them
        # as its flags (``ConfigError.worded``).
        checks: list[tuple[bool, str, str]] = [
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
            (self.timeout > 0, "timeout=", f"must be > 0 (got {self.timeout})"),
            (
                self.connect_timeout > 0,
                "connect_timeout=",
                f"must be > 0 (got {self.connect_timeout})",
            ),
            (self.retries >= 0, "retries=", f"must be >= 0 (got {self.retries})"),
            (self.rate is None or self.rate > 0, "rate=", f"must be > 0 (got {self.rate})"),
            (
                self.per_host_concurrency is None or self.per_host_concurrency >= 1,
                "per_host_concurrency=",
                f"must be >= 1 (got {self.per_host_concurrency})",
            ),
            (self.max_bytes > 0, "max_bytes=", f"must be > 0 (got {self.max_bytes})"),
            (self.grace >= 0, "grace=", f"must be >= 0 (got {self.grace})"),
            (
                self.max_retry_after >= 0,
                "max_retry_after=",
                f"must be >= 0 (got {self.max_retry_after})",
            ),
            (
                self.max_time is None or 0 < self.max_time < float("inf"),
                "max_time=",
                f"must be a number of seconds > 0 (got {self.max_time})",
            ),
            (
                not self.random_wait or self.rate is not None,
                "random_wait=True",
                "needs rate=: it varies the interval between a host's requests that rate= sets",
            ),
            (
                0 <= self.max_crawl_delay < float("inf"),
                "max_crawl_delay=",
                f"must be a number of seconds >= 0 (got {self.max_crawl_delay})",
            ),
            (self.backend in FETCHERS, "backend=", f"must be one of {', '.join(FETCHERS)}"),
            (
                self.parse_process in (True, False, None),
                "parse_process=",
                f"must be True, False or None (got {self.parse_process!r})",
            ),
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
            (bool(self.user_agent.strip()), "user_agent=", "must not be empty"),
            (
                self.ca_bundle is None or os.path.exists(self.ca_bundle),
                "ca_bundle=",
                f"no such file or directory: {self.ca_bundle}",
            ),
        ]
        for ok, argument, problem in checks:
            if not ok:
                separator = ": " if problem.startswith("no such") else " "
                raise ConfigError(f"{argument}{separator}{problem}", argument)
        if self.render:
            object.__setattr__(self, "browser", find_browser(self.browser, os.environ))
        if self.workers and self.max_workers and self.workers > self.max_workers:
            raise ConfigError(
                f"workers= {self.workers} is more than max_workers= {self.max_workers}",
                "max_workers=",  # first: "workers=" is inside it
                "workers=",
            )
        self._check_identity()
        self._check_mirror()
        canonical: list[str | Request] = []
        for start in self.start_urls:
            text = start.url if isinstance(start, Request) else start
            try:
                url = parse_start_url(text)
            except ConfigError:
                raise
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            canonical.append(
                dataclasses.replace(start, url=url) if isinstance(start, Request) else url
            )
        object.__setattr__(self, "start_urls", tuple(canonical))
        if any("@" in urlsplit(url).netloc for url in self.start_url_strings):
            raise ConfigError(
                "a start URL has a user name or password in it: give them with auth= "
                "or netrc_file= instead (URLs are written to the records)",
                "auth=",
                "netrc_file=",
            )
        object.__setattr__(self, "allow_domains", tuple(self.allow_domains))
        for name in ("include", "exclude", "accept", "reject"):
            value = getattr(self, name)
            if isinstance(value, str):  # one pattern, not its characters
                raise ConfigError(
                    f"{name}= must be a sequence of patterns, not one string", f"{name}="
                )
            object.__setattr__(self, name, tuple(value))
        self.url_filter()  # a pattern that does not compile: ConfigError

    def _check_identity(self) -> None:
        """Headers, proxy and netrc, with messages that never show a secret."""
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
        if self.netrc_file is not None and self.auth is None:
            try:
                start_credentials([], netrc_file=self.netrc_file)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None

    def _check_mirror(self) -> None:
        if self.mirror is not None:
            object.__setattr__(self, "mirror", os.fspath(self.mirror))
            if not self.mirror:
                raise ConfigError("mirror= must name a directory (got an empty path)", "mirror=")
        for name in ("convert_links", "adjust_extension"):
            if getattr(self, name) and self.mirror is None:
                raise ConfigError(
                    f"{name}=True needs mirror= (a directory to save the site in)",
                    f"{name}=True",
                    "mirror=",
                )

    @property
    def worker_ceiling(self) -> int:
        """The most workers this crawl may run: ``workers`` when pinned, else
        ``max_workers`` within what the machine can serve."""
        if self.workers is not None:
            return self.workers
        machine = machine_ceiling()[0]
        return machine if self.max_workers is None else min(self.max_workers, machine)

    @property
    def host_concurrency(self) -> int | None:
        """The most requests in flight to one host: ``per_host_concurrency``;
        unset, a self-sized crawl keeps to ``DEFAULT_PER_HOST`` (16) per host,
        what the old fixed default allowed in all, so that growing for many
        hosts never means more at once to one site; a ``-w`` crawl has none."""
        if self.per_host_concurrency is not None or self.workers is not None:
            return self.per_host_concurrency
        return DEFAULT_PER_HOST

    @property
    def initial_workers(self) -> int:
        """Workers at the start: ``workers``, or where a sized pool starts."""
        return self.workers or min(INITIAL_WORKERS, self.worker_ceiling)

    @property
    def start_url_strings(self) -> list[str]:
        return [s.url if isinstance(s, Request) else s for s in self.start_urls]

    def url_filter(self, more_start_urls: Iterable[str] = ()) -> UrlFilter:
        """The crawl's ``UrlFilter``; ``more_start_urls`` (``--seeds``) add
        ``--no-parent`` roots."""
        url_filter = UrlFilter(
            include=self.include,
            exclude=self.exclude,
            no_parent=self.no_parent,
            start_urls=self.start_url_strings,
            accept=self.accept,
            reject=self.reject,
        )
        url_filter.add_roots(more_start_urls)
        return url_filter

    def scope(
        self, more_origins: Iterable[str] = (), url_filter: UrlFilter | None = None
    ) -> Scope:
        """The crawl's scope: the start URLs' hosts (and ``more_origins``'),
        ``allow_domains``, and the URL filters (``url_filter``, else this
        config's), if any."""
        hosts = [*self.start_url_strings, *more_origins]
        url_filter = url_filter or self.url_filter()
        if not url_filter.active:
            return Scope(hosts, self.allow_domains, span_hosts=self.span_hosts)
        return FilteredScope(
            hosts, self.allow_domains, url_filter=url_filter, span_hosts=self.span_hosts
        )

    def host_budget(self) -> HostBudget | None:
        """The crawl's per-host budgets, or None when it has none."""
        if self.max_pages_per_host is None and self.max_hosts is None:
            return None
        return HostBudget(max_pages_per_host=self.max_pages_per_host, max_hosts=self.max_hosts)

    def fetch_config(self) -> FetchConfig:
        return FetchConfig(
            user_agent=self.user_agent,
            timeout=self.timeout,
            connect_timeout=min(self.connect_timeout, self.timeout),
            max_bytes=self.max_bytes,
            max_connections=self.worker_ceiling,
            html_only=self.html_only,
            ca_bundle=self.ca_bundle,
            http2=self.http2,
            headers=tuple((name, value.strip(" \t")) for name, value in self.headers),
            trusted_origins=start_origins(self.start_url_strings),
            credentials=start_credentials(
                self.start_url_strings, auth=self.auth, netrc_file=self.netrc_file
            ),
            cookies=self.cookies,
            proxy=self.proxy,
        )
