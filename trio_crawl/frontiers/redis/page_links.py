"""What a finished page's links become on their way to Redis.

Every in-scope link goes, because Redis keeps a page's links until the page
is settled, to pass on a shorter path found later (rule 7 of
``core/frontier.py``). But how it goes decides what it costs Redis: a link
Redis accepted from this worker at the same depth or lower
(``sent_links.py``) goes as its 8-byte digest, kept and nothing more; any
other goes as a full admission (seen-set probe, maybe a new entry and a
queue slot). Links one level beyond ``max_depth`` always go in full: Redis
keeps their URL, to admit them if a shorter path brings them within reach.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import wire
from .outbox import Lease
from .sent_links import SentLinks


def add_links(
    lease: Lease,
    links: Sequence[str],
    depth: int,
    referrer: str,
    allows: Callable[[str], bool],
    sent: SentLinks,
    max_depth: int | None,
) -> None:
    """Add ``links`` (found on ``referrer``, so at ``depth``) to what
    ``lease``'s finish will carry: admissions, or known digests."""
    children = lease.children
    lease.link_depth = depth
    if max_depth is not None and depth > max_depth:
        for url in links:
            if allows(url):
                children += wire.admission(url, depth, referrer)
        return
    # A known link passed the scope when it was sent: no second look.
    known = sent.known
    digests, fresh = lease.known, lease.fresh
    for url in links:
        if known(url, depth):
            digests.append(wire.url_digest(url))
        elif allows(url):
            children += wire.admission(url, depth, referrer)
            fresh.append(url)


def finish_op(lease: Lease) -> list[object]:
    """The finish of ``lease``'s page, with everything its links became."""
    return wire.finish_op(
        lease.digest, lease.token, lease.started, lease.children, lease.known, lease.link_depth
    )
