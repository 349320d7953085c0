"""What makes a crawl the same crawl: the settings a stored crawl is resumed or joined with.

A crawl that outlives its process (a ``--state`` file, a ``--redis`` crawl)
stores its identity when it is created. A later run with other settings for
any of these would crawl something else under the old crawl's name (other
start URLs, another scope, other budgets), so it is refused, naming the
fields that differ:

1. ``CrawlIdentity``: the start URLs, the allowed domains, ``span_hosts``,
   the depth, page and per-host budgets and the URL filters. Both backends
   store these.
2. ``StateIdentity`` adds the ``--seeds`` file (its URLs are start URLs too).
3. ``SharedIdentity`` (Redis) adds what the server enforces for every worker
   alike: the rate, the per-host concurrency and whether robots.txt is read.

The stored form is JSON (``settings()``), compared field by field with what
was stored (``differing``), so a value read back from JSON compares equal
to the value it was made from: sequences are stored as sorted lists.
``filters`` is None without filters, and ``span_hosts`` None without it,
as a crawl stored before they existed says (a missing field reads as None,
as do the per-host budgets when unset). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.config import CrawlConfig

__all__ = ["CrawlIdentity", "SharedIdentity", "StateIdentity"]


@dataclass(frozen=True, slots=True)
class CrawlIdentity:
    """The settings every stored crawl is identified by (rule 1)."""

    start_urls: tuple[str, ...]
    allow_domains: tuple[str, ...]
    max_depth: int | None
    max_pages: int | None
    filters: Mapping[str, Any] | None
    span_hosts: bool | None
    max_pages_per_host: int | None
    max_hosts: int | None

    @staticmethod
    def fields_of(config: CrawlConfig) -> dict[str, Any]:
        """The rule 1 fields of ``config``, for a subclass's constructor."""
        return {
            "start_urls": tuple(sorted(config.start_url_strings)),
            "allow_domains": tuple(sorted(config.follow.allow_domains)),
            "max_depth": config.budgets.max_depth,
            "max_pages": config.budgets.max_pages,
            "filters": config.url_filter().identity(),
            "span_hosts": True if config.follow.span_hosts else None,
            "max_pages_per_host": config.budgets.max_pages_per_host,
            "max_hosts": config.budgets.max_hosts,
        }

    def settings(self) -> dict[str, Any]:
        """The identity as stored: a JSON object, sequences as lists."""
        return {
            field.name: _jsonable(getattr(self, field.name)) for field in dataclasses.fields(self)
        }

    def differing(self, stored: Mapping[str, Any]) -> list[str]:
        """The names of the fields whose ``stored`` value (read back from
        JSON) is not this identity's, in field order."""
        return [name for name, value in self.settings().items() if stored.get(name) != value]


@dataclass(frozen=True, slots=True)
class StateIdentity(CrawlIdentity):
    """A ``--state`` crawl's identity: also its ``--seeds`` file (rule 2),
    as an absolute path."""

    seeds: str | None

    @classmethod
    def of(cls, config: CrawlConfig, seeds: str | None) -> StateIdentity:
        return StateIdentity(
            **CrawlIdentity.fields_of(config), seeds=os.path.abspath(seeds) if seeds else None
        )


@dataclass(frozen=True, slots=True)
class SharedIdentity(CrawlIdentity):
    """A ``--redis`` crawl's identity: also the limits that Redis enforces
    for all workers together, so every worker must agree on them (rule 3)."""

    rate: float | None
    per_host_concurrency: int | None
    ignore_robots: bool

    @classmethod
    def of(cls, config: CrawlConfig) -> SharedIdentity:
        return SharedIdentity(
            **CrawlIdentity.fields_of(config),
            rate=config.politeness.rate,
            per_host_concurrency=config.politeness.per_host_concurrency,
            ignore_robots=config.politeness.ignore_robots,
        )


def _jsonable(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return {key: _jsonable(item) for key, item in value.items()}
    return value
