"""Where records go: JSON Lines files (or stdout), one flushed line per record."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, TextIO

from ..core.models import CrawlRecord


class JsonLinesWriter:
    """Writes each record as one JSON line and flushes it at once, so a crawl
    killed at any moment leaves only complete lines behind (at most the line
    being written is lost, never one already returned from ``write``)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.written = 0
        self.broken = False

    def write(self, record: CrawlRecord) -> None:
        if self.broken:
            return
        line = json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except BrokenPipeError:
            # `trio-crawl URL -o - | head`: the reader is gone; keep crawling
            # quietly is pointless, the CLI stops the crawl when it sees this.
            self.broken = True
            return
        self.written += 1


def item_as_dict(item: object) -> dict[str, Any]:
    """A handler's item as a flat-ish dict: mappings and dataclasses as they
    are, anything else as ``{"value": item}``."""
    if isinstance(item, Mapping):
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    return {"value": item}


class ItemJsonLinesWriter:
    """Items as JSON Lines, flushed per item; non-JSON values become strings."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.written = 0

    def write(self, item: object) -> None:
        line = json.dumps(item_as_dict(item), ensure_ascii=False, default=str)
        self._stream.write(line + "\n")
        self._stream.flush()
        self.written += 1


class ItemCsvWriter:
    """Items as CSV. The columns are the keys of the first item; keys that
    later items add are dropped (CSV cannot grow columns), missing ones are
    left empty. Use JSON Lines for items of varying shape."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._writer: csv.DictWriter[str] | None = None
        self.written = 0

    def write(self, item: object) -> None:
        row = item_as_dict(item)
        if self._writer is None:
            self._writer = csv.DictWriter(
                self._stream, fieldnames=list(row), extrasaction="ignore"
            )
            self._writer.writeheader()
        self._writer.writerow(row)
        self._stream.flush()
        self.written += 1
