"""The rendering fetcher (``--render``): headless Chromium over the DevTools
protocol, driven by trio through a pipe.

One module per job:

- ``cdp``: the protocol client (NUL-framed JSON over the pipe, flat sessions);
- ``browser``: the browser process, its fresh profile, its end;
- ``policy``: what a page may request (pure);
- ``life``: one page's state in a tab (pure);
- ``session``: one browser's request router and tab creation;
- ``quiet``: the watcher that lets a page with nothing left to do settle early;
- ``jar``: the cookies a page's scripts set, into the crawl's jar (pure);
- ``tab``: navigate, settle, scroll, read the DOM;
- ``fetcher``: ``ChromiumFetcher``, the tab pool and browser restarts.
"""

from __future__ import annotations

from .fetcher import ChromiumFetcher, ChromiumStatistics, RenderSettings, open_chromium_fetcher
from .policy import RequestPolicy, Verdict

__all__ = [
    "ChromiumFetcher",
    "ChromiumStatistics",
    "RenderSettings",
    "RequestPolicy",
    "Verdict",
    "open_chromium_fetcher",
]
