"""Which browser ``--render`` runs: named, from the environment, or on PATH.

Pure (the environment and the PATH lookup are passed in), so the choice and
its one-line errors are tested directly; the crawl calls it when it opens
its fetcher (``engine/resources.py``), so a crawl that cannot render fails
before anything is fetched, while making a config reads no PATH.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping

from ..errors import ConfigError

__all__ = ["BROWSER_ENV", "DEFAULT_BROWSERS", "find_browser"]

#: The environment variable naming the browser when ``--browser`` does not.
BROWSER_ENV = "TRIO_CRAWL_BROWSER"
#: Looked up on PATH, in this order, when neither names one.
DEFAULT_BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser(
    explicit: str | None,
    environ: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
) -> str:
    """The browser executable to run: ``explicit`` (``browser=``), else
    ``$TRIO_CRAWL_BROWSER``, else the first of ``DEFAULT_BROWSERS`` on PATH.

    Raises ``ConfigError`` (one line) when the one named is not an
    executable, or none is named and none is found.
    """
    for source, name in (("browser=", explicit), (BROWSER_ENV, environ.get(BROWSER_ENV))):
        if name:
            found = which(name)
            if found is None:
                raise ConfigError(f"{source}: not an executable browser: {name}", source)
            return found
    for name in DEFAULT_BROWSERS:
        found = which(name)
        if found is not None:
            return found
    raise ConfigError(
        "render=True needs Chromium: install it (Debian: apt-get install chromium) "
        f"or name it with browser= or {BROWSER_ENV}",
        "render=True",
        "browser=",
    )
