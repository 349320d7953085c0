"""``--mirror DIR`` / ``mirror=``: the trio side of the offline copy.

A response callback (``MirrorLink.submit``) hands each successful (2xx)
body to the disk side (``mirror/files.py``) in a worker thread, one
write at a time; the crawler awaits the returned ``MirrorSave`` just before
the page's record goes out, so no record lists a page the mirror lacks.

Failures, as the other outputs have them:

- one file that cannot be saved (a symlink in the way, a name the file
  system refuses): one warning line, the crawl goes on;
- the mirror as a whole failing (disk full, read-only, I/O error):
  ``on_failure`` is told once (the CLI and the library cancel the crawl, as
  for a failing ``--warc``), and the page waits for that cancellation, so
  its record is never written: with ``--state`` it stays unfinished and a
  resume fetches it again. Nothing already saved is touched.

With ``accept``/``reject`` (``-A``/``-R``) a body whose saved name they
reject is not written (``MirrorLink.submit``): wget deletes such a page once
it has read its links; here the page is read for its links all the same
(the filters let HTML pages through for that) and never reaches the disk.
Its record is written as for any page fetched.

A mirror kept current (a second run over the same directory: a recrawl,
``mirror/visits.py``, or ``--state --recrawl``): ``previous`` gives each
URL's previous visit. A 304 is never saved (only 2xx bodies are), so an
unchanged page's file is not touched; a 200 whose body has the previous
digest (a server that ignores validators) is not rewritten either, if its
file is there. A page now ``gone`` (404/410, or a redirect, where there was
a 2xx page) keeps its file, unless ``delete_gone`` (``--mirror-delete-gone``)
removes it, before its record is written. Every saved file's mtime is the
response's Last-Modified when it has one, as wget sets it.

When the crawl ends (normally, or by a graceful stop), ``--convert-links``
rewrites the links of the whole directory (``mirror/convert.py``),
a batch of files per worker-thread call, so a cancel is seen between batches.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import trio

from ..core.config import CrawlConfig
from ..core.digest import sha1_digest
from ..core.filters import file_list_allows, suffix_list
from ..core.models import FetchResult
from ..errors import OutputError
from ..recrawl.visit import Visit, http_date
from .convert import ConvertRun, ConvertStatistics
from .files import MirrorFiles, MirrorSkip
from .layout import MirrorLayout

_LOG: Final = logging.getLogger("trio_crawl.mirror")
#: Files converted per worker-thread call at the end of the crawl.
CONVERT_BATCH: Final = 64


def _log_warning(message: str) -> None:
    _LOG.warning("%s", message)


@dataclass
class MirrorStatistics:
    saved: int = 0
    skipped: int = 0
    #: Fetched (for their links) but not kept: ``-A``/``-R`` reject their names.
    rejected: int = 0
    #: A 200 with the previous body (a server that ignores validators): not rewritten.
    same: int = 0
    #: Files of ``gone`` pages removed (``--mirror-delete-gone``).
    removed: int = 0
    converted: ConvertStatistics | None = None
    #: The conversion was stopped (``stop_converting``) before it was done.
    interrupted: bool = False
    #: Seconds the link conversion took (None: not run), counted in the
    #: CLI's elapsed time: the user waits for it as for the crawl.
    convert_seconds: float | None = None


class MirrorSave:
    """Awaitable: done when the body is on disk (or could not be saved), or,
    for a ``gone`` page (``previous`` given), its file removed. An object,
    not a coroutine, so one never awaited is no warning."""

    __slots__ = ("_link", "_previous", "_result", "_url")

    def __init__(
        self, link: MirrorLink, url: str, result: FetchResult, previous: Visit | None = None
    ) -> None:
        self._link = link
        self._url = url
        self._result = result
        self._previous = previous

    def __await__(self) -> Generator[Any, None, None]:
        if self._previous is not None:
            return self._link.remove(self._url, self._previous).__await__()
        return self._link.save(self._url, self._result).__await__()


def _gone(status: int) -> bool:
    """A status that makes a page that was there ``gone`` (``recrawl/visit.py``)."""
    return status in (404, 410) or (300 <= status < 400 and status != 304)


class MirrorLink:
    """Bodies in, files out: ``submit`` is an ``on_response`` callback."""

    def __init__(
        self,
        files: MirrorFiles,
        layout: MirrorLayout,
        on_failure: Callable[[OSError], None],
        warn: Callable[[str], None],
        keeps: Callable[[str], bool] | None = None,
        delete_gone: bool = False,
    ) -> None:
        self.files = files
        #: Each URL's previous visit, when the crawl keeps visits (a recrawl
        #: of the mirror); None: a first crawl, or visits kept nowhere.
        self.previous: Callable[[str], Visit | None] | None = None
        self._delete_gone = delete_gone
        #: Whether a saved file's name passes ``-A``/``-R`` (None: no lists).
        self.keeps = keeps
        self.layout = layout
        self.error: OSError | None = None
        self.statistics = MirrorStatistics()
        self._on_failure = on_failure
        self._warn = warn
        self._limiter = trio.CapacityLimiter(1)
        self._converting = trio.CancelScope()
        #: The conversion under way, read by a progress display (None: none).
        self.converting: ConvertRun | None = None

    def stop_converting(self) -> None:
        """Stop the link conversion at the next batch (Ctrl-C after the crawl
        ended): every file is replaced whole, so what is done stays done and
        running the same crawl again converts the rest. Not a checkpoint."""
        self._converting.cancel()

    def submit(self, url: str, result: FetchResult) -> MirrorSave | None:
        """Save a 2xx body (not a skipped one); await the result before the
        page's record is written. A body ``-A``/``-R`` reject is not saved.
        A ``gone`` page's file is removed with ``delete_gone``."""
        if not 200 <= result.status < 300 or result.body_skipped:
            if self._delete_gone and self.previous is not None and _gone(result.status):
                previous = self.previous(url)
                if previous is not None and previous.status and 200 <= previous.status < 300:
                    return MirrorSave(self, url, result, previous)
            return None
        if self.keeps is not None and not self.keeps(
            self.layout.judged_name(url, result.content_type)
        ):
            self.statistics.rejected += 1
            return None
        return MirrorSave(self, url, result)

    def has_copy(self, url: str, previous: Visit) -> bool:
        """Whether the file ``previous`` saved is still in the mirror (False:
        deleted by a user, or never saved, as by a ``--state`` crawl made
        without ``--mirror``): the recrawl then asks without validators, so
        the body comes and is saved. A page the mirror never keeps (not a
        2xx, a name ``-A``/``-R`` reject) has nothing to lose. One ``stat``
        or two, in the event loop (as the converter's lookups, cheap)."""
        if previous.status is None or not 200 <= previous.status < 300:
            return True
        if self.keeps is not None and not self.keeps(
            self.layout.judged_name(url, previous.content_type)
        ):
            return True
        return self.files.saved_as(self.layout.path(url, previous.content_type)) is not None

    def _unchanged(self, url: str, result: FetchResult) -> bool:
        """Whether the body is the one the previous visit saved (its digest)."""
        previous = None if self.previous is None else self.previous(url)
        if previous is None or previous.digest is None:
            return False
        return sha1_digest(result.body) == previous.digest

    def _save(self, parts: tuple[str, ...], body: bytes, mtime: float | None, same: bool) -> bool:
        """Blocking: write the file, unless ``same`` and it is there (False)."""
        if same and self.files.saved_as(parts) is not None:
            return False
        saved = self.files.save(parts, body)
        if mtime is not None:
            self.files.set_time(saved, mtime)
        return True

    async def save(self, url: str, result: FetchResult) -> None:
        if self.error is None:
            parts = self.layout.path(url, result.content_type)
            mtime = http_date(result.headers.get("last-modified"))
            same = self._unchanged(url, result)
            try:
                written = await trio.to_thread.run_sync(
                    self._save, parts, result.body, mtime, same, limiter=self._limiter
                )
            except MirrorSkip as exc:
                self.statistics.skipped += 1
                self._warn(f"--mirror: cannot save {url}: {exc}")
                return
            except OSError as exc:
                if self.error is None:
                    self.error = exc
                    self._on_failure(exc)
            else:
                if written:
                    self.statistics.saved += 1
                else:
                    self.statistics.same += 1
                return
        await trio.sleep_forever()  # the crawl is being cancelled: no record

    async def remove(self, url: str, previous: Visit) -> None:
        """Delete the file a ``gone`` page had (``--mirror-delete-gone``)."""
        if self.error is None:
            parts = self.layout.path(url, previous.content_type)
            try:
                removed = await trio.to_thread.run_sync(
                    self.files.remove, parts, limiter=self._limiter
                )
            except MirrorSkip as exc:
                self._warn(f"--mirror-delete-gone: cannot remove {url}: {exc}")
                return
            except OSError as exc:
                if self.error is None:
                    self.error = exc
                    self._on_failure(exc)
            else:
                self.statistics.removed += int(removed)
                return
        await trio.sleep_forever()  # the crawl is being cancelled: no record

    async def convert_links(self, schemes: dict[str, str]) -> ConvertStatistics:
        """Convert the links of every saved page and stylesheet."""
        run = ConvertRun(self.files, self.layout, schemes, self._warn)
        step = functools.partial(run.step, CONVERT_BATCH)
        started = trio.current_time()
        self.converting = run
        try:
            with self._converting:
                while await trio.to_thread.run_sync(step, limiter=self._limiter):
                    pass
        finally:
            self.converting = None
            self.statistics.convert_seconds = trio.current_time() - started
        self.statistics.interrupted = self._converting.cancelled_caught
        return run.statistics


def _host_schemes(config: CrawlConfig, layout: MirrorLayout) -> dict[str, str]:
    """Host directory -> the scheme its start URLs use (https wins)."""
    schemes: dict[str, str] = {}
    for url in config.start_url_strings:
        host = layout.path(url)[0]
        if schemes.get(host) != "https":
            schemes[host] = url.split(":", 1)[0]
    return schemes


@asynccontextmanager
async def open_mirror(
    config: CrawlConfig,
    *,
    on_failure: Callable[[OSError], None],
    warn: Callable[[str], None] | None = None,
) -> AsyncIterator[MirrorLink]:
    """The mirror directory ``config.mirror`` for one crawl: created if
    needed (an ``OutputError`` if it cannot be), and, on a normal exit with
    ``config.convert_links``, its links converted. If the mirror failed
    (``link.error``, which the caller reports), nothing is converted. ``warn``
    is told each file that could not be saved (default: the
    ``trio_crawl.mirror`` logger)."""
    assert config.output.mirror is not None
    root = config.output.mirror
    try:
        files = await trio.to_thread.run_sync(MirrorFiles, root)
        folds = await trio.to_thread.run_sync(files.case_insensitive)
    except OSError as exc:
        raise OutputError(root, exc) from None
    layout = MirrorLayout(adjust_extension=config.output.adjust_extension, case_insensitive=folds)
    accept, reject = suffix_list(config.follow.accept), suffix_list(config.follow.reject)
    keeps = (
        functools.partial(file_list_allows, accept=accept, reject=reject)
        if accept or reject
        else None
    )
    link = MirrorLink(
        files, layout, on_failure, warn or _log_warning, keeps, config.output.mirror_delete_gone
    )
    try:
        yield link
        if config.output.convert_links and link.error is None:
            try:
                link.statistics.converted = await link.convert_links(_host_schemes(config, layout))
            except OSError as exc:
                link.error = exc
                raise OutputError(root, exc) from None
    finally:
        files.close()


def report_mirror(link: MirrorLink) -> str:
    """One line for the CLI's summary: what the mirror holds now."""
    stats = link.statistics
    line = f"mirror: {stats.saved} files saved under {link.files.root}"
    if stats.skipped:
        line += f", {stats.skipped} not saved (see the warnings)"
    if stats.same:
        line += f", {stats.same} unchanged bodies not rewritten"
    if stats.removed:
        line += f", {stats.removed} files of gone pages removed"
    if stats.rejected:
        line += f", {stats.rejected} read for links only (-A/-R reject their names)"
    if stats.converted is not None:
        line += (
            f"; links converted in {stats.converted.converted} of {stats.converted.files} files"
        )
        if stats.convert_seconds is not None:
            line += f" ({stats.convert_seconds:,.1f} s)"
        if stats.interrupted:
            line += " (interrupted: run the same command again to convert the rest)"
    return line
