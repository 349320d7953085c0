"""``trio-crawl``: the command line, a thin layer over the library.

Exit codes (the README's table):

====  ==================================================================
0     the crawl completed, even if some pages failed
1     a handler raised under ``--fail-fast`` (``handler error at URL: ...``)
2     bad arguments or input, found before anything is written or fetched
3     an output could not be written (disk full, I/O error): the crawl
      stopped; what was written is complete lines
4     no start URL could be connected to (wget exits 4 for this too)
70    an internal error: a bug (``--debug`` shows the traceback)
75    the ``--state`` file is in use by another crawl (try again later)
130   stopped by SIGINT (143: SIGTERM); the output holds complete lines
====  ==================================================================

Every failure is one line on stderr, ``trio-crawl: error: ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
import signal
import sys
import time
import traceback
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Iterable,
    Iterator,
    Sequence,
)
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, NoReturn, cast

import trio
from rich.console import Console

from .. import __version__
from ..core.config import FETCHERS, CrawlConfig
from ..core.models import CrawlRecord, FetchResult
from ..core.scrape import Handler, Page, Request
from ..core.stats import latency_bound_hint
from ..core.url import canonicalize, host_port, mask_credentials, parse_start_url
from ..engine.api import open_fetcher
from ..engine.crawler import Crawler
from ..errors import (
    ConfigError,
    OutputError,
    StateLockedError,
    StateUsageError,
    StateWriteError,
)
from ..frontiers.base import FrontierBackend
from ..frontiers.disk_backlog import seed_lines
from ..frontiers.resume import status_text, stored_start_urls
from ..frontiers.sqlite import DEFAULT_WINDOW, SqliteFrontier
from ..outputs.archive import ArchiveLink, ArchiveTicket, open_crawl_archive
from ..outputs.jsonl import ItemCsvWriter, ItemJsonLinesWriter, JsonLinesWriter, OutputFile
from .identity import add_identity_options, identity_options, save_cookies
from .progress import print_summary, show_progress
from .redis_cli import add_redis_options, run_redis_cli

EXIT_OK = 0
EXIT_HANDLER = 1
EXIT_USAGE = 2
EXIT_OUTPUT = 3
EXIT_UNREACHABLE = 4
EXIT_SOFTWARE = 70
EXIT_STATE_BUSY = 75
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}

#: Error kinds of a start URL that mean "could not connect" (DNS failures,
#: refused and unreachable hosts are all ``connect``).
UNREACHABLE_KINDS = frozenset({"connect"})


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
    prog: str = "trio-crawl", *, with_urls: bool = True, default_output: str | None = None
) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description="Crawl web sites and write one JSON line per URL tried.",
        epilog="Run `trio-crawl demo` to crawl a built-in local site, and "
        "`trio-crawl report FILE -o report.html` for an HTML report on a crawl.",
    )
    if with_urls:
        p.add_argument(
            "urls", nargs="*", metavar="URL", help="start URL(s); scope is their host:port"
        )
    p.add_argument("-w", "--workers", type=int, default=16, help="crawler tasks (default 16)")
    p.add_argument("--max-depth", type=int, help="follow links at most D hops from a start URL")
    p.add_argument("--max-pages", type=int, help="fetch at most P pages")
    p.add_argument(
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
    p.add_argument("--append", action="store_true", help="append to the output file")
    p.add_argument("--timeout", type=_positive_float, default=30.0, help="seconds per request")
    p.add_argument("--retries", type=int, default=2, help="retries of transient failures")
    p.add_argument("--rate", type=_positive_float, help="max requests per second per host")
    p.add_argument("--per-host-concurrency", type=int, help="max requests in flight per host")
    p.add_argument("--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    p.add_argument("--sitemaps", action="store_true", help="seed from robots.txt Sitemap: lines")
    p.add_argument(
        "--warc",
        metavar="FILE",
        help="also archive every request and response as WARC 1.1 (gzip per record); "
        "appended to when a --state crawl resumes",
    )
    p.add_argument(
        "--page-requisites",
        action="store_true",
        help="also fetch the images, scripts, stylesheets (and their url()s), frames and media "
        "each HTML page needs, within scope (like wget -p); they are recorded, not followed",
    )
    p.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        metavar="HOST",
        help="also crawl HOST and its subdomains (repeatable)",
    )
    for flag, what in (("include", "only links matching"), ("exclude", "no links matching")):
        p.add_argument(
            f"--{flag}",
            action="append",
            default=[],
            metavar="REGEX",
            help=f"follow {what} REGEX (searched in the canonical URL; repeatable; "
            "--exclude wins; start URLs are always fetched)",
        )
    p.add_argument(
        "--no-parent",
        action="store_true",
        help="follow no link above a start URL's directory on its host (like wget -np)",
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
    p.add_argument(
        "--max-crawl-delay",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="longest robots.txt Crawl-delay obeyed; larger ones are cut to it (default 60)",
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
        "--ca-bundle",
        metavar="FILE",
        help="verify https peers against the CAs in this PEM file (or hashed directory) "
        "instead of the system's (default: $SSL_CERT_FILE / $SSL_CERT_DIR if set)",
    )
    p.add_argument(
        "--http2", action="store_true", help="offer HTTP/2 on https connections (default: 1.1)"
    )
    add_identity_options(p)
    p.add_argument(
        "--handler",
        metavar="MODULE:FUNCTION",
        help="async handler for every page (yields items and Requests) instead of link-following",
    )
    p.add_argument(
        "--items",
        metavar="FILE",
        help="write handlers' items here ('-' = stdout; .csv for CSV, else JSON Lines); "
        "required with --handler",
    )
    p.add_argument(
        "--fail-fast", action="store_true", help="stop at the first handler error (exit 1)"
    )
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


# -- checks before anything is opened ---------------------------------------


def build_config(
    args: argparse.Namespace,
    start_urls: Sequence[str],
    watch: HandlerWatch | None = None,
) -> CrawlConfig:
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
        "page_requisites": args.page_requisites,
        "allow_domains": tuple(args.allow_domain),
        "include": tuple(args.include),
        "exclude": tuple(args.exclude),
        "no_parent": args.no_parent,
        "max_bytes": args.max_bytes,
        "max_retry_after": args.max_retry_after,
        "max_crawl_delay": args.max_crawl_delay,
        "grace": args.grace,
        "backend": args.fetcher,
        "html_only": not args.all_bodies,
        "ca_bundle": args.ca_bundle,
        "http2": args.http2,
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
    if getattr(args, "state", None) and args.output in ("-", None):
        raise UsageError("--state needs an output file (-o FILE) to resume into")
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


def _workers_within_fd_limit(ceiling: int = 512) -> int:
    """Half the soft descriptor limit (a socket per worker, room for the rest), at most
    ``ceiling``: the most workers the latency-bound hint suggests."""
    try:
        import resource
    except ImportError:  # Windows
        return ceiling
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ceiling if soft == resource.RLIM_INFINITY else max(16, min(ceiling, soft // 2))


def check_seeds(path: str, *, other_urls: bool) -> str | None:
    """Read the seeds file once: it must be readable and hold an http(s) URL
    (unless start URLs are given too). Returns a warning about skipped lines."""
    bad = 0
    first: list[tuple[int, str]] = []

    def on_bad_line(number: int, text: str) -> None:
        nonlocal bad
        bad += 1
        if not first:
            first.append((number, text))

    try:
        good = sum(1 for _ in seed_lines(Path(path), canonicalize, on_bad_line=on_bad_line))
    except OSError as exc:
        raise UsageError(f"cannot read seeds file {path!r}: {exc.strerror or exc}") from None
    if not good and not other_urls:
        raise UsageError(f"no http(s) URLs in seeds file {path!r}")
    if not bad:
        return None
    number, text = first[0]
    lines = "1 line" if bad == 1 else f"{bad:,} lines"
    return (
        f"skipped {lines} of {path} that are not http(s) URLs "
        f"(first: line {number}: {text[:200]!r})"
    )


def open_output(path: str) -> OutputFile:
    """Open an output without truncating it (``OutputFile.begin`` does that)."""
    try:
        return OutputFile.open(path)
    except OSError as exc:
        raise UsageError(f"cannot write output file {path!r}: {exc.strerror or exc}") from None


def check_warc_path(path: str | None) -> str | None:
    """A ``--warc`` path that can be written, checked before anything starts."""
    if path is None:
        return None
    return check_writable(path, "WARC file")


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


def new_default_output() -> OutputFile:
    """``crawl-YYYYmmdd-HHMMSS.jsonl`` in the current directory, never an
    existing file (``-2``, ``-3``... when one is there)."""
    stem = time.strftime("crawl-%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        path = f"{stem}.jsonl" if n == 1 else f"{stem}-{n}.jsonl"
        try:
            return OutputFile.create_new(path)
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(
                f"cannot create output file {path!r} here: {exc.strerror or exc} "
                "(give one with -o FILE)"
            ) from None
    raise UsageError("too many crawl-*.jsonl files here; give an output with -o FILE")


# -- a handler's error is not our bug ----------------------------------------------


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


# -- the crawl -------------------------------------------------------------------


class StartWatch:
    """Watches the records of start URLs (depth 0, no referrer): did any of
    them connect?"""

    def __init__(self) -> None:
        self.seen = 0
        self.unreachable = 0
        self.first_failure: str | None = None

    def __call__(self, record: CrawlRecord) -> bool:
        """Note ``record``; True if it is a start URL that could not be connected to."""
        if record.depth != 0 or record.referrer is not None:
            return False
        self.seen += 1
        if record.error is not None and record.error.kind in UNREACHABLE_KINDS:
            self.unreachable += 1
            if self.first_failure is None:
                self.first_failure = f"{host_port(record.url)}: {record.error.message}"
            return True
        return False

    @property
    def none_reachable(self) -> bool:
        return self.seen > 0 and self.unreachable == self.seen


@dataclasses.dataclass
class Outputs:
    """The crawl's open outputs; emptied only when the crawl starts and, with
    ``hold``, only once it has reached a start URL (``commit``): a crawl that
    reaches none (exit 4, or stopped before) leaves them as they were."""

    records: OutputFile
    append: bool = False
    items: OutputFile | None = None
    items_csv: bool = False
    hold: bool = False

    def all(self) -> list[OutputFile]:
        return [self.records] if self.items is None else [self.records, self.items]

    def begin(self) -> None:
        for output in self.all():
            output.begin(append=self.append, hold=self.hold)

    def commit(self) -> None:
        for output in self.all():
            output.commit()

    def drop_held(self) -> None:
        for output in self.all():
            output.drop_held()

    @property
    def holding(self) -> bool:
        return any(o.holding for o in self.all())

    def close(self) -> None:
        for output in self.all():
            if output.begun:
                output.close()
            else:
                output.discard()

    @property
    def to_terminal(self) -> bool:
        return any(o.is_stdout for o in self.all()) and sys.stdout.isatty()


@dataclasses.dataclass
class Ending:
    code: int = EXIT_OK
    message: str | None = None


async def crawl_with_ui(
    config: CrawlConfig,
    outputs: Outputs,
    *,
    show: bool,
    quiet: bool,
    frontier: FrontierBackend | None = None,
    output: str | None = None,
    warc: str | None = None,
) -> Ending:
    """Run one crawl with signal handling and (optionally) the live display."""
    signalled = EXIT_OK
    failed: OutputError | None = None
    console = Console(file=sys.stderr)
    writer = JsonLinesWriter(outputs.records)
    item_writer: ItemJsonLinesWriter | ItemCsvWriter | None = None
    if outputs.items is not None:
        item_writer = (ItemCsvWriter if outputs.items_csv else ItemJsonLinesWriter)(outputs.items)
    starts = StartWatch()
    async with open_fetcher(config) as fetcher:

        def check(output: OutputFile) -> None:
            nonlocal failed
            if output.broken_pipe:
                crawler.abort()  # `-o - | head`: the reader has what it wanted
            elif output.error is not None and failed is None:
                failed = output.error
                if not crawler.stopping:  # a second stop() would cancel at once
                    crawler.stop()

        def on_record(record: CrawlRecord) -> None:
            if not starts(record) and outputs.holding:
                outputs.commit()  # a start URL was reached: now the old file goes
                if item_writer is not None and item_writer.output.failed:
                    check(item_writer.output)
            if writer.output.failed:
                check(writer.output)

        def on_item(item: object) -> None:
            assert item_writer is not None
            item_writer.write(item)
            if item_writer.output.failed:
                check(item_writer.output)

        archive: ArchiveLink | None = None

        def on_response(url: str, result: FetchResult) -> ArchiveTicket | None:
            return None if archive is None else archive.submit(url, result)

        def on_archive_failure(error: OSError) -> None:
            # Cancel now: a page whose exchange is not in the WARC gets no
            # record (with --state it stays unfinished, for the resume).
            nonlocal failed
            if failed is None:
                failed = OutputError(str(warc), error)
            crawler.abort()

        crawler = Crawler(
            config,
            fetcher,
            frontier=frontier,
            on_record=[writer.write, on_record],
            on_depth_update=[writer.write],
            on_item=[on_item] if item_writer is not None else [],
            on_response=[on_response] if warc is not None else [],
        )

        async def watch_signals(task_status: trio.TaskStatus[None]) -> None:
            nonlocal signalled
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                task_status.started()
                async for signum in signals:
                    if signalled == EXIT_OK:
                        signalled = SIGNAL_EXIT.get(signal.Signals(signum), 130)
                        if not quiet:
                            console.print(
                                "[yellow]stopping: finishing in-flight pages "
                                f"(up to {config.grace:g}s); signal again to quit now[/]"
                            )
                    crawler.stop()

        async with trio.open_nursery() as nursery:
            await nursery.start(watch_signals)
            async with AsyncExitStack() as stack:
                if warc is not None:  # first: it may find the file busy (a lock)
                    archive = await stack.enter_async_context(
                        open_crawl_archive(
                            warc,
                            config,
                            append=outputs.append,
                            on_failure=on_archive_failure,
                            defer_start=outputs.hold,  # exit 4 leaves the WARC as it was
                        )
                    )
                outputs.begin()  # the crawl starts: only now are outputs emptied
                if show:
                    nursery.start_soon(show_progress, crawler, console)
                cpu_at_start = time.process_time()
                summary = await crawler.run()
            if archive is not None and archive.error is not None and failed is None:
                failed = OutputError(str(warc), archive.error)
            nursery.cancel_scope.cancel()
    unreachable = failed is None and signalled == EXIT_OK
    unreachable = unreachable and starts.none_reachable and not summary.stopped
    if unreachable:
        outputs.drop_held()  # the earlier crawl's output stays as it was
    if not quiet:
        old = outputs.records.holding or outputs.records.kept_old  # the last crawl's file
        hint = None if failed is not None or old else output
        print_summary(summary, sys.stderr, hint)
        latency_hint = latency_bound_hint(
            summary,
            workers=config.workers,
            per_host=config.per_host_concurrency,
            cpu_seconds=time.process_time() - cpu_at_start,
            max_workers=_workers_within_fd_limit(),
        )
        if latency_hint is not None:
            print(latency_hint, file=sys.stderr)
    if failed is not None:
        return Ending(EXIT_OUTPUT, str(failed))
    if signalled != EXIT_OK:
        return Ending(signalled)
    if unreachable:
        return Ending(
            EXIT_UNREACHABLE, f"could not connect to any start URL ({starts.first_failure})"
        )
    return Ending()


def prepare_disk_frontier(
    args: argparse.Namespace, config: CrawlConfig, output: str
) -> SqliteFrontier | None:
    """The SQLite frontier for --state, --seeds or --max-queue (else None)."""
    state = getattr(args, "state", None)
    seeds = getattr(args, "seeds", None)
    max_queue = getattr(args, "max_queue", None)
    if not (state or seeds or max_queue is not None):
        return None
    if config.handler is not None:
        raise UsageError("--handler cannot be combined with --state, --seeds or --max-queue")
    return SqliteFrontier.open(
        config,
        state,
        seeds=seeds,
        output=None if output == "-" else output,
        force=args.force,
        window=max_queue or DEFAULT_WINDOW,
    )


def _fail(message: str, code: int) -> int:
    print(f"trio-crawl: error: {mask_credentials(message)}", file=sys.stderr)
    return code


def _say(message: str) -> None:
    print(f"trio-crawl: {mask_credentials(message)}", file=sys.stderr)


def run_cli(argv: Sequence[str]) -> int:
    if argv and argv[0] == "demo":
        from .demo import run_demo

        return run_demo(list(argv[1:]))
    if argv and argv[0] == "report":
        from .report import run_report

        return run_report(list(argv[1:]))
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


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, and what they were
    raised while handling."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
        return
    yield exc
    if exc.__context__ is not None and not exc.__suppress_context__:
        yield from _leaves(exc.__context__)


def classify(exc: BaseException, watch: HandlerWatch, state: str | None) -> Ending:
    """What an exception out of a crawl means for the user: usually not a bug."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        message = watch.message(leaf)
        if message is not None:
            return Ending(EXIT_HANDLER, message)
    for leaf in leaves:
        if isinstance(leaf, StateLockedError):
            return Ending(EXIT_STATE_BUSY, str(leaf))
        if isinstance(leaf, (UsageError, StateUsageError, ConfigError)):
            return Ending(EXIT_USAGE, str(leaf))
        if isinstance(leaf, StateWriteError) and state is None:  # --max-queue's own file
            return Ending(EXIT_OUTPUT, f"cannot write to the temporary state file: {leaf.reason}")
        if isinstance(leaf, OutputError):
            return Ending(EXIT_OUTPUT, str(leaf))
    first = leaves[0]
    return Ending(
        EXIT_SOFTWARE,
        f"internal error (a bug; please report it): {type(first).__name__}: {first}",
    )


def run_crawl_command(args: argparse.Namespace, start_urls: Sequence[str]) -> int:
    """Check everything, open the outputs (emptied only when the crawl
    starts), crawl; shared by ``trio-crawl`` and ``demo``."""
    debug = bool(getattr(args, "debug", False))
    watch = HandlerWatch()
    outputs: Outputs | None = None
    frontier: SqliteFrontier | None = None
    crawled: CrawlConfig | None = None
    try:
        check_combinations(args)
        config = build_config(args, start_urls, watch if args.fail_fast else None)
        check_fetcher(config.backend)
        seeds = getattr(args, "seeds", None)
        if seeds:
            warning = check_seeds(seeds, other_urls=bool(start_urls))
            if warning:
                _say(f"warning: {warning}")
        if args.output is None and sys.stdout.isatty():
            records = new_default_output()
            _say(f"records go to {records.path} (-o FILE to choose, -o - for the terminal)")
        else:
            records = open_output(args.output or "-")
        outputs = Outputs(records)
        items_path = getattr(args, "items", None)
        if items_path:
            outputs.items = open_output(items_path)
            outputs.items_csv = items_path.lower().endswith(".csv")
        frontier = prepare_disk_frontier(args, config, args.output or "-")
        outputs.append = args.append or (frontier is not None and frontier.resumed)
        # With --state the output is the resume's list of what is done: never held.
        outputs.hold = not outputs.append and not getattr(args, "state", None)
        if frontier is not None and not args.quiet:
            for note in frontier.notes:
                _say(note)
        show = not args.quiet and sys.stderr.isatty() and not outputs.to_terminal
        run = functools.partial(
            crawl_with_ui,
            show=show,
            quiet=args.quiet,
            frontier=frontier,
            output=None if records.is_stdout else records.path,
            warc=check_warc_path(getattr(args, "warc", None)),
        )
        crawled = config
        ending = trio.run(run, config, outputs)
    except Exception as exc:
        ending = classify(exc, watch, getattr(args, "state", None))
        if debug and ending.code in (EXIT_SOFTWARE, EXIT_HANDLER):
            traceback.print_exc()
    finally:
        if frontier is not None:
            frontier.close()
        if outputs is not None:
            outputs.close()
    if crawled is not None:
        problem = save_cookies(crawled.cookies, getattr(args, "save_cookies", None))
        if problem is not None and ending.message is None:
            ending = Ending(EXIT_OUTPUT, problem)
    if ending.message is not None:
        return _fail(ending.message, ending.code)
    return ending.code


def main(argv: Sequence[str] | None = None) -> NoReturn:
    code = run_cli(sys.argv[1:] if argv is None else argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader of `-o -` went away; don't let interpreter shutdown complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)
