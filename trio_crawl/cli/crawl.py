"""One crawl from the command line: open the outputs (emptied only when
the crawl starts), run the engine with signal handling and the live
display, and turn what happened into an exit code and one line
(``classify``). Shared by ``trio-crawl URL``, ``demo`` and each ``--redis``
worker."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import signal
import sys
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import trio

from ..core.config import CrawlConfig
from ..core.models import CrawlRecord, DepthUpdate
from ..core.stats import latency_bound_hint
from ..core.url import host_port
from ..engine.build import BuiltCrawl, CrawlPlan, open_crawl
from ..errors import (
    ConfigError,
    OutputError,
    StateLockedError,
    StateUsageError,
    StateWriteError,
)
from ..frontiers.base import STATE_LIMITS, FrontierBackend, FrontierSpec, refuse_unservable
from ..outputs.jsonl import ItemCsvWriter, ItemJsonLinesWriter, JsonLinesWriter, OutputFile
from .common import (
    EXIT_HANDLER,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_SOFTWARE,
    EXIT_STATE_BUSY,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    SIGNAL_EXIT,
    UsageError,
    fail,
    say,
    stderr_console,
    tell,
)
from .flags import in_flags
from .handlers import HandlerWatch
from .identity import save_cookies
from .limits import workers_within_fd_limit
from .options import build_config, check_combinations, check_fetcher, check_writable
from .progress import (
    complete_note,
    print_summary,
    show_conversion,
    show_progress,
    time_limit_note,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..frontiers.sqlite import SqliteFrontier

#: Error kinds of a start URL that mean "could not connect" (exit 4): DNS
#: failures, refused and unreachable hosts (``connect``), a TLS handshake that
#: failed (a certificate not trusted, https sent to an http port: no secure
#: connection, so nothing was asked), and no answer before the timeout. A
#: server that answered something (``protocol``, ``reset`` mid-answer) was
#: connected to: exit 0, its record says what went wrong.
UNREACHABLE_KINDS = frozenset({"connect", "tls", "timeout"})


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
                error = record.error
                why = error.message
                if error.kind != "connect":  # a refused connection says it itself
                    why = f"{error.kind}: {why}"
                self.first_failure = f"{host_port(record.url)}: {why}"
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
    #: ``--depth-updates FILE``: corrections of records' depths, never in ``records``.
    depth_updates: OutputFile | None = None

    def all(self) -> list[OutputFile]:
        extra = (self.items, self.depth_updates)
        return [self.records, *(output for output in extra if output is not None)]

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


class Sinks:
    """The command line's hooks: records, items and depth corrections to
    their files (corrections never to the records': one line per URL there),
    and what a failed output means (a broken pipe ends the crawl at once;
    any other failure stops it gracefully, and is the crawl's ending)."""

    def __init__(self, outputs: Outputs) -> None:
        self.outputs = outputs
        self.records = JsonLinesWriter(outputs.records)
        self.items: ItemJsonLinesWriter | ItemCsvWriter | None = None
        if outputs.items is not None:
            writer = ItemCsvWriter if outputs.items_csv else ItemJsonLinesWriter
            self.items = writer(outputs.items)
        self.depth_updates: JsonLinesWriter | None = None
        if outputs.depth_updates is not None:
            self.depth_updates = JsonLinesWriter(outputs.depth_updates)
        self.starts = StartWatch()
        self.built: BuiltCrawl | None = None

    def plan(
        self,
        config: CrawlConfig,
        frontier: FrontierSpec | FrontierBackend | None,
        warc: str | None,
    ) -> CrawlPlan:
        return CrawlPlan(
            config=config,
            frontier=frontier,
            warc=warc,
            append=self.outputs.append,
            hold_warc=self.outputs.hold,  # exit 4 leaves the WARC as it was
            on_record=(self.records.write, self.on_record),
            # Without --depth-updates they are counted (the summary), not written.
            on_depth_update=(self.on_depth_update,) if self.depth_updates is not None else (),
            on_item=(self.on_item,) if self.items is not None else (),
            on_mirror_warning=say,
        )

    def on_record(self, record: CrawlRecord) -> None:
        if not self.starts(record) and self.outputs.holding:
            self.outputs.commit()  # a start URL was reached: now the old file goes
            for other in (self.items, self.depth_updates):
                if other is not None and other.output.failed:
                    self.check(other.output)
        if self.records.output.failed:
            self.check(self.records.output)

    def on_item(self, item: object) -> None:
        assert self.items is not None
        self.items.write(item)
        if self.items.output.failed:
            self.check(self.items.output)

    def on_depth_update(self, update: DepthUpdate) -> None:
        assert self.depth_updates is not None
        self.depth_updates.write(update)
        if self.depth_updates.output.failed:
            self.check(self.depth_updates.output)

    def check(self, output: OutputFile) -> None:
        assert self.built is not None
        if output.broken_pipe:
            self.built.crawler.abort()  # `-o - | head`: the reader has what it wanted
        elif output.error is not None:
            self.built.output_failed(output.error)


class SignalWatch:
    """SIGINT/SIGTERM: the first stops the crawl gracefully (and sets the
    exit code), the next cancels it."""

    def __init__(self, console: Console | None, grace: float) -> None:
        self.code = EXIT_OK
        #: Set once the crawl's run has returned (its outputs are closing).
        self.crawl_ended = False
        self._console = console
        self._grace = grace

    async def serve(self, signals: AsyncIterator[int], built: BuiltCrawl) -> None:
        """Serves for the whole crawl, its outputs' closing included: once
        the crawl has ended, a signal stops the mirror's link conversion."""
        async for signum in signals:
            ended = self.crawl_ended
            if self.code == EXIT_OK:
                self.code = SIGNAL_EXIT.get(signal.Signals(signum), 130)
                if self._console is not None and not ended:
                    self._console.print(
                        "[yellow]stopping: finishing in-flight pages "
                        f"(up to {self._grace:g}s); signal again to quit now[/]"
                    )
            if ended:
                if built.mirror is not None:
                    built.mirror.stop_converting()
            else:
                built.crawler.stop()


async def crawl_with_ui(
    config: CrawlConfig,
    outputs: Outputs,
    *,
    show: bool,
    quiet: bool,
    frontier: FrontierSpec | FrontierBackend | None = None,
    output: str | None = None,
    warc: str | None = None,
    resumable: bool = False,
    opened: Callable[[FrontierBackend | None], None] | None = None,
) -> Ending:
    """Run one crawl (built by ``engine.build``, which opens a ``frontier``
    spec) with signal handling and (optionally) the live display.
    ``resumable``: the frontier is a state file, which a stopped crawl
    resumes from; ``opened`` is told the frontier once it is open, before
    the crawl starts."""
    console = None if quiet and not show else stderr_console()  # rich: not for -q
    sinks = Sinks(outputs)
    signals = SignalWatch(None if quiet else console, config.pool.grace)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        async with trio.open_nursery() as watching:
            async with open_crawl(sinks.plan(config, frontier, warc)) as built:
                sinks.built = built
                if opened is not None:
                    opened(built.frontier)
                watching.start_soon(signals.serve, received, built)
                async with trio.open_nursery() as nursery:
                    outputs.begin()  # the crawl starts: only now are outputs emptied
                    if show and console is not None:
                        nursery.start_soon(show_progress, built.crawler, console)
                    cpu_at_start = time.process_time()
                    summary = await built.crawler.run()
                    signals.crawl_ended = True
                    nursery.cancel_scope.cancel()
                if show and console is not None and config.output.convert_links:
                    assert built.mirror is not None  # convert_links needs mirror=
                    watching.start_soon(show_conversion, built.mirror, console)
            watching.cancel_scope.cancel()
    failed = built.failure  # the archive's is final now: its writer has ended
    starts = sinks.starts
    unreachable = failed is None and signals.code == EXIT_OK
    unreachable = unreachable and starts.none_reachable and not summary.stopped
    if unreachable:
        outputs.drop_held()  # the earlier crawl's output stays as it was
    if not quiet:
        old = outputs.records.holding or outputs.records.kept_old  # the last crawl's file
        hint = None if failed is not None or old else output
        updates = outputs.depth_updates
        converting = None if built.mirror is None else built.mirror.statistics.convert_seconds
        print_summary(
            summary, hint, None if updates is None else updates.path, converting=converting
        )
        latency_hint = None
        if config.pool.workers is not None:  # a sized pool follows the latency itself
            latency_hint = latency_bound_hint(
                summary,
                workers=config.pool.workers,
                per_host=config.politeness.per_host_concurrency,
                cpu_seconds=time.process_time() - cpu_at_start,
                max_workers=workers_within_fd_limit(),
            )
        if latency_hint is not None:
            tell(latency_hint)
        if built.mirror is not None:
            from ..mirror.output import report_mirror  # imported for --mirror only

            tell(report_mirror(built.mirror))
    if failed is not None:
        return Ending(EXIT_OUTPUT, str(failed))
    if signals.code != EXIT_OK:
        return Ending(signals.code)
    timed_out = time_limit_note(
        summary, config.budgets.max_time, state=resumable, state_refused_by=refuses_state(config)
    )
    if timed_out is not None and not quiet:
        say(timed_out)
    if unreachable:
        return Ending(
            EXIT_UNREACHABLE, f"could not connect to any start URL ({starts.first_failure})"
        )
    return Ending()


def refuses_state(config: CrawlConfig) -> str | None:
    """The option of this crawl that ``--state`` cannot be combined with, if any
    (the state file keeps neither requisites nor handlers' Python functions)."""
    if config.follow.page_requisites:
        return "--page-requisites"
    if config.handler is not None:
        return "--handler"
    return None


def seeds_to_hold(
    args: argparse.Namespace, start_urls: Sequence[str], max_hosts: int | None = None
) -> list[str] | None:
    """Check the ``--seeds`` file (a warning for skipped lines, and for start
    URLs, canonical, and seeds on more hosts than ``max_hosts``); its URLs
    when the crawl keeps them in memory: a file of at most
    ``seeds.SEEDS_IN_MEMORY`` URLs, without ``--state`` or ``--max-queue``
    (they ask for the disk)."""
    seeds = getattr(args, "seeds", None)
    counting = max_hosts is not None
    if not seeds and not counting:
        return None  # nothing to read or count: .seeds stays unloaded (~1 ms)
    from .seeds import check_seeds, start_hosts_note

    hosts = {host_port(url) for url in start_urls} if counting else set()
    found = None
    if seeds:
        found = check_seeds(seeds, other_urls=bool(start_urls), count_hosts=counting)
        if found.warning:
            say(f"warning: {found.warning}")
        hosts |= found.hosts
    note = start_hosts_note(max_hosts, hosts)
    if note is not None:
        say(f"warning: {note}")
    if found is None:
        return None
    if getattr(args, "state", None) or getattr(args, "max_queue", None) is not None:
        return None
    return found.urls


def memory_frontier_of_seeds(config: CrawlConfig, seeds: Sequence[str]) -> FrontierBackend:
    """The memory frontier for a small seeds file. It could serve handlers and
    ``--page-requisites``, but ``--seeds`` refuses them whatever the file's
    size, so that a file growing past ``seeds.SEEDS_IN_MEMORY`` changes
    nothing but where the queue waits."""
    from ..frontiers.memory import MemoryFrontier

    refuse_as_the_disk_would(config, "--seeds")
    return MemoryFrontier.of(config, config.scope(seeds, config.url_filter(seeds)), seeds)


def refuse_as_the_disk_would(config: CrawlConfig, given: str) -> None:
    """A ``UsageError`` naming the flag ``given`` if the SQLite frontier
    cannot serve ``config`` (the library's check and words, before any file
    is opened)."""
    from ..frontiers.sqlite import SqliteFrontier  # for these options only

    try:
        refuse_unservable(config, SqliteFrontier, "state=", STATE_LIMITS)
    except ConfigError as exc:
        raise UsageError(in_flags(exc, {"state=": given})) from None


def prepare_disk_frontier(
    args: argparse.Namespace, config: CrawlConfig, output: str
) -> SqliteFrontier | None:
    """The SQLite frontier for --state, --max-queue or a seeds file too large
    to hold (else None: ``seeds_to_hold`` keeps a small one)."""
    state = getattr(args, "state", None)
    seeds = getattr(args, "seeds", None)
    max_queue = getattr(args, "max_queue", None)
    if not (state or seeds or max_queue is not None):
        return None
    given = "--state" if state else "--seeds" if seeds else "--max-queue"
    # Imported here: sqlite3 and the disk queue are for these options only.
    from ..frontiers.sqlite import DEFAULT_WINDOW, SqliteFrontier

    refuse_as_the_disk_would(config, given)  # before the file is opened: not created
    return SqliteFrontier.open(
        config,
        state,
        seeds=seeds,
        output=None if output == "-" else output,
        force=args.force,
        window=max_queue or DEFAULT_WINDOW,
    )


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
        if isinstance(leaf, ConfigError):
            return Ending(EXIT_USAGE, in_flags(leaf))
        if isinstance(leaf, (UsageError, StateUsageError)):
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
    in_memory: FrontierBackend | None = None  # a small --seeds file's
    crawled: CrawlConfig | None = None
    try:
        check_combinations(args)
        config = build_config(args, start_urls, watch if args.fail_fast else None)
        check_fetcher(config.fetch.backend)
        held_seeds = seeds_to_hold(args, config.start_url_strings, config.budgets.max_hosts)
        if args.output is None and sys.stdout.isatty():
            records = new_default_output()
            say(f"records go to {records.path} (-o FILE to choose, -o - for the terminal)")
        else:
            records = open_output(args.output or "-")
        outputs = Outputs(records)
        items_path = getattr(args, "items", None)
        if items_path:
            outputs.items = open_output(items_path)
            outputs.items_csv = items_path.lower().endswith(".csv")
        updates_path = getattr(args, "depth_updates", None)
        if updates_path:
            outputs.depth_updates = open_output(updates_path)
        if held_seeds is None:
            frontier = prepare_disk_frontier(args, config, args.output or "-")
        else:
            in_memory = memory_frontier_of_seeds(config, held_seeds)
        outputs.append = args.append or (frontier is not None and frontier.resumed)
        if outputs.append and updates_path and updates_path != "-":
            # A resume appends, and cuts a torn last line first, as the output's
            # (imported here: the state files' module is not for every crawl).
            from ..frontiers.resumed_output import repair_output

            repair_output(updates_path)
        if frontier is not None and frontier.durable and frontier.complete:
            if not args.quiet:  # nothing is opened for writing: the output stays as it is
                say(complete_note(args.state, frontier.done, args.output, frontier.recorded_in))
            frontier.keep_recorded_in()
            return EXIT_OK
        # With --state the output is the resume's list of what is done: never held.
        outputs.hold = not outputs.append and not getattr(args, "state", None)
        if frontier is not None and not args.quiet:
            for note in frontier.notes:
                say(note)
        show = not args.quiet and sys.stderr.isatty() and not outputs.to_terminal
        run = functools.partial(
            crawl_with_ui,
            show=show,
            quiet=args.quiet,
            frontier=frontier or in_memory,
            output=None if records.is_stdout else records.path,
            warc=check_warc_path(getattr(args, "warc", None)),
            resumable=frontier is not None and frontier.durable,
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
        problem = save_cookies(crawled.fetch.cookies, getattr(args, "save_cookies", None))
        if problem is not None and ending.message is None:
            ending = Ending(EXIT_OUTPUT, problem)
    if ending.message is not None:
        return fail(ending.message, ending.code)
    return ending.code
