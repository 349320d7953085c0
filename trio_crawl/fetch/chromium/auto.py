"""``--render auto``: render only where it adds something, learnt as the crawl goes.

Pure: no trio, no browser. The fetcher asks ``decide`` before rendering a
page it has fetched, and tells ``learn`` what rendering added.

Rules:

1. Pages are grouped by pattern: ``host:port`` plus the path's directories,
   a directory with a digit in it standing for any (``/item/42/view`` and
   ``/item/7/view`` share ``/item/*/``). The file name and query do not count.
2. A pattern's pages are rendered until ``SAMPLES`` renders of it have
   finished: a burst of new pages is rendered, never guessed.
3. A pattern where any render found a link the static HTML lacks is
   rendered from then on ("scripts add links").
4. Otherwise its pages are read as served ("static HTML has every link"),
   except every ``RECHECK``-th, which is rendered to check again.
5. ``report`` says, per pattern, what was rendered and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["RECHECK", "SAMPLES", "Decision", "PatternReport", "RenderPlanner", "pattern_of"]

SAMPLES = 3
RECHECK = 20

SCRIPTS_ADD = "scripts add links"
SAMPLING = "sampling"
STATIC_ENOUGH = "static HTML has every link"


def pattern_of(url: str) -> str:
    """The pattern ``url`` belongs to (rule 1)."""
    parts = urlsplit(url)
    directories = parts.path.split("/")[1:-1]
    template = "".join(
        "*/" if any(ch.isdigit() for ch in part) else f"{part}/" for part in directories
    )
    return f"{parts.netloc}/{template}"


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to render a page, and why."""

    render: bool
    reason: str


@dataclass(frozen=True, slots=True)
class PatternReport:
    """What ``--render auto`` did with one pattern: pages rendered and read
    as served, renders that found more links, and the current rule."""

    pattern: str
    rendered: int
    static: int
    gained: int
    reason: str


@dataclass(slots=True)
class _Pattern:
    learnt: int = 0  # renders whose outcome is known
    gained: int = 0
    static: int = 0  # pages read as served
    turns: int = 0  # pages decided after sampling found nothing (rule 4)


class RenderPlanner:
    """Decides, page by page, whether ``--render auto`` renders it."""

    def __init__(self, samples: int = SAMPLES, recheck: int = RECHECK) -> None:
        self._samples = samples
        self._recheck = recheck
        self._patterns: dict[str, _Pattern] = {}

    def decide(self, url: str) -> Decision:
        """Render ``url``'s page, or read it as served (rules 2-4)."""
        state = self._patterns.setdefault(pattern_of(url), _Pattern())
        if state.gained:
            decision = Decision(True, SCRIPTS_ADD)
        elif state.learnt < self._samples:
            decision = Decision(True, SAMPLING)
        else:
            state.turns += 1
            if state.turns % self._recheck != 0:
                state.static += 1
                return Decision(False, STATIC_ENOUGH)
            decision = Decision(True, "re-check")
        return decision

    def learn(self, url: str, static: Iterable[str], rendered: Iterable[str]) -> bool:
        """Record what rendering ``url`` gave; True if it found a link the
        static HTML lacks (rule 3)."""
        state = self._patterns.setdefault(pattern_of(url), _Pattern())
        gained = bool(set(rendered) - set(static))
        state.learnt += 1
        state.gained += gained
        return gained

    def report(self) -> list[PatternReport]:
        """Every pattern seen, most rendered first (rule 5)."""
        out = []
        for pattern, s in self._patterns.items():
            if s.gained:
                reason = f"{SCRIPTS_ADD} ({s.gained} of {s.learnt} renders)"
            elif s.learnt < self._samples:
                reason = SAMPLING
            else:
                reason = f"{STATIC_ENOUGH} ({s.learnt} renders)"
            out.append(PatternReport(pattern, s.learnt, s.static, s.gained, reason))
        out.sort(key=lambda r: (-r.rendered, r.pattern))
        return out
