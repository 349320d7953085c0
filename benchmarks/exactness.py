"""Did a crawler fetch exactly the expected URLs, each once? Read from its output.

A fast run that misses or repeats a page proves nothing, so every comparison of
crawlers on a generated site (run.py, broad.py, discovery.py, two_process.py) checks
each run against the exact URL set the site generator wrote (generate_site.py): the
tool's output says which URLs got an HTTP answer (``read_trio_crawl``,
``read_scrapy``), and ``verify`` maps them to path plus query and counts what is
missing, repeated or unexpected (``verify_hosts``: the same on many hosts, by
absolute URL). Pure: files in, verdicts out.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlsplit


@dataclass(frozen=True, slots=True)
class Fetches:
    """What a tool's output says it did: URLs with an HTTP answer, and error records."""

    fetched: list[str]  # as written by the tool, one per HTTP answer
    errors: list[str]  # one short description per error record


@dataclass(frozen=True, slots=True)
class Verdict:
    """The exact-once check of one run against the expected URL set."""

    fetched: int
    distinct: int
    errors: int
    missing: list[str]
    duplicates: list[str]
    unexpected: list[str]
    error_samples: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not (self.missing or self.duplicates or self.unexpected or self.errors)


def verify(fetches: Fetches, expected: Iterable[str], base_url: str) -> Verdict:
    """Compare fetched URLs (mapped to path plus query) with ``expected``.

    A fetched URL on another scheme, host or port is unexpected whatever its path.
    """
    base = urlsplit(base_url)
    targets: list[str] = []
    for url in fetches.fetched:
        parts = urlsplit(urldefrag(url)[0])
        if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
            targets.append(f"<other host> {url}")
            continue
        targets.append((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    counts = Counter(targets)
    expected_set = set(expected)
    return Verdict(
        fetched=len(targets),
        distinct=len(counts),
        errors=len(fetches.errors),
        missing=sorted(expected_set - counts.keys()),
        duplicates=sorted(u for u, n in counts.items() if n > 1),
        unexpected=sorted(counts.keys() - expected_set),
        error_samples=fetches.errors[:5],
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    with path.open() as fh:
        for line in fh:
            if line.strip():
                records.append(json.loads(line))
    return records


def read_trio_crawl(path: Path) -> Fetches:
    """trio-crawl's records: a record with a ``status`` is a fetch; ``error`` or a status
    of 400 or more is an error. robots.txt is never a record."""
    fetched, errors = [], []
    for record in _read_jsonl(path):
        if record.get("status") is not None:
            fetched.append(record["url"])
        error = record.get("error")
        status = record.get("status")
        if error or (status is not None and status >= 400):
            kind = error.get("kind") if isinstance(error, dict) else error
            errors.append(f"{record['url']}: {kind or status}")
    return Fetches(fetched, errors)


def read_scrapy(path: Path) -> Fetches:
    """scrapy_crawl.py's items: same rules (an item with a status is a fetch)."""
    fetched, errors = [], []
    for item in _read_jsonl(path):
        status = item.get("status")
        if status is not None:
            fetched.append(item["url"])
        if item.get("error") or (status is not None and status >= 400):
            errors.append(f"{item['url']}: {item.get('error') or status}")
    return Fetches(fetched, errors)


def normalize(url: str) -> str:
    """An absolute URL as the broad checks count it: no fragment, a path of at least ``/``."""
    parts = urlsplit(urldefrag(url)[0])
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{parts.path or '/'}{query}"


def verify_hosts(fetches: Fetches, expected: set[str]) -> Verdict:
    """``verify`` with absolute URLs, on any host (the broad crawls' many hosts)."""
    counts = Counter(normalize(u) for u in fetches.fetched)
    return Verdict(
        fetched=sum(counts.values()),
        distinct=len(counts),
        errors=len(fetches.errors),
        missing=sorted(expected - counts.keys()),
        duplicates=sorted(u for u, n in counts.items() if n > 1),
        unexpected=sorted(counts.keys() - expected),
        error_samples=fetches.errors[:5],
    )
