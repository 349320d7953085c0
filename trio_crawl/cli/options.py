"""The command line's options: the parser, and the ``CrawlConfig`` built
from what it parsed, with every check that can be made before anything is
opened or fetched (a bad combination, a missing extra, an unreadable seeds
file: one line, exit 2)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import os
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
)
from pathlib import Path
from typing import Any, TypeVar, cast

from .. import __version__
from ..core.config import FETCHERS, CrawlConfig
from ..core.http import DEFAULT_USER_AGENT
from ..core.pool_sizing import machine_ceiling
from ..core.scrape import Handler, Page, Request
from ..core.units import parse_count, parse_duration, parse_number, parse_size
from ..core.url import canonicalize
from ..engine.api import CrawlOptions
from ..errors import ConfigError
from ..frontiers.base import DEFAULT_LEASE
from .common import UsageError, UsageParser, say
from .flags import in_flags
from .identity import add_identity_options, identity_options
from .output_paths import output_clash, outputs_of

T = TypeVar("T")


class RenderOption(argparse.Action):
    """``--render`` (True) or ``--render auto``. argparse gives an optional
    value the next word whatever it is, so a start URL right after
    ``--render`` is handed back to the start URLs (``render_urls``)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if values == "auto":
            setattr(namespace, self.dest, "auto")
            return
        setattr(namespace, self.dest, True)
        if isinstance(values, str):
            namespace.render_urls = [*getattr(namespace, "render_urls", []), values]


def _unit_type(parse: Callable[[str], T], name: str) -> Callable[[str], T]:
    """An argparse type from a ``core.units`` parser: its one-line
    ``ValueError`` message becomes argparse's (``argument --timeout: ...``)."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


#: Option types: counts (``16``, ``1e3``), plain numbers, sizes (``10M``,
#: ``1.5G``) and durations (``90s``, ``2m``); see ``core/units.py``.
COUNT = _unit_type(parse_count, "count")
NUMBER = _unit_type(parse_number, "number")
SIZE = _unit_type(parse_size, "size")
DURATION = _unit_type(parse_duration, "duration")

#: The usage line: the crawl, and the two other commands.
USAGE = """%(prog)s [options] URL [URL ...]
       %(prog)s [options] --seeds FILE | --state FILE
       %(prog)s demo [options]
       %(prog)s report FILE [-o report.html]"""


def add_render_options(g: argparse._ArgumentGroup) -> None:
    """--render [auto], --render-wait, --browser."""
    g.add_argument(
        "--render",
        nargs="?",
        action=RenderOption,
        default=False,
        metavar="auto",
        help="render HTML pages in headless Chromium and read links from the rendered DOM;"
        " --render auto: only where rendering adds links (default: no rendering)",
    )
    g.add_argument(
        "--render-wait",
        type=DURATION,
        metavar="DURATION",
        help="with --render: longest wait for a page to settle, i.e. its load event and"
        " 500 ms with no request in flight (default 5s)",
    )
    g.add_argument(
        "--browser",
        metavar="PATH",
        help="with --render: the Chromium executable (default: $TRIO_CRAWL_BROWSER, else"
        " chromium on PATH)",
    )


def build_parser(
    prog: str = "trio-crawl", *, with_urls: bool = True, default_output: str | None = None
) -> argparse.ArgumentParser:
    """The crawl's options, in the groups ``--help`` shows (README, The
    command line). Every default is said in its help; sizes and durations
    take units."""
    p = UsageParser(
        prog=prog,
        usage=USAGE if with_urls else "%(prog)s [options]",
        description="Crawl web sites and write one JSON line per URL tried. "
        "Sizes take K, M, G (10M, 1.5G); durations s, m, h (90s, 2m); counts 1e3.",
        epilog="Run `trio-crawl demo` to crawl a built-in local site, and "
        "`trio-crawl report FILE -o report.html` for an HTML report on a crawl.",
    )
    if with_urls:
        p.add_argument(
            "urls", nargs="*", metavar="URL", help="start URL(s); scope is their host:port"
        )
    add_scope_options(p.add_argument_group("scope and filters"))
    add_politeness_options(p.add_argument_group("politeness"))
    identity = p.add_argument_group("identity")
    identity.add_argument(
        "--user-agent",
        metavar="UA",
        help="User-Agent header, also the robots.txt token (default: "
        f"{DEFAULT_USER_AGENT.split(' ')[0]} ...)",
    )
    add_identity_options(identity)
    add_output_options(p.add_argument_group("output"), default_output)
    add_state_options(p.add_argument_group("state and scale-out"), with_urls=with_urls)
    add_fetcher_options(p.add_argument_group("fetcher"))
    add_render_options(p.add_argument_group("rendering (README: Rendering)"))
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, no summary")
    p.add_argument("--debug", action="store_true", help="tracebacks in records and errors")
    p.add_argument("--version", action="version", version=f"trio-crawl {__version__}")
    return p


def add_scope_options(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--max-depth",
        type=COUNT,
        metavar="D",
        help="follow links at most D hops from a start URL (default: no limit)",
    )
    g.add_argument(
        "--max-pages",
        type=COUNT,
        metavar="P",
        help="fetch at most P pages, P >= 1 (default: no limit)",
    )
    g.add_argument(
        "--max-time",
        type=DURATION,
        metavar="DURATION",
        help="stop gracefully after this long (90s, 2m, 1h), as on Ctrl+C; "
        "resumable with --state (default: no limit)",
    )
    g.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        metavar="HOST",
        help="also crawl HOST and its subdomains (repeatable)",
    )
    g.add_argument(
        "--span-hosts",
        action="store_true",
        help="follow links to any host (like wget -H); robots.txt and politeness per host",
    )
    g.add_argument(
        "--max-pages-per-host",
        type=COUNT,
        metavar="N",
        help="admit at most N URLs of one host (default: no limit)",
    )
    g.add_argument(
        "--max-hosts",
        type=COUNT,
        metavar="N",
        help="crawl at most N distinct hosts (host:port), the start URLs' included "
        "(default: no limit)",
    )
    for flag, what in (("include", "only links matching"), ("exclude", "no links matching")):
        g.add_argument(
            f"--{flag}",
            action="append",
            default=[],
            metavar="REGEX",
            help=f"follow {what} REGEX (searched in the canonical URL; repeatable; "
            "--exclude wins; start URLs are always fetched)",
        )
    g.add_argument(
        "--no-parent",
        action="store_true",
        help="follow no link above a start URL's directory on its host (like wget -np)",
    )
    g.add_argument(
        "-A",
        "--accept",
        action="append",
        default=[],
        metavar="LIST",
        help="follow only files whose name ends with one of these comma-separated suffixes "
        "or matches one of these shell patterns (pdf,jpg; like wget -A); .html pages and "
        "directories are still read for links",
    )
    g.add_argument(
        "-R",
        "--reject",
        action="append",
        default=[],
        metavar="LIST",
        help="follow no file whose name ends with one of these suffixes or matches one of "
        "these patterns (like wget -R); .html pages and directories are still read for links",
    )
    g.add_argument(
        "--sitemaps", action="store_true", help="also seed from the sitemaps robots.txt lists"
    )
    g.add_argument(
        "--page-requisites",
        action="store_true",
        help="also fetch the images, scripts, stylesheets (and their url()s), frames and media "
        "each HTML page needs, within scope (like wget -p); they are recorded, not followed",
    )


def add_politeness_options(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--rate",
        type=NUMBER,
        metavar="R",
        help="at most R requests per second to each host (default: no limit beyond "
        "robots.txt Crawl-delay)",
    )
    g.add_argument(
        "--random-wait",
        action="store_true",
        help="with --rate: space a host's requests 0.5 to 1.5 times 1/R at random "
        "(like wget --random-wait)",
    )
    g.add_argument(
        "--per-host-concurrency",
        type=COUNT,
        metavar="C",
        help="at most C requests in flight to each host (default: no limit but -w)",
    )
    g.add_argument("--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    g.add_argument(
        "--max-crawl-delay",
        type=DURATION,
        default=60.0,
        metavar="DURATION",
        help="longest robots.txt Crawl-delay obeyed; larger ones are cut to it (default 60s)",
    )
    g.add_argument(
        "--max-retry-after",
        type=DURATION,
        default=60.0,
        metavar="DURATION",
        help="longest wait a Retry-After header can ask for before a retry (default 60s)",
    )


def add_output_options(g: argparse._ArgumentGroup, default_output: str | None) -> None:
    g.add_argument(
        "-o",
        "--output",
        default=default_output,
        metavar="FILE",
        help="JSON Lines output file ('-' = stdout; default: "
        + (
            "stdout, or crawl-DATE-TIME.jsonl when stdout is a terminal)"
            if default_output is None
            else f"{default_output})"
        ),
    )
    g.add_argument("--append", action="store_true", help="append to the output file")
    g.add_argument(
        "--depth-updates",
        metavar="FILE",
        help="write depth corrections here as JSON Lines (a shorter path to a URL found "
        "after its record was written); the output keeps one line per URL whatever happens. "
        "'-' = stdout, when -o is a file. `trio-crawl report OUT --depth-updates FILE` "
        "applies them (default: counted in the summary, not written)",
    )
    g.add_argument(
        "--warc",
        metavar="FILE",
        help="also archive every request and response as WARC 1.1 (gzip per record; no "
        "extra needed); appended to when a --state crawl resumes",
    )
    g.add_argument(
        "--mirror",
        metavar="DIR",
        help="save every fetched body under DIR/host[:port]/path, an offline copy like "
        "wget -m (implies --all-bodies); with -k and --page-requisites a browsable one",
    )
    g.add_argument(
        "-k",
        "--convert-links",
        action="store_true",
        help="with --mirror: when the crawl ends, links to saved files become relative "
        "paths, other links absolute URLs (like wget -k)",
    )
    g.add_argument(
        "-E",
        "--adjust-extension",
        action="store_true",
        help="with --mirror: add .html / .css to saved names that lack them (like wget -E)",
    )
    g.add_argument(
        "--handler",
        metavar="MODULE:FUNCTION",
        help="async handler for every page (yields items and Requests) instead of link-following",
    )
    g.add_argument(
        "--items",
        metavar="FILE",
        help="write handlers' items here ('-' = stdout; .csv for CSV, else JSON Lines); "
        "required with --handler",
    )
    g.add_argument(
        "--fail-fast", action="store_true", help="stop at the first handler error (exit 1)"
    )


def add_state_options(g: argparse._ArgumentGroup, *, with_urls: bool) -> None:
    g.add_argument(
        "-w",
        "--workers",
        type=COUNT,
        metavar="N",
        help="crawler tasks, fixed (default: sized by itself from CPU time and latency, "
        "starting at 64)",
    )
    g.add_argument(
        "--max-workers",
        type=COUNT,
        metavar="N",
        help="the most crawler tasks a self-sized crawl grows to (default: what the "
        "descriptor limit and memory allow)",
    )
    g.add_argument(
        "--parse-process",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="extract links in a child process, on another CPU (default: on when 2 or more "
        "CPUs are usable and pages are read for links alone; --no-parse-process: never)",
    )
    g.add_argument(
        "--grace",
        type=DURATION,
        default=10.0,
        metavar="DURATION",
        help="on a stop (Ctrl+C, --max-time), how long in-flight pages may take to finish "
        "(default 10s)",
    )
    g.add_argument(
        "--state",
        metavar="FILE",
        help="keep the frontier in this SQLite file; run the same command again to resume",
    )
    g.add_argument("--status", action="store_true", help="with --state: print progress, exit")
    g.add_argument("--force", action="store_true", help="resume a --state file with new args")
    g.add_argument("--seeds", metavar="FILE", help="start URLs from a file, one per line")
    g.add_argument(
        "--max-queue",
        type=COUNT,
        metavar="N",
        help="queued URLs kept in memory; the rest wait in SQLite (default with "
        "--state, or --seeds of more than 10000 URLs: 10000; else all in memory)",
    )
    if with_urls:
        add_redis_options(g)


def add_fetcher_options(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--fetcher",
        choices=FETCHERS,
        default="curl",
        help="HTTP backend (default curl). asks cannot be installed beside the current trio"
        " (it needs trio < 0.24 and anyio 3): see README, Fetchers, and `nox -s asks`",
    )
    g.add_argument(
        "--timeout",
        type=DURATION,
        default=30.0,
        metavar="DURATION",
        help="per request (default 30s)",
    )
    g.add_argument(
        "--retries",
        type=COUNT,
        default=2,
        metavar="K",
        help="retries of transient failures: timeouts, refused connections, resets, 429, "
        "502-504 (default 2)",
    )
    g.add_argument(
        "--max-bytes",
        type=SIZE,
        default=10 * 1024 * 1024,
        metavar="SIZE",
        help="largest body read; a larger one is a too_large record (default 10M)",
    )
    g.add_argument(
        "--all-bodies",
        action="store_true",
        help="download non-HTML bodies too (default: HTML only, others are recorded unread)",
    )
    g.add_argument(
        "--ca-bundle",
        metavar="FILE",
        help="verify https peers against the CAs in this PEM file (or hashed directory) "
        "instead of the system's (default: $SSL_CERT_FILE / $SSL_CERT_DIR if set)",
    )
    g.add_argument(
        "--http2", action="store_true", help="offer HTTP/2 on https connections (default: 1.1)"
    )


def build_config(
    args: argparse.Namespace,
    start_urls: Sequence[str],
    watch: HandlerWatch | None = None,
) -> CrawlConfig:
    clash = output_clash(outputs_of(args))
    if clash is not None:
        raise UsageError(clash)
    check_limits(args)
    options: CrawlOptions = {
        "workers": pinned_workers(args.workers),
        "max_workers": args.max_workers,
        "max_depth": args.max_depth,
        "max_pages": args.max_pages,
        "timeout": args.timeout,
        "retries": args.retries,
        "rate": args.rate,
        "per_host_concurrency": args.per_host_concurrency,
        "ignore_robots": args.ignore_robots,
        "sitemaps": args.sitemaps,
        "page_requisites": args.page_requisites,
        "allow_domains": tuple(args.allow_domain),
        "span_hosts": args.span_hosts,
        "max_pages_per_host": args.max_pages_per_host,
        "max_hosts": args.max_hosts,
        "include": tuple(args.include),
        "exclude": tuple(args.exclude),
        "no_parent": args.no_parent,
        "max_bytes": args.max_bytes,
        "max_retry_after": args.max_retry_after,
        "max_time": args.max_time,
        "random_wait": args.random_wait,
        "accept": tuple(args.accept),
        "reject": tuple(args.reject),
        "max_crawl_delay": args.max_crawl_delay,
        "grace": args.grace,
        "backend": args.fetcher,
        "render": getattr(args, "render", False),
        "render_wait": getattr(args, "render_wait", None) or 5.0,
        "browser": getattr(args, "browser", None),
        "html_only": not (args.all_bodies or args.mirror),
        "mirror": args.mirror,
        "convert_links": args.convert_links,
        "adjust_extension": args.adjust_extension,
        "ca_bundle": args.ca_bundle,
        "http2": args.http2,
        "parse_process": getattr(args, "parse_process", None),
        "debug": args.debug,
    }
    try:
        options.update(identity_options(args))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "save_cookies", None):
        check_writable(args.save_cookies, "cookie file")
    if args.user_agent is not None:
        options["user_agent"] = args.user_agent
    if getattr(args, "handler", None):
        handler = load_handler(args.handler)
        options["handler"] = watch.wrap(handler) if watch is not None else handler
        options["fail_fast"] = args.fail_fast
    try:
        return CrawlConfig(start_urls=list(start_urls), **options)
    except ConfigError as exc:
        raise UsageError(in_flags(exc)) from None


def check_limits(args: argparse.Namespace) -> None:
    """Values that parse but would do nothing useful (no silent no-ops)."""
    if args.max_pages is not None and args.max_pages < 1:
        raise UsageError(
            f"--max-pages must be at least 1 (got {args.max_pages}); leave it out for no limit"
        )
    if args.random_wait and args.rate is None:
        raise UsageError("--random-wait needs --rate R: it varies the interval --rate sets")
    if args.random_wait and getattr(args, "redis", None):
        raise UsageError("--random-wait does not work with --redis yet (Redis spaces requests)")


#: Handler modules this run imported (``load_handler``): user code, whose
#: files may be left for Python's teardown to flush, so the command then
#: ends with the ordinary exit (``trio_crawl.__main__.may_exit_now``).
LOADED_HANDLERS: list[str] = []


def load_handler(spec: str) -> Handler:
    """Import ``module:function`` (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--handler must look like module:function (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    LOADED_HANDLERS.append(module_name)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import handler module {module_name!r}: {exc}") from None
    handler = getattr(module, attr, None)
    if not callable(handler):
        raise UsageError(f"{module_name!r} has no callable {attr!r}")
    return cast(Handler, handler)


def check_combinations(args: argparse.Namespace) -> None:
    """Options that only make sense together (no silent no-ops)."""
    handler = getattr(args, "handler", None)
    items = getattr(args, "items", None)
    if handler and not items:
        raise UsageError(
            "--handler needs --items FILE (or -) to keep the items it produces "
            "(--items /dev/null to drop them)"
        )
    if items and not handler:
        raise UsageError("--items needs --handler MODULE:FUNCTION: only handlers produce items")
    if getattr(args, "fail_fast", False) and not handler:
        raise UsageError("--fail-fast needs --handler: it stops at the first handler error")
    if (
        items == "-"
        and args.output in ("-", None)
        and not (args.output is None and sys.stdout.isatty())
    ):
        raise UsageError("--items - and -o - would both write to stdout: give one of them a file")
    updates = getattr(args, "depth_updates", None)
    records_to_stdout = args.output == "-" or (args.output is None and not sys.stdout.isatty())
    if updates == "-" and (records_to_stdout or items == "-"):
        other = (
            "--items -"
            if items == "-"
            else "-o -"
            if args.output == "-"
            else "the records (stdout, without -o FILE)"
        )
        raise UsageError(
            f"--depth-updates - and {other} would both write to stdout: give one of them a file"
        )
    if getattr(args, "state", None) and args.output in ("-", None):
        raise UsageError("--state needs an output file (-o FILE) to resume into")
    for flag in ("render_wait", "browser"):
        if getattr(args, flag, None) is not None and not getattr(args, "render", False):
            raise UsageError(f"--{flag.replace('_', '-')} needs --render")
    max_queue = getattr(args, "max_queue", None)
    if max_queue is not None and max_queue < 1:
        raise UsageError(f"--max-queue must be at least 1 (got {max_queue})")


def check_fetcher(backend: str) -> None:
    """The fetcher's library must import here (asks often cannot: README)."""
    try:
        if backend == "asks":
            from ..fetch.asks import load_asks

            load_asks()
        else:
            importlib.import_module({"curl": "pycurl", "httpx": "httpx2"}[backend])
    except ImportError as exc:
        raise UsageError(f"--fetcher {backend}: {exc}") from None


def pinned_workers(workers: int | None) -> int | None:
    """``-w N`` as given, or clamped (with a one-line warning) to what the
    descriptor limit and memory can serve: a million workers would need a
    million sockets."""
    if workers is None or workers < 1:
        return workers
    most, why = machine_ceiling()
    if workers > most:
        too_many = f"-w {workers:,} is more than this machine can serve ({why})"
        say(f"warning: {too_many}: using -w {most:,}")
        return most
    return workers


def workers_within_fd_limit(ceiling: int = 512) -> int:
    """Half the soft descriptor limit (a socket per worker, room for the rest), at most
    ``ceiling``: the most workers the latency-bound hint suggests."""
    try:
        import resource
    except ImportError:  # Windows
        return ceiling
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ceiling if soft == resource.RLIM_INFINITY else max(16, min(ceiling, soft // 2))


#: A seeds file of at most this many URLs is crawled in memory, as start URLs
#: given as arguments are; a larger one (read lazily) in a temporary SQLite
#: file, which bounds the queue's memory (``--max-queue``'s default window).
SEEDS_IN_MEMORY = 10_000


@dataclasses.dataclass(frozen=True, slots=True)
class SeedsFile:
    """What ``check_seeds`` found: a warning about skipped lines (or None),
    and the URLs themselves when there are at most ``keep`` of them."""

    warning: str | None
    urls: list[str] | None


def check_seeds(path: str, *, other_urls: bool, keep: int = SEEDS_IN_MEMORY) -> SeedsFile:
    """Read the seeds file once: it must be readable and hold an http(s) URL
    (unless start URLs are given too). Keeps at most ``keep`` URLs in memory:
    a larger file is only counted (``urls`` is None)."""
    bad = 0
    first: list[tuple[int, str]] = []

    def on_bad_line(number: int, text: str) -> None:
        nonlocal bad
        bad += 1
        if not first:
            first.append((number, text))

    from ..frontiers.seeds import seed_lines  # for --seeds only

    kept: list[str] | None = []
    good = 0
    try:
        for url in seed_lines(Path(path), canonicalize, on_bad_line=on_bad_line):
            good += 1
            if kept is not None:
                if good > keep:
                    kept = None  # too many to hold: the SQLite frontier reads them again
                else:
                    kept.append(url)
    except OSError as exc:
        raise UsageError(f"cannot read seeds file {path!r}: {exc.strerror or exc}") from None
    if not good and not other_urls:
        raise UsageError(f"no http(s) URLs in seeds file {path!r}")
    if not bad:
        return SeedsFile(None, kept)
    number, text = first[0]
    lines = "1 line" if bad == 1 else f"{bad:,} lines"
    return SeedsFile(
        f"skipped {lines} of {path} that are not http(s) URLs "
        f"(first: line {number}: {text[:200]!r})",
        kept,
    )


def add_redis_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--redis",
        metavar="URL",
        help="keep the crawl in Redis (redis://host:port/db) so that several "
        "processes and machines share it; its password may come from the "
        "environment variable TRIO_CRAWL_REDIS_PASSWORD instead of the URL, which "
        "keeps it out of the command line (ps shows that to every user)",
    )
    group.add_argument(
        "--crawl-id", metavar="NAME", help="with --redis: the crawl to start or join"
    )
    group.add_argument(
        "--processes",
        type=COUNT,
        metavar="N",
        help="with --redis: run N worker processes here (-o FILE becomes FILE.1 ... FILE.N)",
    )
    group.add_argument(
        "--lease",
        type=DURATION,
        default=DEFAULT_LEASE,
        metavar="SECONDS",
        help="with --redis: a worker silent this long is taken for dead and its "
        f"pages are fetched again (default {DEFAULT_LEASE:g}s)",
    )
    group.add_argument(
        "--delete-crawl",
        action="store_true",
        help="with --redis: delete every key of the crawl from Redis and exit "
        "(refused while it runs; a finished crawl's keys stay until then)",
    )


def check_writable(path: str, what: str) -> str:
    """``path`` if it can be written (an existing file, or a new one in a
    writable folder); else ``UsageError``."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path):  # an existing file needs no writable folder (/dev/full)
        writable = not os.path.isdir(path) and os.access(path, os.W_OK)
    else:
        writable = os.path.isdir(folder) and os.access(folder, os.W_OK)
    if not writable:
        raise UsageError(f"cannot write {what} {path!r}")
    return path


class HandlerWatch:
    """Under ``--fail-fast``, wraps the handlers (and those their Requests
    name) to remember the exception a handler raised and its page's URL: the
    CLI then tells a handler's error (exit 1) from a bug of ours (exit 70).
    The exception itself goes on unchanged."""

    def __init__(self) -> None:
        self.failure: tuple[str, BaseException] | None = None
        self._wrapped: dict[Handler, Handler] = {}

    def message(self, exc: BaseException) -> str | None:
        """``handler error at URL: Type: message`` if ``exc`` is the handler's."""
        if self.failure is None or self.failure[1] is not exc:
            return None
        return f"handler error at {self.failure[0]}: {type(exc).__name__}: {exc}"

    def wrap(self, handler: Handler) -> Handler:
        known = self._wrapped.get(handler)
        if known is not None:
            return known

        def watched(page: Page, /) -> AsyncIterator[object] | Awaitable[Iterable[object] | None]:
            try:
                produced = handler(page)
            except Exception as exc:
                self._note(page.url, exc)
                raise
            if inspect.isasyncgen(produced):
                return self._generator(produced, page.url)
            return self._awaitable(cast(Awaitable[Iterable[object] | None], produced), page.url)

        self._wrapped[handler] = self._wrapped[watched] = watched
        return watched

    def _note(self, url: str, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = (url, exc)

    def _output(self, output: object) -> object:
        if isinstance(output, Request) and output.handler is not None:
            return dataclasses.replace(output, handler=self.wrap(output.handler))
        return output

    async def _generator(
        self, produced: AsyncGenerator[object, Any], url: str
    ) -> AsyncIterator[object]:
        async with contextlib.aclosing(produced):
            try:
                async for output in produced:
                    yield self._output(output)
            except Exception as exc:
                self._note(url, exc)
                raise

    async def _awaitable(
        self, produced: Awaitable[Iterable[object] | None], url: str
    ) -> Iterable[object] | None:
        try:
            outputs = await produced
            return None if outputs is None else [self._output(o) for o in outputs]
        except Exception as exc:
            self._note(url, exc)
            raise
