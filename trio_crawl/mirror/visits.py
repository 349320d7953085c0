"""The visits a ``--mirror DIR`` keeps for itself, so a second run is a recrawl.

``wget -m`` run twice asks the server, page by page, whether each saved file
is still current (``-m`` implies ``-N``). A mirror crawled without
``--state`` keeps what that needs inside the mirror: a standalone visit file
(``recrawl/store.py``), ``DIR/.trio-crawl/visits.db``. The directory's name
starts with a dot, which no host name does, so no URL is ever saved there;
the link converter's walk leaves it out (``files.py``), and it is never
counted as a mirrored file.

Runs, and why each starts as it does (``open_mirror_visits``):

- no visits yet: a first crawl (generation 1), records without ``change``;
- the last run ended whole: the next generation begins, a recrawl against
  it, automatically (as ``wget -m`` is);
- the last run did not end (Ctrl-C, ``--max-time``, ``kill -9``): there is
  no frontier to resume it from, so it is done again from the start against
  the same previous generation, its partial visits forgotten. What it had
  written is rewritten with the same bytes (a changed page is still changed
  against the previous generation), so the rerun leaves the tree an
  uninterrupted run leaves.

A crawl whose frontier keeps visits itself (a ``--state`` file) does not
open this file: the state file is the one truth, and ``--recrawl`` decides
(``docs/manual/recrawl.md``). Nor does a crawl shared by several workers
(``--redis``): they would each begin a generation of one file.

Writes are blocking SQLite calls made in a worker thread, one at a time, a
batch of visits per transaction (``kept``: group commit); a visit is in the
file before its page's record is written. A write that fails (the disk is
full) fails the mirror as a body that cannot be saved does (``on_failure``:
one line, a non-zero exit): the pages whose visits it held get no record,
and what was written before stays (SQLite rolled the batch back whole).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Final

import trio

from ..recrawl.store import WRITE_ERRORS, VisitStore
from ..recrawl.visit import Visit
from .files import KEPT_DIR

VISITS_FILE: Final = "visits.db"


class MirrorVisits:
    """A ``VisitKeeper`` (``frontiers/base.py``) over a mirror's visit file."""

    def __init__(
        self, store: VisitStore, reader: VisitStore, on_failure: Callable[[OSError], None]
    ) -> None:
        self._store = store
        #: Told once when a write fails (the mirror's ``on_failure``).
        self._on_failure = on_failure
        #: A connection of its own for the previous visits, read in the event
        #: loop while the worker thread writes on ``store``'s (WAL readers
        #: never wait for the writer).
        self._reader = reader
        #: The generation this run writes (2 or more: a recrawl).
        self.generation = store.generation
        self._limiter = trio.CapacityLimiter(1)
        #: Visits noted, not yet being written; those being written (one
        #: batch at a time), and the event set once that batch is done.
        self._pending: dict[int, Visit] = {}
        self._writing: dict[int, Visit] = {}
        self._written: trio.Event | None = None
        self._failure: OSError | None = None
        self._tickets = 0

    @property
    def recrawl(self) -> bool:
        return self.generation > 1

    def previous(self, url: str) -> Visit | None:
        return self._reader.previous(url) if self.recrawl else None

    def keep(self, visit: Visit) -> int:
        self._tickets += 1
        self._pending[self._tickets] = visit
        return self._tickets

    async def kept(self, ticket: int) -> None:
        """Return once ``ticket``'s visit is in the file. Group commit: the
        first page to wait writes every visit noted so far in one
        transaction (one thread call); the pages noted meanwhile wait for
        it, then the next of them writes theirs. After a failed write, none
        returns: the crawl is being aborted, and no page gets a record whose
        visit is not in the file."""
        while self._failure is None and (ticket in self._pending or ticket in self._writing):
            if self._written is not None:
                await self._written.wait()
                continue
            self._writing, self._pending = self._pending, {}
            self._written = written = trio.Event()
            try:
                await trio.to_thread.run_sync(
                    self._store.put_many, list(self._writing.values()), limiter=self._limiter
                )
            except WRITE_ERRORS as exc:  # (a cancel comes after the write is done)
                self._failure = failure = _as_os_error(exc)
                self._on_failure(failure)
            finally:
                self._writing, self._written = {}, None
                written.set()
        if self._failure is not None:
            await trio.sleep_forever()  # cancelled by the abort

    async def unreached(self, limit: int = 1000) -> list[Visit]:
        if self._failure is not None:  # none marked any more: the caller's loop must end
            return []
        return await trio.to_thread.run_sync(self._store.unreached, limit, limiter=self._limiter)

    async def mark_unlinked(self, urls: Iterable[str]) -> None:
        await self._write(functools.partial(self._store.mark_unlinked, list(urls)))

    async def finish(self) -> None:
        await self._write(self._store.finish)

    async def _write(self, job: Callable[[], None]) -> None:
        """A write at the end of the crawl (no page waits for it): one that
        fails fails the mirror as ``kept`` does, and is not raised (the
        mirror's error says it); the generation is then not done, so the
        next run does it again."""
        if self._failure is not None:
            return
        try:
            await trio.to_thread.run_sync(job, limiter=self._limiter)
        except WRITE_ERRORS as exc:
            self._failure = failure = _as_os_error(exc)
            self._on_failure(failure)

    def close(self) -> None:
        self._reader.close()
        self._store.close()


def _as_os_error(exc: Exception) -> OSError:
    """What the mirror reports: SQLite's reason (``database or disk is
    full``), naming the visit file."""
    if isinstance(exc, OSError):
        return exc
    return OSError(f"cannot keep its visits in {KEPT_DIR}/{VISITS_FILE}: {exc}")


def open_mirror_visits(root: str, on_failure: Callable[[OSError], None]) -> MirrorVisits:
    """The visits of the mirror at ``root``, ready for this run (see the
    module docstring); ``on_failure`` is told if a write fails. Blocking:
    call in a worker thread."""
    kept = os.path.join(root, KEPT_DIR)
    os.makedirs(kept, exist_ok=True)
    path = os.path.join(kept, VISITS_FILE)
    store = VisitStore.open(path)
    try:
        if store.done():
            store.begin_generation()
        else:
            store.restart_generation()
        # The reader: this generation.
        return MirrorVisits(store, VisitStore.open(path), on_failure)
    except BaseException:
        store.close()
        raise
