"""The server side of the Redis frontier: one Lua library of Redis Functions
(``functions.lua``, beside this module, shipped as package data).

Every move of a URL between places (queued, leased to a worker, deferred,
done) happens inside one function call, and Redis runs a function
atomically: no other client sees a half-made move. So the invariant of
docs/termination.md holds across processes: every unfinished URL is in
exactly one place, and ``unfinished`` (a counter moved in the same calls) is
0 exactly when no URL is queued, leased or deferred anywhere.

Keys of crawl NAME share the prefix ``tc:{NAME}:`` (one hash tag, so a
cluster would keep them on one node; ``}`` and ``%`` in NAME are written
``%7D`` and ``%25``, so no crawl's prefix begins another's: ``keys_prefix``):

``m``          hash: counters and settings (``unfinished``, ``fresh``,
               ``started``, ``maxp``, ``done``, ``low``, ``maxd``, ``dcap``
               (max_depth + 1; 0: none), ...), and
               ``cfg``, the crawl's settings as JSON
``S<n>``       the seen set: 8-byte URL digests, as fields of small hashes
               (linear hashing: buckets split as the set grows, so each stays
               in Redis's compact listpack encoding, about 14 bytes a URL),
               each with the URL's depth (a known URL's link needs no more)
``e``          hash: digest -> entry (MessagePack) of every *unfinished* URL
``q:<d>:<h>``  list: digests queued at depth d for host h, never leased
``r:<d>``      sorted set: hosts with URLs queued at depth d, scored by the
               time (ms) their next request may start (``BLOCK`` while the
               host has as many requests in flight as it may)
``again``      list: digests queued again (a retry that came due, a lease
               reclaimed from a dead worker, a page put back unfinished)
``dl``         sorted set: deferred retries, scored by their due time
``h:<h>``      hash: per host ``next``, ``iv`` (ms between starts),
               ``infl`` (leased URLs), ``ok`` (robots.txt read)
``ud``         hash: depth -> unfinished URLs at that depth (to settle, not a gate)
``dn``         hash: digest -> a finished page not settled yet (MessagePack:
               URL, depth, referrer, links, the worker that wrote its
               record), kept so that a shorter path found later corrects
               its record and reaches its links
``fx:<owner>`` list: depth corrections (4 fields each) of records that
               worker wrote, found by another worker's call: written by
               that worker, in order, at its next sync (counted unfinished)
``fx``         list: corrections whose worker left before writing them
``u:<d>``      set: digests of the pages in ``dn`` at depth d
``w``          sorted set: live workers, scored by their lease expiry
``wn``         set: the name of every worker that ever joined (a worker new to
               the crawl whose output holds records warns: Redis lost them)
``wl:<owner>`` set: digests leased to that worker
``idle``       set: workers waiting for work
``wake``       stream: wake-ups ("w": something changed; "d": done)
``robots``     hash: robots.txt responses shared by all workers
``b``, ``hb``  hashes: the host budgets and their counts per host
               (``budgets.py``; only in a crawl with budgets)

An entry is a MessagePack array; see ``E_*`` in the Lua source. Times are the server's
``TIME`` in milliseconds, so every machine of a crawl shares one clock.

``{V}`` in the Lua source is replaced by a digest of that source, so a
changed library never meets an older one of the same name on a shared
server. Every function but ``hello`` refuses a crawl whose keys are gone
(error reply ``TCGONE``); ``check`` is a read-only consistency check.
"""

from __future__ import annotations

import hashlib
from importlib import resources

from . import budgets

_SOURCE = budgets.splice(resources.files(__package__).joinpath("functions.lua").read_text("utf-8"))

#: A short digest of the source: the library's and the functions' suffix.
VERSION = hashlib.sha1(_SOURCE.encode()).hexdigest()[:10]

#: The library, ready for ``FUNCTION LOAD``.
LIBRARY = _SOURCE.replace("{V}", VERSION)


def function(name: str) -> str:
    """The server-side name of function ``name`` (``sync``, ``hello``...)."""
    return f"tc_{name}_{VERSION}"
