"""What a crawl's settings name outside the process, checked when the
crawl's fetcher is opened: the CA bundle must exist, the netrc file must
read, and the browser to render with must be found.

``CrawlConfig`` only checks what can be judged from the values themselves
(pure, so a config is cheap to make and to test); the file system and the
PATH are looked at here, once, before anything is fetched, with the same
one-line ``ConfigError`` messages naming the library arguments
(``ca_bundle=``), which the command line words as its flags.
"""

from __future__ import annotations

import os

from ..core.browser import find_browser
from ..core.config import CrawlConfig
from ..core.identity import start_credentials
from ..errors import ConfigError

__all__ = ["check_resources", "resolve_browser"]


def resolve_browser(config: CrawlConfig) -> str:
    """The browser executable a ``render`` crawl runs: ``browser=``, else
    ``$TRIO_CRAWL_BROWSER``, else Chromium on PATH (``ConfigError`` if none)."""
    return find_browser(config.rendering.browser, os.environ)


def check_resources(config: CrawlConfig) -> None:
    """Refuse (``ConfigError``, one line) a CA bundle that does not exist, a
    netrc file that cannot be read, or a ``render`` crawl without a browser."""
    ca_bundle = config.fetch.ca_bundle
    if ca_bundle is not None and not os.path.exists(ca_bundle):
        raise ConfigError(f"ca_bundle=: no such file or directory: {ca_bundle}", "ca_bundle=")
    if config.rendering.render:
        resolve_browser(config)
    if config.fetch.netrc_file is not None and config.fetch.auth is None:
        try:
            start_credentials([], netrc_file=config.fetch.netrc_file)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
