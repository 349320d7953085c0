"""Validated, keyword-only crawl configuration, in groups.

``CrawlConfig`` is what the library takes and what the CLI builds from its
arguments: the start URLs, a handler, and one group per subject
(``core/settings.py``: ``Follow``, ``Budgets``, ``Politeness``, ``Fetching``,
``Pool``, ``Rendering``, ``Output``), each checked when it is made, with
one-line messages that the CLI prints as they are (exit 2). The checks are
pure: building a config reads no file and no PATH (``engine/resources.py``
checks those when the crawl is opened).

The library's entry points take the same settings as flat keywords
(``run_crawl(url, max_depth=2, rate=5)``: ``CrawlOptions``);
``CrawlConfig.from_options`` routes each to its group by its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..machine import machine_ceiling
from .filters import FilteredScope, UrlFilter
from .host_budget import HostBudget
from .http import FetchConfig
from .pool_sizing import DEFAULT_PER_HOST, INITIAL_WORKERS
from .retry import RetryPolicy
from .scope import Scope
from .scrape import Handler, Request, is_async_handler
from .settings import FETCHERS, Budgets, Fetching, Follow, Output, Politeness, Pool, Rendering
from .url import parse_start_url

if TYPE_CHECKING:
    # Only in annotations: http.cookiejar pulls in urllib.request and
    # http.client (~8 ms at start-up); a crawl with cookies imports it itself.
    from http.cookiejar import CookieJar

__all__ = [
    "FETCHERS",
    "CrawlConfig",
    "CrawlOptions",
    "UnknownOption",
    "option_default",
    "option_group",
    "unknown_option",
]


class CrawlOptions(TypedDict, total=False):
    """The flat keyword options of ``open_crawler``, ``run_crawl`` and
    ``CrawlConfig.from_options``: the fields of the groups and of
    ``CrawlConfig`` except ``start_urls`` (a test keeps them in step), so
    that mypy catches a misspelt or mistyped option."""

    workers: int | None
    max_workers: int | None
    max_depth: int | None
    max_pages: int | None
    timeout: float
    connect_timeout: float
    retries: int
    rate: float | None
    per_host_concurrency: int | None
    ignore_robots: bool
    sitemaps: bool
    page_requisites: bool
    allow_domains: Sequence[str]
    span_hosts: bool
    max_pages_per_host: int | None
    max_hosts: int | None
    include: Sequence[str]
    exclude: Sequence[str]
    no_parent: bool
    accept: Sequence[str]
    reject: Sequence[str]
    user_agent: str
    max_bytes: int
    html_only: bool
    grace: float
    max_time: float | None
    random_wait: bool
    max_retry_after: float
    max_crawl_delay: float
    backend: str
    thread_parse_bytes: int
    parse_process: bool | None
    debug: bool
    handler: Handler | None
    fail_fast: bool
    ca_bundle: str | None
    http2: bool
    headers: Sequence[tuple[str, str]]
    auth: tuple[str, str] | None
    netrc_file: str | None
    cookies: CookieJar | None
    proxy: str | None
    render: bool | Literal["auto"]
    render_wait: float
    browser: str | None
    mirror: str | None
    convert_links: bool
    adjust_extension: bool
    mirror_delete_gone: bool
    recrawl: bool | Literal["due"]


#: ``CrawlConfig``'s groups: its field name and the group's class.
GROUPS: dict[str, type[Any]] = {
    "follow": Follow,
    "budgets": Budgets,
    "politeness": Politeness,
    "fetch": Fetching,
    "pool": Pool,
    "rendering": Rendering,
    "output": Output,
}
#: Options that are ``CrawlConfig``'s own fields, in no group.
TOP_LEVEL = ("handler", "fail_fast", "debug")
#: Each flat option's group (its ``CrawlConfig`` field), from the groups' field names.
_ROUTE = {f.name: group for group, cls in GROUPS.items() for f in dataclasses.fields(cls)}


class UnknownOption(ConfigError, TypeError):
    """A keyword no option has (``max_dpeth=``). A ``ConfigError``, as every
    bad setting is, and a ``TypeError``, as Python's own answer to an
    unexpected keyword argument is, so that either ``except`` catches it."""


def unknown_option(name: str) -> UnknownOption:
    """The error for the keyword ``name``, with the nearest option's name
    (a misspelling is the likely cause: the type checker names it too)."""
    import difflib  # only on this error path

    known = [*TOP_LEVEL, *_ROUTE]
    near = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {near[0]}=?" if near else ""
    return UnknownOption(f"unknown option {name}={hint}", f"{name}=")


def option_group(name: str) -> str | None:
    """The group (``"budgets"``) a flat option (``"max_depth"``) belongs to;
    None for ``CrawlConfig``'s own fields (``handler``); ``KeyError`` for no option."""
    if name in TOP_LEVEL:
        return None
    return _ROUTE[name]


@dataclass(frozen=True, slots=True, kw_only=True)
class CrawlConfig:
    """Everything a crawl needs besides its fetcher: the start URLs, the
    handler, and the groups of settings (``core/settings.py``).

    Example::

        CrawlConfig(start_urls=["http://127.0.0.1:8000/"], budgets=Budgets(max_depth=2))
        # the same, from the flat options the library's entry points take:
        CrawlConfig.from_options(["http://127.0.0.1:8000/"], max_depth=2)
    """

    #: Canonical URLs, or ``Request`` s that name a handler for their page.
    start_urls: Sequence[str | Request]
    follow: Follow = field(default_factory=Follow)
    budgets: Budgets = field(default_factory=Budgets)
    politeness: Politeness = field(default_factory=Politeness)
    fetch: Fetching = field(default_factory=Fetching)
    pool: Pool = field(default_factory=Pool)
    rendering: Rendering = field(default_factory=Rendering)
    output: Output = field(default_factory=Output)
    #: The handler for pages whose Request names none (None: follow links).
    handler: Handler | None = None
    #: Re-raise the first handler exception (cancelling the crawl) instead
    #: of recording it with kind "handler".
    fail_fast: bool = False
    #: Tracebacks in records and errors.
    debug: bool = False

    @classmethod
    def from_options(
        cls, start_urls: str | Request | Iterable[str | Request], **options: Unpack[CrawlOptions]
    ) -> CrawlConfig:
        """A config from a start URL (or Request), or several, and the flat
        options (``max_depth=2, rate=5``), each routed to its group by its
        name. An unknown name is a ``ConfigError`` naming the nearest known
        one (``unknown_option``); mypy finds it first, from ``CrawlOptions``."""
        if isinstance(start_urls, str | Request):
            start_urls = [start_urls]
        grouped: dict[str, dict[str, object]] = {group: {} for group in GROUPS}
        own: dict[str, object] = {}
        for name, value in options.items():
            if name in TOP_LEVEL:
                own[name] = value
            elif name in _ROUTE:
                grouped[_ROUTE[name]][name] = value
            else:
                raise unknown_option(name)
        groups = {group: GROUPS[group](**values) for group, values in grouped.items()}
        return cls(start_urls=list(start_urls), **groups, **own)  # type: ignore[arg-type]

    def with_options(self, **options: Unpack[CrawlOptions]) -> CrawlConfig:
        """A copy with these flat options changed (the others kept)."""
        changed: dict[str, dict[str, object]] = {}
        own: dict[str, object] = {}
        for name, value in options.items():
            if name not in TOP_LEVEL and name not in _ROUTE:
                raise unknown_option(name)
            group = option_group(name)
            if group is None:
                own[name] = value
            else:
                changed.setdefault(group, {})[name] = value
        groups = {
            group: dataclasses.replace(getattr(self, group), **values)
            for group, values in changed.items()
        }
        return dataclasses.replace(self, **groups, **own)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
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
        self.url_filter()  # the --no-parent roots of the start URLs
        if self.follow.sitemaps and self.politeness.ignore_robots:
            # The sitemaps are read off robots.txt, which this crawl never fetches.
            raise ConfigError(
                "sitemaps=True reads the sitemaps robots.txt lists, and ignore_robots=True "
                "fetches no robots.txt: give one of them",
                "sitemaps=True",
                "ignore_robots=True",
            )
        if self.handler is not None and not is_async_handler(self.handler):
            name = getattr(self.handler, "__qualname__", type(self.handler).__name__)
            raise ConfigError(
                f"handler= must be an async function (async def) yielding or returning "
                f"items and Requests; {name} is not, and every page would fail",
                "handler=",
            )

    @property
    def worker_ceiling(self) -> int:
        """The most workers this crawl may run: ``workers`` when pinned, else
        ``max_workers`` within what the machine can serve (read when asked,
        never when the config is made)."""
        pool = self.pool
        if pool.workers is not None:
            return pool.workers
        machine = machine_ceiling()[0]
        return machine if pool.max_workers is None else min(pool.max_workers, machine)

    @property
    def host_concurrency(self) -> int | None:
        """The most requests in flight to one host: ``per_host_concurrency``;
        unset, a self-sized crawl keeps to ``DEFAULT_PER_HOST`` (16) per host,
        what the old fixed default allowed in all, so that growing for many
        hosts never means more at once to one site; a ``-w`` crawl has none."""
        per_host = self.politeness.per_host_concurrency
        if per_host is not None or self.pool.workers is not None:
            return per_host
        return DEFAULT_PER_HOST

    @property
    def initial_workers(self) -> int:
        """Workers at the start: ``workers``, or where a sized pool starts."""
        return self.pool.workers or min(INITIAL_WORKERS, self.worker_ceiling)

    @property
    def start_url_strings(self) -> list[str]:
        return [s.url if isinstance(s, Request) else s for s in self.start_urls]

    def url_filter(self, more_start_urls: Iterable[str] = ()) -> UrlFilter:
        """The crawl's ``UrlFilter``; ``more_start_urls`` (``--seeds``) add
        ``--no-parent`` roots."""
        follow = self.follow
        url_filter = UrlFilter(
            include=follow.include,
            exclude=follow.exclude,
            no_parent=follow.no_parent,
            start_urls=self.start_url_strings,
            accept=follow.accept,
            reject=follow.reject,
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
        follow = self.follow
        if not url_filter.active:
            return Scope(hosts, follow.allow_domains, span_hosts=follow.span_hosts)
        return FilteredScope(
            hosts, follow.allow_domains, url_filter=url_filter, span_hosts=follow.span_hosts
        )

    def retry_policy(self) -> RetryPolicy:
        """How this crawl retries a transient failure."""
        return RetryPolicy(
            retries=self.fetch.retries, max_retry_after=self.politeness.max_retry_after
        )

    def host_budget(self) -> HostBudget | None:
        """The crawl's per-host budgets, or None when it has none."""
        return self.budgets.host_budget()

    def fetch_config(self) -> FetchConfig:
        """The configuration of the fetcher this crawl opens (reads the netrc
        file, if any: ``ValueError`` when it cannot)."""
        return self.fetch.fetch_config(self.start_url_strings, self.worker_ceiling)


def option_default(name: str) -> object:
    """The value a flat option (``"timeout"``) has when it is not given (30.0)."""
    group = option_group(name)
    owner: type[Any] = CrawlConfig if group is None else GROUPS[group]
    found = next(f for f in dataclasses.fields(owner) if f.name == name)
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return found.default
