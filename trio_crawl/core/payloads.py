"""The frontier entries' payload marks, apart from the rules that use them.

``REQUISITE`` marks an entry admitted as a page requisite. The frontier,
the politeness and the page loop compare payloads with it on every crawl,
but only a ``--page-requisites`` crawl (or a page over 1 MiB) needs
``requisites.py``'s rules and their regular expressions: the mark lives
here so that a plain crawl does not compile them before its first request
(issue #36 item 11). ``requisites.py`` re-exports both names.
"""

from __future__ import annotations

import enum


class Requisite(enum.Enum):
    """The payload of a frontier entry admitted as a page requisite: fetched
    with its body whatever its type, recorded, and never read for links (a
    stylesheet is read for its own ``url()``s, which are requisites too)."""

    OF_PAGE = "requisite"


REQUISITE = Requisite.OF_PAGE
