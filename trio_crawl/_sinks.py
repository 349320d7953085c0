"""Where records go: JSON Lines files (or stdout), one flushed line per record."""

from __future__ import annotations

import json
from typing import TextIO

from ._models import CrawlRecord


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
