"""What a Redis crawl cannot do, said before anything is fetched.

The frontier declares it as every backend does (``FrontierBackend.cannot``
and ``chosen_by``, from here), so the crawl builder refuses such a crawl
with a ``ConfigError`` naming library arguments (``frontiers/base.py``,
``refuse_unservable``). ``open_redis_frontier`` checks it too, before it
connects, with one more thing only Redis needs: a handler must cross
processes by name. ``unsupported(config)`` is the same check as a message.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...core.config import CrawlConfig
from ...errors import ConfigError, RedisFrontierError
from ..base import Need, refuse_unservable
from .payloads import handler_name

#: What a Redis crawl cannot serve, with the rest of the refusal's sentence.
CANNOT: Mapping[Need, str] = {
    Need.PAGE_REQUISITES: " yet",
    Need.RANDOM_WAIT: " yet: the Redis server spaces each host's requests",
    Need.HOST_BUDGETS: " yet: the budgets are kept in one process's memory",
}
#: The library argument that chooses the Redis frontier.
CHOSEN_BY = "open_redis_frontier()"


def refuse_unsupported(config: CrawlConfig) -> None:
    """``ConfigError`` if ``config`` asks what a Redis crawl cannot serve."""
    refuse_unservable(config, CANNOT, CHOSEN_BY)
    if config.handler is not None:
        try:
            handler_name(config.handler)  # it must cross processes by name
        except RedisFrontierError as exc:
            raise ConfigError(f"handler= with {CHOSEN_BY}: {exc}", "handler=") from None


def unsupported(config: CrawlConfig) -> str | None:
    """Why ``config`` cannot run on a Redis frontier; None if it can."""
    try:
        refuse_unsupported(config)
    except ConfigError as exc:
        return str(exc)
    return None
