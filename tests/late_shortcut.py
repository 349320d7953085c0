"""A site where a shorter path turns up only after the longer one is
crawled, without timing: ``/`` links ``/slow`` and the chain ``/c0`` ...
``/cN``; ``/slow`` links ``/c3`` but answers only once the server has been
asked for ``/cN`` (a ``threading.Event`` set by that route). So ``/c3`` ...
are recorded at their chain depth (4 ...) first, and corrected to 2 ... by
``/slow``'s link: the crawl's depth corrections, deterministically.

With a frontier that held deeper pages back until ``/slow`` is done (a depth
gate), ``/cN`` would never be asked for: ``/slow`` then answers after
``GIVE_UP`` seconds, the records are exact, and there is nothing to correct.
"""

from __future__ import annotations

import threading
from typing import Any

from trio_crawl.testing import Response, Site, SiteRequest, page

CHAIN = 30
GIVE_UP = 20.0


def late_shortcut_site(chain: int = CHAIN, tail: threading.Event | None = None) -> Site:
    """With ``tail``, the last chain page also links ``/tail``, which answers
    once ``tail`` is set: a crawl that has made its corrections and hangs."""
    reached_end = threading.Event()

    def slow(request: SiteRequest) -> Response:
        reached_end.wait(GIVE_UP)  # a server thread of its own: nothing else waits
        return page("/c3")

    def end(request: SiteRequest) -> Response:
        reached_end.set()
        return page() if tail is None else page("/tail")

    def hanging_tail(request: SiteRequest) -> Response:
        assert tail is not None
        tail.wait(GIVE_UP)
        return page()

    routes: dict[str, Any] = {"/": page("/slow", "/c0"), "/slow": slow, f"/c{chain}": end}
    if tail is not None:
        routes["/tail"] = hanging_tail
    for i in range(chain):
        routes[f"/c{i}"] = page(f"/c{i + 1}")
    return Site(routes)


def shortest_depths(base: str, chain: int = CHAIN) -> dict[str, tuple[int, str | None]]:
    """Each URL's (shortest depth, referrer one link closer) on that site."""
    out: dict[str, tuple[int, str | None]] = {
        f"{base}/": (0, None),
        f"{base}/slow": (1, f"{base}/"),
        f"{base}/c0": (1, f"{base}/"),
        f"{base}/c1": (2, f"{base}/c0"),
        f"{base}/c2": (3, f"{base}/c1"),
        f"{base}/c3": (2, f"{base}/slow"),
    }
    for i in range(4, chain + 1):
        out[f"{base}/c{i}"] = (i - 1, f"{base}/c{i - 1}")
    return out
