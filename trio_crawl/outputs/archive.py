"""``--warc`` / ``warc=``: the trio side of the WARC writer process.

``WarcProcess`` (``outputs/warc_process.py``) moves the archive's CPU to a
child process and never blocks. This module adds the waiting. A response
callback submits the exchange and returns a ticket; the crawler awaits the
ticket just before the page's record goes out, so the JSON Lines output
never lists a page the WARC lacks (the inline writer's guarantee, kept).
By then the page has been parsed, and the child has usually acked the
exchange (``read_acks``, one task for the link's life, takes the acks in as
they come): the ticket then costs no checkpoint at all. Otherwise the page
parks on an ``Event`` until its number is acked.

Measured on the 20k-page benchmark: checking for acks with a non-blocking
read in every ticket, instead of leaving it to ``read_acks``, cost 14-17% of
pages/s instead of 3-5%; so tickets never read the pipe themselves. Pipe
writes that did not fit are drained by one parked page at a time (trio
allows one waiter per descriptor).
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from ..core.config import CrawlConfig
from ..core.models import FetchResult
from ..core.version import VERSION
from ..errors import OutputError
from .warc import RevisitOf, Stored, new_record_id, warc_date
from .warc_process import WarcProcess


class ArchiveTicket:
    """Awaitable: done when exchange ``number`` is in the file (or the writer
    failed). An object, not a coroutine, so one never awaited is no warning.
    ``stored``: the record id and WARC date the exchange is written under
    (known at once: the crawl makes the id), for a ``Visit`` to keep."""

    __slots__ = ("_date", "_link", "_number", "record_id")

    def __init__(self, link: ArchiveLink, number: int, record_id: str, date: float) -> None:
        self._link = link
        self._number = number
        self._date = date
        #: The response's (or revisit's) WARC-Record-ID.
        self.record_id = record_id

    @property
    def stored(self) -> Stored:
        """The record id and WARC-Date of the exchange's response or revisit."""
        return Stored(self.record_id, warc_date(self._date))

    def __await__(self) -> Generator[Any, None, None]:
        return self._link.wait_for(self._number).__await__()


class ArchiveLink:
    """Exchanges in, acks out: ``await link.submit(url, result)``."""

    def __init__(self, process: WarcProcess, on_failure: Callable[[OSError], None]) -> None:
        self._process = process
        self._on_failure = on_failure
        self._failure_told = False
        self._waiting: deque[tuple[int, trio.Event]] = deque()
        self._draining = False

    @property
    def error(self) -> OSError | None:
        """Why the writer stopped, once it has."""
        return self._process.error

    def submit(
        self,
        url: str,
        result: FetchResult,
        via: str | None = None,
        *,
        revisit_of: RevisitOf | None = None,
        request_headers: Mapping[str, str] | None = None,
    ) -> ArchiveTicket:
        """Send one exchange to the writer; await the ticket before the
        page's record is written. ``via``: the page whose browser asked for
        it (``--render``): its ``metadata`` record says ``via: PAGE``.
        ``revisit_of``: the page is unchanged since that earlier capture: a
        revisit record is written (``WarcWriter.write_capture``; a 304 needs
        ``server-not-modified``, else ``ValueError`` here). ``request_headers``:
        headers this request carried besides the crawl's own (a recrawl's
        ``If-None-Match``), for the request record."""
        date = time.time() - result.elapsed
        record_id = new_record_id()
        number = self._process.submit(
            url,
            result,
            date=date,
            via=via,
            record_id=record_id,
            revisit_of=revisit_of,
            request_headers=request_headers,
        )
        return ArchiveTicket(self, number, record_id, date)

    async def wait_for(self, number: int) -> None:
        """Return once exchange ``number`` is acked. If the writer fails
        first, never: ``on_failure`` has been told, and should cancel the
        crawl, so no record of a page missing from the WARC goes out."""
        process = self._process
        if process.acked >= number:
            return
        if process.error is not None:
            self._tell_failure()
            await trio.sleep_forever()
        done = trio.Event()
        self._waiting.append((number, done))
        if process.pending and not self._draining:
            self._draining = True
            try:
                while not process.flush():
                    await trio.lowlevel.wait_writable(process.send_fd)
            finally:
                self._draining = False
        await done.wait()
        if process.acked < number:  # woken because the writer failed
            self._tell_failure()
            await trio.sleep_forever()

    async def read_acks(self) -> None:
        """Run for the life of the link: wake each page whose exchange is in."""
        process = self._process
        alive = True
        while alive:
            await trio.lowlevel.wait_readable(process.ack_fd)
            alive = process.read_acks()
            self._wake(alive)

    def _tell_failure(self) -> None:
        error = self._process.error
        if error is not None and not self._failure_told:
            self._failure_told = True
            self._on_failure(error)

    def _wake(self, alive: bool) -> None:
        waiting = self._waiting
        acked = self._process.acked
        while waiting and (not alive or waiting[0][0] <= acked):
            waiting.popleft()[1].set()


@asynccontextmanager
async def open_archive_link(
    path: str,
    *,
    info: Mapping[str, object],
    request_headers: Mapping[str, str],
    append: bool,
    on_failure: Callable[[OSError], None],
    defer_start: bool = False,
) -> AsyncIterator[ArchiveLink]:
    """Start the writer process for ``path`` and link it to this crawl. On
    exit the child finishes what it was sent; then ``link.error`` says
    whether all went to disk. ``on_failure`` is called (once) when a page
    waits for a writer that has failed. A file that cannot be opened, or
    that another writer holds, is an ``OutputError``. ``defer_start``: see
    ``WarcWriter.open``."""
    start = functools.partial(
        WarcProcess.start,
        path,
        info=info,
        request_headers=request_headers,
        append=append,
        defer_start=defer_start,
    )
    try:  # in a thread: it may wait for the file's lock (``WarcWriter.open``)
        process = await trio.to_thread.run_sync(start)
    except OSError as exc:
        raise OutputError(path, exc) from None
    link = ArchiveLink(process, on_failure)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.read_acks)
            try:
                yield link
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(process.close)


def open_crawl_archive(
    path: str,
    config: CrawlConfig,
    *,
    append: bool,
    on_failure: Callable[[OSError], None],
    defer_start: bool = False,
) -> AbstractAsyncContextManager[ArchiveLink]:
    """The archive of one crawl (``--warc``, or ``warc=`` in the library):
    its warcinfo names the crawl; appended to when the crawl resumes.
    ``defer_start``: an existing file is emptied only by the first exchange."""
    info = {
        "software": f"trio-crawl/{VERSION}",
        "format": "WARC File Format 1.1",
        "start-urls": list(config.start_url_strings),
    }
    headers = {"User-Agent": config.fetch.user_agent, "Accept-Encoding": "gzip, deflate, br"}
    return open_archive_link(
        path,
        info=info,
        request_headers=headers,
        append=append,
        on_failure=on_failure,
        defer_start=defer_start,
    )
