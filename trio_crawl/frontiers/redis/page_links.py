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
from .outbox import CALL_WEIGHT, Lease
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
    known, join = sent.digest, lease.join
    digests, fresh = lease.known, lease.fresh
    for url in links:
        digest = known(url, depth, join)
        if digest is not None:
            digests.append(digest)
        elif allows(url):
            children += wire.admission(url, depth, referrer)
            fresh.append(url)


#: A known link costs Redis about an eighth of an admission.
KNOWN_PER_ADMISSION = 8
#: A finish by itself (its lease checked and dropped, its host released,
#: its links kept) costs Redis about as much as four admissions.
FINISH_WEIGHT = 4


def weight(admissions: int, known: int) -> int:
    """What links ask of Redis, in admissions (see ``outbox.CALL_WEIGHT``)."""
    return admissions + known // KNOWN_PER_ADMISSION


def finish_ops(lease: Lease) -> list[tuple[list[object], int]]:
    """The finish of ``lease``'s page with everything its links became, and
    its weight; a page whose links weigh more than one call should carry
    (``CALL_WEIGHT``) sends them in parts first, each a call's worth."""
    fields, depth = wire.ADMISSION_FIELDS, lease.link_depth
    children, known = lease.children, lease.known
    ops: list[tuple[list[object], int]] = []
    step = CALL_WEIGHT * fields
    known_step = CALL_WEIGHT * KNOWN_PER_ADMISSION
    while len(children) > step:
        part, children = children[:step], children[step:]
        ops.append((wire.part_op(lease.digest, lease.token, part, [], depth), CALL_WEIGHT))
    while len(known) > known_step:
        some, known = known[:known_step], known[known_step:]
        ops.append((wire.part_op(lease.digest, lease.token, [], some, depth), CALL_WEIGHT))
    last = wire.finish_op(lease.digest, lease.token, lease.started, children, known, depth)
    ops.append((last, FINISH_WEIGHT + weight(len(children) // fields, len(known))))
    return ops
