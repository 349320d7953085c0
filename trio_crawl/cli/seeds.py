"""``--seeds FILE``: the file is read once before the crawl starts, so that
an unreadable file or one without a URL is a one-line error (exit 2), and
a small file is kept in memory like start URLs given as arguments."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..core.url import canonicalize, host_port
from .common import UsageError

__all__ = ["HOSTS_COUNTED", "SEEDS_IN_MEMORY", "SeedsFile", "check_seeds", "start_hosts_note"]


#: A seeds file of at most this many URLs is crawled in memory, as start URLs
#: given as arguments are; a larger one (read lazily) in a temporary SQLite
#: file, which bounds the queue's memory (``--max-queue``'s default window).
SEEDS_IN_MEMORY = 10_000
#: The most distinct hosts counted for ``--max-hosts``'s note (a set of
#: names: a few MB at most, whatever the file's size).
HOSTS_COUNTED = 100_000


@dataclasses.dataclass(frozen=True, slots=True)
class SeedsFile:
    """What ``check_seeds`` found: a warning about skipped lines (or None),
    and the URLs themselves when there are at most ``keep`` of them."""

    warning: str | None
    urls: list[str] | None
    #: The distinct host:ports of its URLs (up to ``HOSTS_COUNTED``), when asked.
    hosts: frozenset[str] = frozenset()


def check_seeds(
    path: str, *, other_urls: bool, keep: int = SEEDS_IN_MEMORY, count_hosts: bool = False
) -> SeedsFile:
    """Read the seeds file once: it must be readable and hold an http(s) URL
    (unless start URLs are given too). Keeps at most ``keep`` URLs in memory:
    a larger file is only counted (``urls`` is None); with ``count_hosts``,
    its distinct hosts too (``--max-hosts``)."""
    bad = 0
    first: list[tuple[int, str]] = []

    def on_bad_line(number: int, text: str) -> None:
        nonlocal bad
        bad += 1
        if not first:
            first.append((number, text))

    from ..frontiers.seeds import seed_lines

    kept: list[str] | None = []
    hosts: set[str] = set()
    good = 0
    try:
        for url in seed_lines(Path(path), canonicalize, on_bad_line=on_bad_line):
            good += 1
            if count_hosts and len(hosts) < HOSTS_COUNTED:
                hosts.add(host_port(url))
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
        return SeedsFile(None, kept, frozenset(hosts))
    number, text = first[0]
    lines = "1 line" if bad == 1 else f"{bad:,} lines"
    return SeedsFile(
        f"skipped {lines} of {path} that are not http(s) URLs "
        f"(first: line {number}: {text[:200]!r})",
        kept,
        frozenset(hosts),
    )


def start_hosts_note(max_hosts: int | None, hosts: set[str] | frozenset[str]) -> str | None:
    """The warning for start URLs (arguments and seeds) on more hosts than
    ``--max-hosts``: they are all crawled all the same (a start URL always
    is: docs/manual/scope.md), and they take the whole budget, so no link
    to another host is followed. None when they fit."""
    if max_hosts is None or len(hosts) <= max_hosts:
        return None
    many = f"more than {len(hosts) - 1:,}" if len(hosts) >= HOSTS_COUNTED else f"{len(hosts):,}"
    return (
        f"--max-hosts {max_hosts:,}, but the start URLs are on {many} hosts: all of them are "
        "crawled (start URLs always are), and no link to any other host is followed"
    )
