"""``--state``, ``--seeds``, ``--max-queue`` and ``--status``: preparing a crawl
whose frontier lives in SQLite, before the event loop starts.

Resuming is "run the same command again". In order:

1. the stored settings are compared with the new ones (start URLs, scope,
   limits); a different crawl is refused unless ``--force``;
2. the output file is reconciled: a torn last line (a kill mid-write) is cut
   off, and every URL it has a record for is marked done in the state, so
   nothing recorded is fetched again, even if its Finish never reached disk;
3. ``recover()`` puts what was in memory or in flight back on the disk queue;
   the in-flight ones are fetched again and their records marked
   ``"refetched": true`` (the server may have seen them twice);
4. start URLs and seeds are (re)queued: idempotent, known URLs are left alone.
   With per-host budgets, the ``hosts`` table counts them (made, or counted
   again, first: ``hosts.py``); the budgets are this run's, the counts
   the file's.

One crawl per state file: ``prepare_state`` opens it locked (``CrawlState.open``
with ``lock=True``; see ``lock.py``, "One crawl per file") for as long as the
crawl runs, and a second crawl on the same file gets ``StateLockedError`` at
once. ``status_text`` and ``stored_start_urls`` only read, and take no lock.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...core.config import CrawlConfig
from ...core.filters import UrlFilter
from ...core.scope import Scope
from ...core.url import canonicalize
from ...errors import StateInUseError, StateLockedError, StateUsageError
from ..crawl_identity import StateIdentity
from ..resumed_output import repair_output
from ..seeds import seed_lines
from .disk_backlog import DiskBacklog
from .state import CrawlState
from .visits import (
    StateVisits,
    generation_line,
    prepare_visits,
    reconcile_unlinked,
    start_generation,
)


#: Settings that define "the same crawl".
@dataclass
class PreparedState:
    state: CrawlState
    backlog: DiskBacklog
    scope: Scope
    already_started: int
    refetched: list[str]
    resumed: bool
    temporary_dir: str | None = None
    notes: list[str] = field(default_factory=list)
    #: The output the earlier runs wrote their records to (their absolute
    #: path, as stored), if they had one: a run given another ``-o`` has
    #: its records elsewhere.
    recorded_in: str | None = None
    #: The visits this crawl keeps (None for a temporary file: nobody recrawls it).
    visits: StateVisits | None = None

    def keep_recorded_in(self) -> None:
        """Store ``recorded_in`` as the crawl's output again (this run's
        ``-o`` replaced it when the file was opened): for a run that writes
        nothing, so that ``--status`` and a later run still find the records."""
        if self.recorded_in is None:
            return
        settings = self.state.load_settings() or {}
        self.state.save_settings({**settings, "output": self.recorded_in})

    def close(self) -> None:
        if self.visits is not None:
            self.visits.close()
        self.state.close()
        if self.temporary_dir is not None:
            for name in os.listdir(self.temporary_dir):
                os.unlink(os.path.join(self.temporary_dir, name))
            os.rmdir(self.temporary_dir)


def open_state_file(path: str, *, create: bool, lock: bool) -> CrawlState:
    """``CrawlState.open``, its errors as ``StateUsageError`` (``StateLockedError``
    when ``lock`` and another crawl holds the file)."""
    try:
        return CrawlState.open(path, create=create, lock=lock)
    except StateInUseError as exc:
        raise StateLockedError(str(exc)) from None
    except (ValueError, FileNotFoundError) as exc:
        raise StateUsageError(str(exc)) from None


def stored_start_urls(path: str) -> list[str] | None:
    """The start URLs a state file was made with (to resume with no URL given)."""
    if not os.path.exists(path):
        return None
    state = open_state_file(path, create=False, lock=False)
    try:
        settings = state.load_settings()
    finally:
        state.close()
    return None if settings is None else list(settings.get("start_urls") or [])


def status_text(path: str) -> str:
    """Progress of the crawl in a state file; works while that crawl runs."""
    state = open_state_file(path, create=False, lock=False)
    try:
        settings = state.load_settings() or {}
        progress = state.progress()
        generation = generation_line(state)
    finally:
        state.close()
    lines = [f"state file: {path}"]
    if settings.get("start_urls"):
        lines.append(f"start URLs: {' '.join(settings['start_urls'])}")
    if generation is not None:
        lines.append(generation)
    output = settings.get("output")
    if isinstance(output, str) and os.path.exists(output):
        progress = _with_records_in(path, progress, output)
    lines.append(
        "done {done:,}  queued {queued:,}  in flight at stop {fetching:,}  "
        "dropped {dropped:,}  total {total:,}".format(
            done=progress["done"],
            queued=progress["queued_disk"] + progress["queued_mem"],
            fetching=progress["fetching"],
            dropped=progress["dropped"],
            total=progress["total"],
        )
    )
    return "\n".join(lines)


def _with_records_in(path: str, progress: dict[str, int], output: str) -> dict[str, int]:
    """``progress`` with the URLs that ``output`` has records for counted as
    done, as the next resume will count them (step 2 of the module docstring):
    after a stop, the pages that finished in the grace period are recorded
    there but not yet marked done in the state."""
    state = open_state_file(path, create=False, lock=False)
    try:
        landed = state.unfinished_among(recorded_urls(output))
    finally:
        state.close()
    progress = dict(progress)
    for row_state, n in landed.items():
        progress[row_state.name.lower()] -= n
        progress["done"] += n
    return progress


def recorded_urls(path: str) -> Iterator[str]:
    """URLs of the records in an output file (lines that do not parse are skipped)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("url"), str):
                    yield record["url"]
    except FileNotFoundError:
        return


def prepare_state(
    config: CrawlConfig,
    *,
    state_path: str | None,
    seeds: str | None,
    output: str | None,
    force: bool,
) -> PreparedState:
    """Open (or create) the state, check it is this crawl, reconcile, queue seeds.

    The state stays locked until ``PreparedState.close``; raises StateLockedError
    if another crawl holds it, StateUsageError for the other one-line problems."""
    temporary_dir = None
    if state_path is None:
        temporary_dir = tempfile.mkdtemp(prefix="trio-crawl-")
        state_path = os.path.join(temporary_dir, "frontier.db")
    if seeds is not None and not os.path.isfile(seeds):
        raise StateUsageError(f"cannot read seeds file {seeds!r}")
    state = open_state_file(state_path, create=True, lock=True)
    try:
        if config.output.recrawl and start_generation(state):
            state.close()  # its books count the rows the new generation emptied
            state = open_state_file(state_path, create=True, lock=True)
        return _prepare(config, state, seeds, output, force, temporary_dir)
    except BaseException:
        state.close()
        raise


def _prepare(
    config: CrawlConfig,
    state: CrawlState,
    seeds: str | None,
    output: str | None,
    force: bool,
    temporary_dir: str | None,
) -> PreparedState:
    notes: list[str] = []
    identity = StateIdentity.of(config, seeds)
    stored = state.load_settings()
    resumed = stored is not None
    if stored is not None:
        differing = identity.differing(stored)
        if differing and not force:
            raise StateUsageError(
                f"{state.path} holds a different crawl ({', '.join(differing)} differ); "
                "run it with the same arguments, or add --force to continue it with these"
            )
        scope_origins = list(stored.get("scope_origins") or [])
        earlier = stored.get("output")
        recorded_in = earlier if isinstance(earlier, str) else None
        if output is not None and output != "-":
            cut = repair_output(output)
            if cut:
                notes.append(f"cut a torn last line ({cut} bytes) off {output}")
            marked = state.mark_recorded(recorded_urls(output))
            if marked:
                notes.append(f"{marked:,} URLs recorded in {output} marked done")
            reconcile_unlinked(state, output)
    else:
        scope_origins = []
        recorded_in = None
    refetched = state.recover()
    budget = config.host_budget()
    if budget is not None:  # before the seeds: they count (state.py rule 8)
        state.use_host_budget(budget)
    origins = set(scope_origins)
    url_filter = config.url_filter()
    state.add_seeds(_origins_of(config.start_url_strings, origins))
    if seeds is not None:
        seed_urls = _origins_of(seed_lines(Path(seeds), canonicalize), origins)
        if config.follow.no_parent:  # seeds are start URLs: --no-parent keeps below them too
            seed_urls = _noting_roots(seed_urls, url_filter)
        state.add_seeds(seed_urls)
    wanted = {**identity.settings(), "scope_origins": sorted(origins)}
    if output is not None and output != "-":  # for --status (not part of the identity)
        wanted["output"] = os.path.abspath(output)
    state.save_settings(wanted)
    state.filter_unseen([])  # build the seen-filter now, not on the first page
    progress = state.progress()
    scope = config.scope(sorted(origins), url_filter)
    backlog = DiskBacklog(state)
    visits = None if temporary_dir is not None else StateVisits(backlog, *prepare_visits(state))
    return PreparedState(
        state=state,
        backlog=backlog,
        scope=scope,
        already_started=progress["done"],
        refetched=refetched,
        resumed=resumed,
        temporary_dir=temporary_dir,
        notes=notes,
        recorded_in=recorded_in,
        visits=visits,
    )


def _origins_of(urls: Iterable[str], origins: set[str]) -> Iterator[str]:
    """Pass URLs through, noting each one's ``scheme://host:port/`` for the scope."""
    for url in urls:
        end = url.find("/", url.find("//") + 2)
        origins.add(url[: end + 1] if end > 0 else url + "/")
        yield url


def _noting_roots(urls: Iterable[str], url_filter: UrlFilter) -> Iterator[str]:
    """Pass URLs through, adding each one's directory to the ``--no-parent`` roots."""
    for url in urls:
        url_filter.add_roots((url,))
        yield url
