"""What a Redis crawl cannot do, said before anything is fetched.

What the backend serves is what ``RedisFrontier`` has (``frontiers/base.py``,
"Capabilities"); the words are ``base.REDIS_LIMITS``. The crawl builder
refuses a crawl it cannot serve (``refuse_unservable``) before the frontier
is opened; ``open_redis_frontier`` checks it too, before it connects, for
those who call it directly, with one more thing only Redis needs: a
handler must cross processes by name (the package's ``unsupported(config)``
is the same check as a message).
"""

from __future__ import annotations

from ...core.config import CrawlConfig
from ...errors import ConfigError, RedisFrontierError
from ..base import REDIS_LIMITS, refuse_unservable
from .payloads import handler_name

#: The library argument that chooses the Redis frontier when it is opened directly.
CHOSEN_BY = "open_redis_frontier()"


def refuse_unsupported(config: CrawlConfig, backend: type, chosen_by: str = CHOSEN_BY) -> None:
    """``ConfigError`` if ``config`` asks what a Redis crawl (``backend``,
    the ``RedisFrontier`` class) cannot serve."""
    refuse_unservable(config, backend, chosen_by, REDIS_LIMITS)
    if config.handler is not None:
        try:
            handler_name(config.handler)  # it must cross processes by name
        except RedisFrontierError as exc:
            message = f"handler= with {chosen_by}: {exc}"
            raise ConfigError(message, "handler=", chosen_by) from None
