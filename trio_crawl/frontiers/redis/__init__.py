"""The Redis frontier (``--redis``): one crawl shared by many processes.

The package face. Its modules, one job each:

``frontier.py``     ``RedisFrontier`` (the backend face)
``opening.py``      ``open_redis_frontier``: connect, create or join, register, leave
``registration.py`` what ``hello`` sends to join, and what a (re)joining worker says
``calls.py``        every call to Redis, bounded, its errors translated once
``outbox.py``       what this worker holds (leases) and has yet to send (the batch)
``page_links.py``   what a finished page's links become: admissions, or known digests
``sent_links.py``   the links Redis accepted from this worker, at what depth (pure)
``liveness.py``     the heartbeat and the wake-up listener
``robots.py``       robots.txt fetched once per crawl and shared
``payloads.py``     a Request's handler and meta as they cross processes
``client.py``       connecting: the client, its URL (masked, checked), server checks
``admin.py``        what the CLI does from outside a crawl: status, check, delete
``support.py``      settings a Redis crawl cannot serve, refused at the start
``wire.py``         the positional format of the functions' arguments and replies
``lua.py``          loads ``functions.lua``, the server side (Redis Functions)
``budgets.py``      per-host budgets counted in Redis (``budgets.lua``, spliced in)

Errors (``trio_crawl.errors``, re-exported here): ``RedisFrontierError``,
``RedisUnavailable``, ``RedisLost``, ``RedisRefused``, ``CrawlGone``,
``CrawlMismatch``.
"""

from __future__ import annotations

from ...core.config import CrawlConfig
from ...errors import (
    ConfigError,
    CrawlGone,
    CrawlMismatch,
    RedisFrontierError,
    RedisLost,
    RedisRefused,
    RedisUnavailable,
)
from ..base import DEFAULT_LEASE
from .admin import check_crawl, crawl_status, delete_crawl, status_lines
from .client import (
    PASSWORD_ENV,
    check_server,
    default_worker_name,
    keys_prefix,
    redact_url,
    url_problem,
    url_without_password,
)
from .frontier import RedisFrontier
from .opening import open_redis_frontier
from .support import refuse_unsupported
from .wire import url_digest


def unsupported(config: CrawlConfig) -> str | None:
    """Why ``config`` cannot run on a Redis frontier (``support.py``); None if
    it can. Here: ``support`` cannot import the frontier it describes."""
    try:
        refuse_unsupported(config, RedisFrontier)
    except ConfigError as exc:
        return str(exc)
    return None


__all__ = [
    "DEFAULT_LEASE",
    "PASSWORD_ENV",
    "CrawlGone",
    "CrawlMismatch",
    "RedisFrontier",
    "RedisFrontierError",
    "RedisLost",
    "RedisRefused",
    "RedisUnavailable",
    "check_crawl",
    "check_server",
    "crawl_status",
    "default_worker_name",
    "delete_crawl",
    "keys_prefix",
    "open_redis_frontier",
    "redact_url",
    "status_lines",
    "unsupported",
    "url_digest",
    "url_problem",
    "url_without_password",
]
