"""The pages a recrawl no longer reaches, and where they used to be linked from. Pure.

At the end of a recrawl, every URL of the previous crawl that no link led to
this time gets one ``change: "unlinked"`` record instead of vanishing from
the output (issue #33, item 3). A bare list of URLs would leave the user to
guess why; the previous crawl knew which page linked to each, so each
``Unlinked`` says its previous depth and the page that linked to it at the
shortest distance, the one a first crawl records as its referrer. That page
is where to look: it changed and dropped the link, or is gone itself.

Two passes over ``previous`` (a ``Mapping``: the caller's store may be a
database), memory for the unlinked URLs only: the first pass finds them, the
second looks for their referrers among the previous pages' links. A previous
redirect's target counts as one of its links (put it in ``links``).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple


class PreviousPage(NamedTuple):
    """What the previous crawl kept of one URL, for this purpose."""

    #: the page's followed links (canonical URLs), and its redirect target if any
    links: Sequence[str]
    #: its depth in the previous crawl; None if not kept
    depth: int | None


@dataclass(frozen=True, slots=True)
class Unlinked:
    url: str
    #: its depth in the previous crawl
    depth: int | None
    #: the previous page at the shortest depth that linked to it (ties: the
    #: first URL in sorted order); None when none did (a start URL, say)
    referrer: str | None


def _order(depth: int | None, url: str) -> tuple[bool, int, str]:
    return (depth is None, depth or 0, url)


def find_unlinked(previous: Mapping[str, PreviousPage], reached: Container[str]) -> list[Unlinked]:
    """The URLs of ``previous`` not in ``reached``, shallowest first (then by URL)."""
    lost = {url for url in previous if url not in reached}
    best: dict[str, tuple[bool, int, str]] = {}  # lost URL -> its best referrer's order key
    for url, page in previous.items():
        key = _order(page.depth, url)
        for link in page.links:
            if link in lost and link != url and (link not in best or key < best[link]):
                best[link] = key
    found = [
        Unlinked(url, previous[url].depth, best[url][2] if url in best else None) for url in lost
    ]
    return sorted(found, key=lambda u: _order(u.depth, u.url))
