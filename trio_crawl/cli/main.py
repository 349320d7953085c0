"""``trio-crawl``: the command line, a thin layer over the library.

Exit codes: 0 the crawl completed (even if some pages failed); 2 bad
arguments (one line on stderr, no traceback); 130 / 143 stopped by SIGINT /
SIGTERM (records written so far are complete lines); 70 an internal error
(a bug: the message asks for a report, ``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import NoReturn, TextIO, cast

import trio
from rich.console import Console

from .. import __version__
from ..core.config import FETCHERS, ConfigError, CrawlConfig
from ..core.scrape import Handler
from ..core.url import parse_start_url
from ..engine.api import open_fetcher
from ..engine.crawler import Crawler
from ..engine.outputs import ItemCsvWriter, ItemJsonLinesWriter, JsonLinesWriter
from ..frontiers.base import FrontierBackend
from ..frontiers.resume import (
    StateUsageError,
    status_text,
    stored_start_urls,
)
from ..frontiers.sqlite import DEFAULT_WINDOW, SqliteFrontier
from .progress import print_summary, show_progress
from .redis_cli import add_redis_options, run_redis_cli

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_SOFTWARE = 70
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value


def build_parser(
    prog: str = "trio-crawl", *, with_urls: bool = True, default_output: str = "-"
) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description="Crawl web sites and write one JSON line per URL tried.",
        epilog="Run `trio-crawl demo` to crawl a built-in local site.",
    )
    if with_urls:
        p.add_argument(
            "urls", nargs="*", metavar="URL", help="start URL(s); scope is their host:port"
        )
    p.add_argument("-w", "--workers", type=int, default=16, help="crawler tasks (default 16)")
    p.add_argument("--max-depth", type=int, help="follow links at most D hops from a start URL")
    p.add_argument("--max-pages", type=int, help="fetch at most P pages")
    p.add_argument(
        "-o", "--output", default=default_output, help="JSON Lines output file ('-' = stdout)"
    )
    p.add_argument("--append", action="store_true", help="append to the output file")
    p.add_argument("--timeout", type=_positive_float, default=30.0, help="seconds per request")
    p.add_argument("--retries", type=int, default=2, help="retries of transient failures")
    p.add_argument("--rate", type=_positive_float, help="max requests per second per host")
    p.add_argument("--per-host-concurrency", type=int, help="max requests in flight per host")
    p.add_argument("--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    p.add_argument("--sitemaps", action="store_true", help="seed from robots.txt Sitemap: lines")
    p.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        metavar="HOST",
        help="also crawl HOST and its subdomains (repeatable)",
    )
    p.add_argument("--user-agent", help="User-Agent header (also the robots.txt token)")
    p.add_argument("--max-bytes", type=int, default=10 * 1024 * 1024, help="max body size")
    p.add_argument(
        "--max-retry-after",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="longest wait a Retry-After header can ask for before a retry (default 60)",
    )
    p.add_argument("--grace", type=_positive_float, default=10.0, help="seconds to finish on stop")
    p.add_argument(
        "--fetcher",
        choices=FETCHERS,
        default="curl",
        help="HTTP backend (default curl). asks cannot be installed beside the current trio"
        " (it needs trio < 0.24 and anyio 3): see README, Fetchers, and `nox -s asks`",
    )
    p.add_argument("--all-bodies", action="store_true", help="download non-HTML bodies too")
    p.add_argument(
        "--handler",
        metavar="MODULE:FUNCTION",
        help="async handler for every page (yields items and Requests) instead of link-following",
    )
    p.add_argument(
        "--items",
        metavar="FILE",
        help="write handlers' items here (.csv for CSV, else JSON Lines)",
    )
    p.add_argument("--fail-fast", action="store_true", help="stop at the first handler error")
    p.add_argument(
        "--state",
        metavar="FILE",
        help="keep the frontier in this SQLite file; run the same command again to resume",
    )
    p.add_argument("--status", action="store_true", help="with --state: print progress, exit")
    p.add_argument("--force", action="store_true", help="resume a --state file with new args")
    p.add_argument("--seeds", metavar="FILE", help="start URLs from a file, one per line")
    p.add_argument(
        "--max-queue",
        type=int,
        metavar="N",
        help="queued URLs kept in memory; the rest wait in SQLite (default with "
        "--state/--seeds: 10000)",
    )
    if with_urls:
        add_redis_options(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, no summary")
    p.add_argument("--debug", action="store_true", help="tracebacks in records and errors")
    p.add_argument("--version", action="version", version=f"trio-crawl {__version__}")
    return p


def build_config(args: argparse.Namespace, start_urls: Sequence[str]) -> CrawlConfig:
    options = {
        "start_urls": list(start_urls),
        "workers": args.workers,
        "max_depth": args.max_depth,
        "max_pages": args.max_pages,
        "timeout": args.timeout,
        "retries": args.retries,
        "rate": args.rate,
        "per_host_concurrency": args.per_host_concurrency,
        "ignore_robots": args.ignore_robots,
        "sitemaps": args.sitemaps,
        "allow_domains": tuple(args.allow_domain),
        "max_bytes": args.max_bytes,
        "max_retry_after": args.max_retry_after,
        "grace": args.grace,
        "backend": args.fetcher,
        "html_only": not args.all_bodies,
        "debug": args.debug,
    }
    if args.user_agent is not None:
        options["user_agent"] = args.user_agent
    if getattr(args, "handler", None):
        options["handler"] = load_handler(args.handler)
        options["fail_fast"] = args.fail_fast
    try:
        return CrawlConfig(**options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def load_handler(spec: str) -> Handler:
    """Import ``module:function`` (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--handler must look like module:function (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import handler module {module_name!r}: {exc}") from None
    handler = getattr(module, attr, None)
    if not callable(handler):
        raise UsageError(f"{module_name!r} has no callable {attr!r}")
    return cast(Handler, handler)


@contextlib.contextmanager
def open_output(path: str, append: bool) -> Iterator[TextIO]:
    if path == "-":
        yield sys.stdout
        return
    try:
        stream = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot write output file {path!r}: {exc.strerror or exc}") from None
    with stream:
        yield stream


async def crawl_with_ui(
    config: CrawlConfig,
    writer: JsonLinesWriter,
    *,
    show: bool,
    quiet: bool,
    item_writer: ItemJsonLinesWriter | ItemCsvWriter | None = None,
    frontier: FrontierBackend | None = None,
) -> int:
    """Run one crawl with signal handling and (optionally) the live display."""
    exit_code = EXIT_OK
    console = Console(file=sys.stderr)
    async with open_fetcher(config) as fetcher:

        def on_record(_record: object) -> None:
            if writer.broken:
                crawler.abort()

        crawler = Crawler(
            config,
            fetcher,
            frontier=frontier,
            on_record=[writer.write, on_record],
            on_item=[item_writer.write] if item_writer is not None else [],
        )

        async def watch_signals(task_status: trio.TaskStatus[None]) -> None:
            nonlocal exit_code
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                task_status.started()
                async for signum in signals:
                    if exit_code == EXIT_OK:
                        exit_code = SIGNAL_EXIT.get(signal.Signals(signum), 130)
                        if not quiet:
                            console.print(
                                "[yellow]stopping: finishing in-flight pages "
                                f"(up to {config.grace:g}s); signal again to quit now[/]"
                            )
                    crawler.stop()

        async with trio.open_nursery() as nursery:
            await nursery.start(watch_signals)
            if show:
                nursery.start_soon(show_progress, crawler, console)
            summary = await crawler.run()
            nursery.cancel_scope.cancel()
    if not quiet:
        print_summary(summary, sys.stderr)
    return exit_code


def prepare_disk_frontier(args: argparse.Namespace, config: CrawlConfig) -> SqliteFrontier | None:
    """The SQLite frontier for --state, --seeds or --max-queue (else None)."""
    state = getattr(args, "state", None)
    seeds = getattr(args, "seeds", None)
    max_queue = getattr(args, "max_queue", None)
    if not (state or seeds or max_queue is not None):
        return None
    if max_queue is not None and max_queue < 1:
        raise UsageError(f"--max-queue must be at least 1 (got {max_queue})")
    if config.handler is not None:
        raise UsageError("--handler cannot be combined with --state, --seeds or --max-queue")
    if state and args.output == "-":
        raise UsageError("--state needs an output file (-o FILE) to resume into")
    return SqliteFrontier.open(
        config,
        state,
        seeds=seeds,
        output=None if args.output == "-" else args.output,
        force=args.force,
        window=max_queue or DEFAULT_WINDOW,
    )


def _fail(message: str, code: int) -> int:
    print(f"trio-crawl: error: {message}", file=sys.stderr)
    return code


def run_cli(argv: Sequence[str]) -> int:
    if argv and argv[0] == "demo":
        from .demo import run_demo

        return run_demo(list(argv[1:]))
    try:
        args = build_parser().parse_args(list(argv))
        if args.redis or args.crawl_id or args.processes is not None:
            return run_redis_cli(args, argv)
        if args.status:
            if not args.state:
                raise UsageError("--status needs --state FILE")
            print(status_text(args.state))
            return EXIT_OK
        start_urls = [parse_start_url(u) for u in args.urls]
        if not start_urls and args.state:
            start_urls = stored_start_urls(args.state) or []
        if not start_urls and not args.seeds:
            raise UsageError("the following arguments are required: URL (or --seeds FILE)")
    except (UsageError, ValueError, StateUsageError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    return run_crawl_command(args, start_urls)


def run_crawl_command(args: argparse.Namespace, start_urls: Sequence[str]) -> int:
    """Validate, open the output, crawl; shared by ``trio-crawl`` and ``demo``."""
    debug = bool(getattr(args, "debug", False))
    try:
        config = build_config(args, start_urls)
        items_path = getattr(args, "items", None)
        with contextlib.ExitStack() as stack:
            frontier = prepare_disk_frontier(args, config)
            append = args.append
            if frontier is not None:
                stack.callback(frontier.close)
                append = append or frontier.resumed
                if not args.quiet:
                    for note in frontier.notes:
                        print(f"trio-crawl: {note}", file=sys.stderr)
            writer = JsonLinesWriter(stack.enter_context(open_output(args.output, append)))
            item_writer: ItemJsonLinesWriter | ItemCsvWriter | None = None
            if items_path:
                items_stream = stack.enter_context(open_output(items_path, append))
                csv_out = items_path.lower().endswith(".csv")
                item_writer = (ItemCsvWriter if csv_out else ItemJsonLinesWriter)(items_stream)
            show = not args.quiet and sys.stderr.isatty()
            run = functools.partial(
                crawl_with_ui,
                show=show,
                quiet=args.quiet,
                item_writer=item_writer,
                frontier=frontier,
            )
            return trio.run(run, config, writer)
    except (UsageError, StateUsageError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    except Exception as exc:
        if debug:
            traceback.print_exc()
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return _fail(
            f"internal error (a bug; please report it): {type(exc).__name__}: {exc}",
            EXIT_SOFTWARE,
        )


def main(argv: Sequence[str] | None = None) -> NoReturn:
    code = run_cli(sys.argv[1:] if argv is None else argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader of `-o -` went away; don't let interpreter shutdown complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)
