"""Joining a crawl: what a worker's ``hello`` sends, and what it says when the
crawl is another one, or when it joins again after being taken for dead.

``RedisFrontier.hello`` makes the call; this module builds its arguments and
its messages, so the frontier keeps to moving URLs. The arguments are the
crawl's settings that every worker must share (checked against the stored
ones by whoever joins) and its start URLs, admitted only by the worker that
creates the crawl.
"""

from __future__ import annotations

import json

from ...core.config import CrawlConfig
from ...core.scrape import Request
from ...errors import CrawlMismatch
from ..crawl_identity import SharedIdentity
from . import wire
from .payloads import encode_payload


def hello_args(
    config: CrawlConfig, identity: SharedIdentity, name: str, lease: float, *, again: bool
) -> list[object]:
    """The arguments of the ``hello`` function for worker ``name``: ``again``,
    a worker taken for dead, never creates the crawl."""
    starts: list[object] = []
    for start in config.start_urls:
        url = start.url if isinstance(start, Request) else start
        starts += wire.admission(url, 0, "", "", encode_payload(start))
    return wire.hello_args(
        name,
        lease,
        may_create=not again,
        identity_json=json.dumps(identity.settings(), sort_keys=True),
        max_pages=config.budgets.max_pages,
        rate=config.politeness.rate,
        per_host_concurrency=config.politeness.per_host_concurrency,
        read_robots=not config.politeness.ignore_robots,
        max_depth=config.budgets.max_depth,
        # Sitemap seeds come at depth 0 mid-crawl: with max_depth, a
        # finished page keeps its links for ever (core rule 7).
        settle=not (config.follow.sitemaps and config.budgets.max_depth is not None),
        starts=starts,
    )


def mismatch(crawl_id: str, differing: list[str]) -> CrawlMismatch:
    """The error for joining crawl ``crawl_id`` with other settings."""
    return CrawlMismatch(
        f"crawl {crawl_id!r} in Redis has other settings "
        f"({', '.join(differing)} differ): run it with the same arguments, "
        "or give no URL to join it as it is, or use a new --crawl-id"
    )


def rejoined(before: str, lease: float, owner: str) -> str:
    """The notice of worker ``before``, taken for dead, joining again as ``owner``."""
    return (
        f"worker {before} was silent longer than its lease ({lease:g} s; frozen or "
        "stalled): Redis handed the pages it held to other workers, which fetch again "
        "(and mark refetched) those it was fetching or had not reported done; it "
        f"starts none of the others; it joined again as {owner}"
    )
