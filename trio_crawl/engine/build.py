"""The one place a crawl is put together, for the library and the CLI alike.

A ``CrawlPlan`` says what to build (keyword-only, frozen): the config, the
frontier (a ``FrontierSpec`` to open, such as ``redis_frontier(...)`` or a
``state=`` file, or one the command line opened), the archive (``warc=``),
and every hook: records, items, responses, depth updates. ``open_crawl(plan)``
checks that the frontier serves the crawl (``frontiers.base.refuse_unservable``,
the one place a crawl is refused for its backend: a ``ConfigError`` before
anything is opened or fetched), opens what the plan names, wires every hook
once, and yields a ``BuiltCrawl``; leaving the block closes the archive
(after it has written what it was sent), the fetcher and the frontier it
opened, in that order. Whatever the frontier, the mirror and the archive
are wired the same way.

``run_crawl`` and ``open_crawler`` add the library's streams; the command
line adds only signals, progress and exit codes. A new hook is added here,
and both get it.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from ..core.config import CrawlConfig
from ..core.models import FetchResult
from ..errors import ConfigError, OutputError
from ..fetch.base import Fetcher
from ..frontiers.base import FrontierBackend, FrontierSpec, SharedPoliteness, refuse_unservable
from .crawler import Crawler
from .delivery import DepthUpdateCallback, ItemCallback, RecordCallback, ResponseCallback
from .fetchers import open_fetcher
from .statistics import is_rendering

if TYPE_CHECKING:
    from ..mirror.output import MirrorLink
    from ..outputs.archive import ArchiveLink


@dataclass(frozen=True, slots=True, kw_only=True)
class CrawlPlan:
    """What to build: one crawl, its frontier, its archive and its hooks.

    Example::

        plan = CrawlPlan(config=config, state="crawl.db", on_record=(records.append,))
        async with open_crawl(plan) as built:
            summary = await built.crawler.run()
        built.raise_if_failed()
    """

    config: CrawlConfig
    #: The caller's fetcher (kept open by the caller); None: one the crawl owns.
    fetcher: Fetcher | None = None
    #: The frontier: a spec opened (and closed) here, such as
    #: ``redis_frontier(...)``, or one the caller opened (and closes): the
    #: command line's ``--state`` file. None: in memory.
    frontier: FrontierSpec | FrontierBackend | None = None
    #: A SQLite file for the frontier, opened (created or resumed) and closed
    #: here: ``StateFile(state)``.
    state: str | None = None
    #: A WARC file archiving every exchange; a page's record waits for its
    #: exchange to be on disk. Appended to with ``append``, or when the
    #: frontier goes on from an earlier run (a resumed ``state``, a Redis
    #: crawl this worker joined).
    warc: str | None = None
    append: bool = False
    #: The WARC file keeps its old content until the first record (``--warc``
    #: of a crawl that may reach no start URL: exit 4 leaves it as it was).
    hold_warc: bool = False
    on_record: Sequence[RecordCallback] = ()
    on_item: Sequence[ItemCallback] = ()
    on_response: Sequence[ResponseCallback] = ()
    on_depth_update: Sequence[DepthUpdateCallback] = ()
    #: With ``config.mirror``: told each file that could not be saved (one
    #: line); None: the ``trio_crawl.mirror`` logger.
    on_mirror_warning: Callable[[str], None] | None = None
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        if self.state is not None and self.frontier is not None:
            raise ConfigError("state= and frontier= cannot be combined", "state=", "frontier=")

    def spec(self) -> FrontierSpec | None:
        """The frontier to open here, if any."""
        if self.state is not None:
            # Here, not at the top: a crawl in memory never loads the specs
            # (their dataclasses are ~1.5 ms of start-up; issue #36 item 11).
            from ..frontiers.specs import StateFile

            return StateFile(self.state)
        return self.frontier if isinstance(self.frontier, FrontierSpec) else None


class BuiltCrawl:
    """A crawl ready to ``run``, and the first failure of an output it
    writes (the archive's here; a caller's own with ``output_failed``)."""

    def __init__(self, plan: CrawlPlan) -> None:
        self.plan = plan
        #: The crawl's frontier once open (None: in memory, made by the engine).
        self.frontier: FrontierBackend | None = None
        self.archive: ArchiveLink | None = None
        self.mirror: MirrorLink | None = None
        self._crawler: Crawler | None = None
        self._failure: OutputError | None = None

    @property
    def crawler(self) -> Crawler:
        assert self._crawler is not None, "BuiltCrawl used outside open_crawl"
        return self._crawler

    @property
    def failure(self) -> OutputError | None:
        """The first output that failed, if any (the archive's failure is
        final only once ``open_crawl``'s block has ended)."""
        if self._failure is None and self.archive is not None and self.archive.error is not None:
            return OutputError(str(self.plan.warc), self.archive.error)
        if self._failure is None and self.mirror is not None and self.mirror.error is not None:
            return OutputError(str(self.plan.config.output.mirror), self.mirror.error)
        return self._failure

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise self.failure

    def output_failed(self, error: OutputError) -> None:
        """An output cannot be written: the first such error is kept, and the
        crawl stops gracefully (what is in flight may still be recorded)."""
        if self._failure is None:
            self._failure = error
            if not self.crawler.stopping:  # a second stop() would cancel at once
                self.crawler.stop()

    def _archive_failed(self, error: OSError) -> None:
        # Cancel now: a page whose exchange is not in the WARC gets no record
        # (with a state file it stays unfinished, for the resume).
        if self._failure is None:
            self._failure = OutputError(str(self.plan.warc), error)
        if self._crawler is not None:
            self._crawler.abort()

    def _to_archive(self, url: str, result: FetchResult) -> Awaitable[None] | None:
        # A recrawl's unchanged pages become revisits; visits keep their record.
        if self.archive is None:
            return None
        from .archive_visits import archive_exchange  # loaded once, with the archive

        return archive_exchange(self.archive, self.crawler.revisits, url, result)

    def _to_browser_archive(self, url: str, result: FetchResult, via: str | None) -> None:
        # Not awaited: no record waits for a subrequest (the page's own
        # exchange is what its record waits for).
        if self.archive is not None:
            self.archive.submit(url, result, via)

    def _mirror_failed(self, error: OSError) -> None:
        # As for the archive: a page whose body is not on disk gets no record.
        if self._failure is None:
            self._failure = OutputError(str(self.plan.config.output.mirror), error)
        if self._crawler is not None:
            self._crawler.abort()

    def _to_mirror(self, url: str, result: FetchResult) -> Awaitable[None] | None:
        return None if self.mirror is None else self.mirror.submit(url, result)


def _refuse_unservable(plan: CrawlPlan) -> None:
    """The plan's frontier serves its crawl, or ``ConfigError``."""
    spec = plan.spec()
    if spec is not None:
        refuse_unservable(plan.config, spec.backend(), spec.chosen_by, spec.limits)
    elif plan.frontier is not None:
        opened = plan.frontier
        refuse_unservable(plan.config, opened, f"frontier={type(opened).__name__}")
    elif plan.config.output.recrawl and plan.config.output.mirror is None:
        # In memory: nothing of the last crawl is kept (a mirror keeps its own).
        raise ConfigError(
            "recrawl=True needs state= (the file of the crawl to do again)",
            "recrawl=True",
            "state=",
        )


@contextlib.asynccontextmanager
async def open_crawl(plan: CrawlPlan) -> AsyncIterator[BuiltCrawl]:
    """Open what ``plan`` names and yield the ``BuiltCrawl`` (see the module
    docstring). Raises ``ConfigError`` for a crawl the frontier cannot serve,
    ``StateUsageError`` / ``StateLockedError`` for a state file, what the
    frontier raises when it is opened (``RedisUnavailable``...), and
    ``OutputError`` for an archive that cannot be opened, all before any
    fetch."""
    config = plan.config
    _refuse_unservable(plan)  # before anything is opened
    built = BuiltCrawl(plan)
    async with contextlib.AsyncExitStack() as stack:
        spec = plan.spec()
        if spec is not None:
            built.frontier = await stack.enter_async_context(spec.open(config))
        elif not isinstance(plan.frontier, FrontierSpec):
            built.frontier = plan.frontier
        # A resumed state file, or a Redis crawl joined: its outputs go on.
        resumed = getattr(built.frontier, "resumed", False) is True
        fetcher = plan.fetcher
        if fetcher is None:
            fetcher = await stack.enter_async_context(open_fetcher(config))
        on_response = list(plan.on_response)
        if plan.warc is not None:
            on_response.append(built._to_archive)
            if is_rendering(fetcher):  # the browser's own requests too
                fetcher.archive_to(built._to_browser_archive)
        if config.output.mirror is not None:
            on_response.append(built._to_mirror)
        built._crawler = Crawler(
            config,
            fetcher,
            frontier=built.frontier,
            on_record=plan.on_record,
            on_item=plan.on_item,
            on_response=on_response,
            on_depth_update=plan.on_depth_update,
            rng=plan.rng,
            auto_parse_process=plan.fetcher is None,
        )
        if plan.warc is not None:
            # Imported here: the archive's writer process is for warc= only.
            from ..outputs.archive import open_crawl_archive

            built.archive = await stack.enter_async_context(
                open_crawl_archive(
                    plan.warc,
                    config,
                    append=plan.append or resumed,
                    on_failure=built._archive_failed,
                    defer_start=plan.hold_warc,
                )
            )
        if config.output.mirror is not None:  # converts the links when the block ends
            from ..mirror.output import open_mirror  # imported for a mirror only

            built.mirror = await stack.enter_async_context(
                open_mirror(config, on_failure=built._mirror_failed, warn=plan.on_mirror_warning)
            )
            await _compare_mirror(built, stack)
        yield built


async def _compare_mirror(built: BuiltCrawl, stack: contextlib.AsyncExitStack) -> None:
    """Let the mirror see each URL's previous visit: the frontier's when it
    keeps visits (a ``--state`` file is the one truth), else the mirror's
    own file (``mirror/visits.py``: a second run is a recrawl), except for a
    frontier shared by workers (``--redis``), whose mirror keeps none."""
    assert built.mirror is not None and built.plan.config.output.mirror is not None
    revisits = built.crawler.revisits
    if not revisits.active and not isinstance(built.frontier, SharedPoliteness):
        import sqlite3  # only for a mirror: a plain crawl never imports it

        from ..mirror.visits import open_mirror_visits

        root = built.plan.config.output.mirror
        try:
            keeper = await trio.to_thread.run_sync(open_mirror_visits, root, built._mirror_failed)
        except (OSError, sqlite3.Error) as exc:
            raise OutputError(root, OSError(str(exc))) from None
        stack.callback(keeper.close)
        revisits.use(keeper)
    built.mirror.previous = revisits.previous_visit
    revisits.has_copy = built.mirror.has_copy
