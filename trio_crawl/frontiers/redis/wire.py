"""The positional wire format between a worker and the crawl's Redis Functions.

Redis Functions take flat lists of arguments and answer flat lists, so the
meaning of each position is a contract between this module and
``functions.lua`` (beside it, loaded by ``lua.py``). Every list sent and
every reply read is built or parsed here, and nowhere else, so the two sides
can be compared at a glance.

Ops of a sync call (the Lua ``sync``):

``F digest token started n admission*n depth known``  finished, with its links
``P digest token n admission*n depth known``  part of a leased page's links
``R digest token started``                put back (stopping)
``D digest token delay_ms tries``         retry later
``A n admission*n``                       seeds (sitemaps)
``C host delay_ms``                       a host's Crawl-delay

An admission is 7 fields: digest, URL, host, depth, referrer, redirect chain
(``\\n``-joined), payload (JSON or ``''``). A finish's *known* links are
8-byte digests of links Redis accepted before at ``depth`` or lower
(``sent_links.py``), all in one argument, end to end: kept with the page
as they came, no admission work, and no Lua string or table each (Redis
turns every argument into a Lua string, and a page has some 28 of them). A finish's
admissions carry the depth this worker knew; Redis moves them by as much as the page's
depth dropped meanwhile, and keeps those beyond ``max_depth`` (one level
beyond is sent) in case a shorter path brings them within reach. A taken
URL is 10 fields (see ``Taken``); a sync reply also carries depth
corrections, 4 fields each: URL, depth, referrer, previous depth. A crawl
whose keys are gone is the error reply ``GONE``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...core.frontier import DepthCorrection, FrontierStatistics
from ...core.url import host_port

ADMISSION_FIELDS = 7
TAKEN_FIELDS = 10
CORRECTION_FIELDS = 4
#: How every function but ``hello`` answers when the crawl's keys are gone
#: (the first word of its error reply; ``hello`` too when it may not create).
GONE = "TCGONE"


def url_digest(url: str) -> bytes:
    """The 8-byte key of a URL in Redis (BLAKE2b). Two URLs of a crawl of
    n URLs share one with probability about n²/2⁶⁵ (3 in 10⁶ at 10⁷ URLs)."""
    return hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def admission(
    url: str, depth: int, referrer: str, chain: str = "", payload: str = ""
) -> list[object]:
    """One URL to admit: the 7 fields the Lua ``admit`` reads."""
    return [url_digest(url), url, host_port(url), depth, referrer, chain, payload]


def finish_op(
    digest: bytes,
    token: int,
    started: bool,
    children: list[object],
    known: list[bytes] = [],  # noqa: B006 (never mutated)
    known_depth: int = 0,
) -> list[object]:
    """A page finished: its admissions, then the digests of its links Redis
    accepted before at ``known_depth`` or lower (see ``sent_links.py``)."""
    return [
        "F",
        digest,
        token,
        int(started),
        len(children) // ADMISSION_FIELDS,
        *children,
        known_depth,
        b"".join(known),
    ]


def part_op(
    digest: bytes, token: int, children: list[object], known: list[bytes], known_depth: int
) -> list[object]:
    """Part of a leased page's links, ahead of its finish: a page with more
    links than one call should carry sends them over several calls."""
    n = len(children) // ADMISSION_FIELDS
    return ["P", digest, token, n, *children, known_depth, b"".join(known)]


def release_op(
    digest: bytes, token: int, started: bool, missed_turn: bool = False
) -> list[object]:
    """A leased URL given back; ``missed_turn``: its rate's turn passed
    before the worker could start it (Redis counts those for ``--status``)."""
    return ["R", digest, token, int(started), int(missed_turn)]


def defer_op(digest: bytes, token: int, delay: float, tries: int) -> list[object]:
    return ["D", digest, token, max(0, round(delay * 1000)), tries]


def admit_op(admissions: list[object]) -> list[object]:
    return ["A", len(admissions) // ADMISSION_FIELDS, *admissions]


def crawl_delay_op(host: str, delay: float | None) -> list[object]:
    return ["C", host, round((delay or 0) * 1000)]


def hello_args(
    name: str,
    lease: float,
    *,
    may_create: bool,
    identity_json: str,
    max_pages: int | None,
    rate: float | None,
    per_host_concurrency: int | None,
    read_robots: bool,
    max_depth: int | None,
    settle: bool,
    starts: list[object],
) -> list[object]:
    """Arguments of ``hello``; ``starts`` are admissions at depth 0.
    ``settle``: finished pages may drop their links once no shorter path
    to them can turn up (``core/frontier.py`` rule 7)."""
    # To the microsecond: --rate 250 is 4.2 ms a start, not 4.
    rate_ms = 0 if rate is None else round(1000 / rate * 1.05, 3)  # RATE_SLACK
    return [
        name,
        round(lease * 1000),
        int(may_create),
        identity_json,
        -1 if max_pages is None else max_pages,
        rate_ms,
        per_host_concurrency or 0,
        int(read_robots),
        -1 if max_depth is None else max_depth,
        int(settle),
        len(starts) // ADMISSION_FIELDS,
        *starts,
    ]


def sync_args(owner: str, want: int, floor: int, ops: list[object]) -> list[object]:
    return [owner, want, floor, *ops]


def renew_args(owner: str, lease: float) -> list[object]:
    return [owner, round(lease * 1000)]


class Counters(NamedTuple):
    """The crawl-wide counters every call answers with."""

    done: int
    unfinished: int
    fresh: int
    leased: int
    started: int
    finished: int
    seen: int

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> Counters:
        return cls(*(int(c) for c in raw))

    def statistics(
        self, *, fetching: int, unfinished: int, refused: int, missed_turns: int = 0
    ) -> FrontierStatistics:
        """The crawl-wide counters as a worker reports them: ``fetching``,
        ``unfinished``, ``refused`` and ``missed_turns`` are the worker's own view."""
        return FrontierStatistics(
            seen=self.seen,
            queued=self.fresh,
            fetching=fetching,
            done=self.finished,
            dropped=0,
            started=self.started,
            unfinished=unfinished,
            held=0,
            refused=refused,
            missed_turns=missed_turns,
        )


NO_COUNTERS = Counters(0, 1, 0, 0, 0, 0, 0)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class HelloReply:
    created: bool
    settings_json: str
    owner: str
    last_id: str
    counters: Counters
    #: A worker of this name had joined this crawl before (an earlier run).
    known: bool

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> HelloReply:
        created, cfg, owner, last_id, counts, known = raw
        return cls(
            bool(created),
            _text(cfg),
            _text(owner),
            _text(last_id),
            Counters.parse(counts),
            bool(known),
        )


@dataclass(frozen=True, slots=True)
class Taken:
    """A URL Redis leased to this worker."""

    digest: bytes
    url: str
    depth: int
    referrer: str | None
    chain: tuple[str, ...]
    payload: str
    tries: int
    refetch: bool
    token: int
    #: When it may start (``turns.py``): ``r`` or ``w`` and microseconds, or ''.
    turn: str

    @classmethod
    def parse(cls, f: Sequence[Any]) -> Taken:
        digest, url, depth, ref, chain, payload, tries, refetch, token, turn = f
        return cls(
            digest,
            _text(url),
            int(depth),
            _text(ref) or None,
            tuple(_text(chain).split("\n")) if chain else (),
            _text(payload) if payload else "",
            int(tries),
            bool(refetch),
            int(token),
            _text(turn),
        )


@dataclass(frozen=True, slots=True)
class SyncReply:
    alive: bool
    #: ms until something may be takeable without any other change; -1: never.
    due: int
    counters: Counters
    taken: list[Taken]
    idle: bool
    refused: int
    #: Pages whose record states a depth a shorter path has since lowered.
    corrections: list[DepthCorrection]
    #: New URLs the host budgets refused in this call (``budgets.py``).
    over_budget: int = 0

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> SyncReply:
        alive, due, counts, taken, idle, refused, fixes, over_budget = raw[:8]
        return cls(
            bool(alive),
            int(due),
            Counters.parse(counts),
            [Taken.parse(taken[i : i + TAKEN_FIELDS]) for i in range(0, len(taken), TAKEN_FIELDS)],
            bool(idle),
            int(refused),
            [
                DepthCorrection(
                    _text(fixes[i]),
                    int(fixes[i + 1]),
                    _text(fixes[i + 2]) or None,
                    int(fixes[i + 3]),
                )
                for i in range(0, len(fixes), CORRECTION_FIELDS)
            ],
            int(over_budget),
        )


@dataclass(frozen=True, slots=True)
class RenewReply:
    alive: bool
    counters: Counters

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> RenewReply:
        alive, counts = raw
        return cls(bool(alive), Counters.parse(counts))
