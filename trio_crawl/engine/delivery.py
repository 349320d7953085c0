"""Where records and items go: the statistics, the caller's callbacks (a
file sink writes and flushes there), and the streams of ``open_crawler``.

Callbacks run synchronously in the crawler task that made the record, so a
sink that writes in its callback loses nothing if the process is killed a
moment later. Stream sends await room (backpressure): the crawler still
holds its token then, so the crawl cannot end under a slow reader.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import trio

from ..core.frontier import DepthCorrection, Entry
from ..core.models import CrawlRecord, DepthUpdate, FetchResult
from ..core.stats import CrawlStats

RecordCallback = Callable[[CrawlRecord], None]
#: Called for each correction of an earlier record's depth and referrer.
DepthUpdateCallback = Callable[[DepthUpdate], None]
ItemCallback = Callable[[object], None]
#: Called with each response as it arrives (URL, result), before the record
#: that it leads to is written: an archive (``--warc``) keeps every exchange.
#: A callback may return an awaitable: the crawler awaits it just before the
#: page's record goes out (or its retry is scheduled), so the page is parsed
#: meanwhile. The WARC writer process returns one that ends when the exchange
#: is on disk. Return an awaitable object, not a coroutine: an exception
#: between the two (a cancelled crawl) would leave a coroutine never awaited.
ResponseCallback = Callable[[str, FetchResult], Awaitable[None] | None]


class Delivery:
    """Hands each record and item to everyone who wants it."""

    def __init__(
        self,
        stats: CrawlStats,
        *,
        on_record: Iterable[RecordCallback] = (),
        on_item: Iterable[ItemCallback] = (),
        on_depth_update: Iterable[DepthUpdateCallback] = (),
        record_channel: trio.MemorySendChannel[CrawlRecord] | None = None,
        item_channel: trio.MemorySendChannel[object] | None = None,
    ) -> None:
        self.stats = stats
        self._on_record = list(on_record)
        self._on_item = list(on_item)
        self._on_depth_update = list(on_depth_update)
        self.record_channel = record_channel
        self.item_channel = item_channel

    def write_record(self, record: CrawlRecord) -> None:
        """Count the record and call the callbacks. Not a checkpoint."""
        self.stats.add(record)
        for callback in self._on_record:
            callback(record)

    def write_correction(self, correction: DepthCorrection, t: float) -> None:
        """A frontier's correction of a written record, as a ``DepthUpdate``
        made at ``t`` seconds into the run. Not a checkpoint."""
        update = DepthUpdate(
            correction.url, correction.depth, correction.referrer, correction.previous_depth, t=t
        )
        self.write_depth_update(update)

    def write_depth_update(self, update: DepthUpdate) -> None:
        """Call the depth-update callbacks. Not a checkpoint."""
        self.stats.depth_updates += 1
        for callback in self._on_depth_update:
            callback(update)

    async def send_record(self, record: CrawlRecord) -> None:
        """Send the record to the stream, if anyone reads it."""
        if self.record_channel is not None:
            try:
                await self.record_channel.send(record)
            except trio.BrokenResourceError:
                # The reader left (open_crawler's block ended): it is cancelling
                # us; records keep going to the callbacks until it does.
                self.record_channel = None

    async def item(self, item: object) -> None:
        """Count a handler's item, call the callbacks, send it to the stream."""
        self.stats.items += 1
        for callback in self._on_item:
            callback(item)
        if self.item_channel is not None:
            try:
                await self.item_channel.send(item)
            except trio.BrokenResourceError:
                self.item_channel = None


class Responses:
    """The ``on_response`` callbacks, and what they returned for entries
    still held (e.g. the archive's "on disk"): awaited just before the
    entry's record (or retry), so the page is parsed meanwhile."""

    def __init__(self, callbacks: Iterable[ResponseCallback]) -> None:
        self._callbacks = list(callbacks)
        self._unsettled: dict[Entry, list[Awaitable[None]]] = {}

    def add(self, callback: ResponseCallback) -> None:
        """One more callback (the crawl's own: ``engine/revisits.py``)."""
        self._callbacks.append(callback)

    def heard(self, entry: Entry, result: FetchResult) -> None:
        """Hand ``entry``'s response to the callbacks. Not a checkpoint."""
        for callback in self._callbacks:
            pending = callback(entry.url, result)
            if pending is not None:
                self._unsettled.setdefault(entry, []).append(pending)

    async def settle(self, entry: Entry) -> None:
        """Await what the callbacks returned for ``entry``, if anything."""
        unsettled = self._unsettled.pop(entry, None) if self._unsettled else None
        if unsettled:
            for pending in unsettled:
                await pending
