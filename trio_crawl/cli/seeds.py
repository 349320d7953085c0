"""``--seeds FILE``: the file is read once before the crawl starts, so that
an unreadable file or one without a URL is a one-line error (exit 2), and
a small file is kept in memory like start URLs given as arguments."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..core.url import canonicalize
from .common import UsageError

__all__ = ["SEEDS_IN_MEMORY", "SeedsFile", "check_seeds"]


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

    from ..frontiers.seeds import seed_lines

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
