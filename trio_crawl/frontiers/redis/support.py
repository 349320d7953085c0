"""What a Redis crawl cannot do, said before anything is fetched.

``unsupported(config)`` is the one check: the crawl builder (library and
CLI alike) calls it when a crawl is opened with a Redis frontier, and
raises ``ConfigError`` with its message. It names the library's arguments
(``CrawlConfig`` fields); the CLI refuses the matching flags itself.
"""

from __future__ import annotations

from ...core.config import CrawlConfig
from ...errors import RedisFrontierError
from .payloads import handler_name


def unsupported(config: CrawlConfig) -> str | None:
    """Why ``config`` cannot run on a Redis frontier; None if it can."""
    if config.page_requisites:
        return (
            "page_requisites=True cannot be combined with a Redis frontier yet "
            "(open_redis_frontier): requisites are admitted beyond max_depth, "
            "which Redis does not track"
        )
    if config.handler is not None:
        try:
            handler_name(config.handler)  # it must cross processes by name
        except RedisFrontierError as exc:
            return f"handler: {exc}"
    return None
