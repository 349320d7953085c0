"""Per-host budgets on Redis (``max_pages_per_host``, ``max_hosts``), counted
inside Redis so that all workers together keep them exactly.

The rules are the memory frontier's (``core/host_budget.py``) and the state
file's (``frontiers/sqlite/hosts.py``); Redis keeps the counts, and the Lua
code that keeps them is ``budgets.lua``, spliced into the library
(``functions.lua``) where it says ``@budgets`` (``splice``, called by ``lua.py``).

Rules
-----
1. A host is ``host:port`` of the canonical URL, as the worker sends it with
   each admission (``wire.admission``).
2. A URL new to the crawl's seen set is admitted only if it fits
   (``HostBudget.fits``): its host is one of the first ``max_hosts`` hosts
   admitted, and has fewer than ``max_pages_per_host`` URLs admitted (pages,
   redirect targets, a handler's requests and sitemap seeds alike; links
   ``max_depth`` cut off meet the budgets when a shorter path brings them
   within reach). A URL the crawl already knows is never refused.
3. Start URLs are admitted whatever the budgets (the user asked for them),
   but count: ``hello``, creating the crawl, counts them.
4. A refused URL leaves nothing: no record, no entry, not even a place in the
   seen set, as in memory. Counts only grow, so it stays refused; each offer
   of it is one more in the worker's ``statistics().refused`` (its summary's
   "not followed" line). A redirect to a refused target is recorded as the
   redirect it is (its target is not fetched), as in memory; and the worker
   asks Redis at once (``redirect_target``), so that ``admit_redirect``
   says ``BUDGET`` for it as the memory frontier and the state file do (and
   ``SEEN`` for a target the crawl knows, budgets or not).
5. Exact with any number of workers, under SIGKILL and resume: a count moves
   in the same function call that adds the URL to the seen set, and Redis
   runs a call atomically, so the seen set and the counts never disagree. A
   worker killed before its finish reached Redis admitted nothing: the
   worker that takes its page back sends the same links, which meet the
   same counts. The counts live with the crawl's other keys (``b``: the
   budgets and the number of hosts; ``hb``: URLs per host, one field a host),
   so a resumed crawl goes on from them; ``check`` (``admin.check_crawl``)
   verifies that ``hb`` counts every URL of the seen set once.
6. Cost: nothing without budgets but one ``HMGET`` per call that admits;
   with them, per new URL one ``HEXISTS`` and one ``HINCRBY`` (a host's count
   is read once per call). Per redirect, budgets or not, one read-only call
   (``fits``: a seen-set ``HEXISTS``; with budgets, the host's count too),
   unless the worker already knows Redis has its target (``SentLinks``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any

from ...core.frontier import RedirectOutcome
from ...core.url import host_port
from .sent_links import SentLinks
from .wire import url_digest

#: ``Calls.fcall`` (not imported: calls.py imports lua.py, which imports this module).
FunctionCall = Callable[[str, Sequence[object]], Awaitable[Any]]

#: The line of ``functions.lua`` that ``budgets.lua`` replaces.
MARKER = "-- @budgets"

SOURCE = resources.files(__package__).joinpath("budgets.lua").read_text("utf-8")


def splice(library: str, budgets: str = SOURCE) -> str:
    """``library`` with ``budgets`` in place of its ``MARKER`` line (the
    functions it defines are locals the admission code after it calls)."""
    head, marker, tail = library.partition(MARKER)
    if not marker:
        raise ValueError(f"the Lua library has no {MARKER!r} line")
    _, _, rest = tail.partition("\n")
    return head + budgets + rest


#: ``fits``'s answers, by number.
_TARGET_NOW = (RedirectOutcome.BUDGET, RedirectOutcome.FOLLOW, RedirectOutcome.SEEN)


async def redirect_target(
    fcall: FunctionCall, sent: SentLinks, target: str, join: int
) -> RedirectOutcome:
    """What ``admit_redirect`` says of an in-scope ``target``, as the memory
    frontier and the state file do: ``SEEN`` if the crawl knows it,
    ``BUDGET`` if the host budgets refuse it, else ``FOLLOW``. A target this
    worker saw Redis accept (``sent``; or one a move of the same ``join``
    carries before this page's finish) needs no call; any other costs one
    read-only call (``fits``), budgets or not. The target's admission still
    goes with its page's finish, where a count moves (rule 5)."""
    if sent.known(target, sys.maxsize, join):
        return RedirectOutcome.SEEN
    return _TARGET_NOW[int(await fcall("fits", [url_digest(target), host_port(target)]))]
