"""The recrawl benchmark's site: one visit, the changes, the next visit, and what an
exact recrawl must report about each URL (recrawl.py's figures rest on this).

A recrawl is judged on what changed between two visits, so the site is a plan of
both versions, made first (pure: no I/O, ``random.Random(seed)`` only), and the
files on disk are written from it (``write_first``, then ``apply_changes``):

* pages ``0 .. pages-1`` on ``hosts`` loopback hosts (page ``i`` on host ``i %
  hosts``), at ``/e/I.html``, ``/m/I.html`` or ``/n/I.html``: the folder is the
  validator group the server gives it (``recrawl_server.py``): 40 % ETag only, 40 %
  Last-Modified only, 20 % neither. The last host ignores conditional requests.
* page ``i`` links to its tree children ``i*B+1 .. i*B+B`` (every page reachable,
  at a small depth) and to ``links`` random pages; a link to the same host is a
  path, to another host a full URL (``http://ADDR:PORT/...``).
* between the visits: 2 % of the pages are removed (their files deleted: links
  left in unchanged pages now answer 404), 10 % change (new text; their links to
  removed pages dropped), and 2 % are new, each linked from one changed page
  only: half from any changed page, half from changed pages at the greatest
  depth whose path from the start page is all unchanged pages, so that a
  recrawl that does not follow the kept links of its 304s never finds them.
* mtimes are fixed (first version: 2026-01-01 plus the page number in seconds,
  changed and new pages: 2026-03-01 plus it), so Last-Modified and nginx's
  ETag (mtime and size) change exactly when a page does, whenever the
  benchmark runs; unchanged files keep their mtime.

``outcomes`` is what each URL is on the second visit: ``new``, ``changed``,
``unchanged``, ``gone`` (removed but still linked: a 404) or ``unlinked``
(known from the first visit, no longer reachable), by breadth-first search of
the second version, as the recrawl contract (notes ``recrawl-spec.md``) names
them.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

GROUPS = ("e", "m", "n")  # ETag only, Last-Modified only, neither
GROUP_WEIGHTS = (40, 40, 20)
FIRST_MTIME = 1_767_225_600  # 2026-01-01 00:00 UTC
SECOND_MTIME = 1_772_323_200  # 2026-03-01 00:00 UTC
ROBOTS_TXT = b"User-agent: *\nDisallow:\n"

_WORDS_TEXT = (
    "crawl frontier visit revisit etag modified since digest change gone new page link host "
    "record archive state schedule due kept body bytes server answer fresh stale"
)
_WORDS = tuple(_WORDS_TEXT.split())


@dataclass(frozen=True, slots=True, kw_only=True)
class RecrawlParams:
    pages: int = 20_000
    hosts: int = 4
    page_bytes: int = 8192
    links: int = 6  # random links per page, besides the tree children
    branching: int = 4
    seed: int = 1
    changed: float = 0.10
    removed: float = 0.02
    new: float = 0.02

    def __post_init__(self) -> None:
        if self.pages < 50:
            raise ValueError(f"pages must be >= 50, got {self.pages}")
        if self.hosts < 2:
            raise ValueError("hosts must be >= 2 (the last one ignores conditional requests)")


@dataclass(slots=True)
class Page:
    number: int
    host: int
    group: str
    links: list[int]  # page numbers, in order, duplicates allowed

    @property
    def path(self) -> str:
        return f"/{self.group}/{self.number}.html"


@dataclass(slots=True)
class RecrawlPlan:
    """Both versions of the site (see the module docstring)."""

    params: RecrawlParams
    first: dict[int, Page]
    second: dict[int, Page]
    changed: frozenset[int]
    removed: frozenset[int]
    new: frozenset[int]
    deep_new: frozenset[int]  # new pages linked only from deep changed pages
    _bodies: dict[tuple[int, int], bytes] = field(default_factory=dict, repr=False)

    @property
    def ignoring_host(self) -> int:
        return self.params.hosts - 1

    def version(self, number: int) -> int:
        """1 for the first text of a page, 2 for a changed or new page's second."""
        return 2 if number in self.changed or number in self.new else 1

    def body(self, number: int, version: int, addresses: list[str], port: int) -> bytes:
        """The page's HTML: its links, then filler words to ``page_bytes``."""
        key = (number, version)
        if key not in self._bodies:
            page = (self.second if version == 2 else self.first)[number]
            rng = random.Random(f"{self.params.seed}-{number}-{version}")
            anchors = []
            for target in page.links:
                other = self.second.get(target) or self.first[target]
                href = (
                    other.path
                    if other.host == page.host
                    else f"http://{addresses[other.host]}:{port}{other.path}"
                )
                anchors.append(f'<a href="{href}">{target}</a>')
            head = (
                f"<!doctype html><html><head><title>page {number} v{version}</title></head>"
                f"<body><h1>page {number}, version {version}</h1>\n<p>{' '.join(anchors)}</p>\n<p>"
            )
            tail = "</p></body></html>\n"
            room = max(0, self.params.page_bytes - len(head) - len(tail))
            filler = " ".join(rng.choices(_WORDS, k=room // 4 + 1))[:room]
            self._bodies[key] = (head + filler + tail).encode()
        return self._bodies[key]

    def outcomes(self) -> dict[int, str]:
        """Every page number of either version -> what the second visit must say."""
        reached = _reachable(self.second, self.removed)
        out: dict[int, str] = {}
        for number in sorted(set(self.first) | set(self.second)):
            if number not in reached:
                out[number] = "unlinked"  # only first-version pages can be unreachable
            elif number in self.new:
                out[number] = "new"
            elif number in self.removed:
                out[number] = "gone"
            elif number in self.changed:
                out[number] = "changed"
            else:
                out[number] = "unchanged"
        return out

    def first_reachable(self) -> set[int]:
        return _reachable(self.first, frozenset())


def _reachable(pages: dict[int, Page], dead: Iterable[int]) -> set[int]:
    """Breadth-first from page 0; a dead (removed) page is reached but links nowhere."""
    dead = set(dead)
    seen = {0}
    queue = deque([0])
    while queue:
        number = queue.popleft()
        if number in dead or number not in pages:
            continue
        for target in pages[number].links:
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def _depths(pages: dict[int, Page]) -> tuple[dict[int, int], dict[int, int]]:
    """Depth of every reachable page and its parent on one shortest path."""
    depth, parent = {0: 0}, {0: -1}
    queue = deque([0])
    while queue:
        number = queue.popleft()
        for target in pages[number].links:
            if target not in depth:
                depth[target] = depth[number] + 1
                parent[target] = number
                queue.append(target)
    return depth, parent


def plan(params: RecrawlParams) -> RecrawlPlan:
    """Both versions, deterministic from ``params``."""
    rng = random.Random(params.seed)
    n = params.pages
    first: dict[int, Page] = {}
    for i in range(n):
        children = [
            c
            for c in range(i * params.branching + 1, i * params.branching + 1 + params.branching)
            if c < n
        ]
        randoms = [rng.randrange(n) for _ in range(params.links)]
        group = rng.choices(GROUPS, GROUP_WEIGHTS)[0]
        first[i] = Page(i, i % params.hosts, group, [t for t in children + randoms if t != i])
    depth, parent = _depths(first)
    n_new = max(2, round(n * params.new))
    n_deep = n_new // 2
    # Deep linkers first: changed pages at the greatest depth, their path kept unchanged.
    deepest = max(depth.values())
    candidates = sorted(p for p, d in depth.items() if d == deepest)
    rng.shuffle(candidates)
    deep_linkers: list[int] = []
    protected: set[int] = {0}
    for page in candidates:
        if len(deep_linkers) >= max(1, n_deep // 2):
            break
        ancestors = []
        up = parent[page]
        while up != -1:
            ancestors.append(up)
            up = parent[up]
        if any(a in deep_linkers for a in ancestors):
            continue
        deep_linkers.append(page)
        protected.update(ancestors)
    free = [p for p in range(1, n) if p not in protected and p not in deep_linkers]
    rng.shuffle(free)
    n_removed = round(n * params.removed)
    removed = frozenset(free[:n_removed])
    n_changed = max(len(deep_linkers) + 1, round(n * params.changed))
    changed_list = deep_linkers + free[n_removed : n_removed + n_changed - len(deep_linkers)]
    changed = frozenset(changed_list)
    shallow_linkers = [p for p in changed_list if p not in deep_linkers]
    second: dict[int, Page] = {}
    for i, page in first.items():
        if i in removed:
            continue
        links = page.links
        if i in changed:
            links = [t for t in links if t not in removed]
        second[i] = Page(i, page.host, page.group, list(links))
    new_numbers = list(range(n, n + n_new))
    deep_new = frozenset(new_numbers[:n_deep])
    existing = sorted(second)
    for number in new_numbers:
        linker = rng.choice(deep_linkers if number in deep_new else shallow_linkers)
        second[linker].links.append(number)
        group = rng.choices(GROUPS, GROUP_WEIGHTS)[0]
        targets = [0] + [rng.choice(existing) for _ in range(2)]
        second[number] = Page(number, number % params.hosts, group, targets)
    return RecrawlPlan(
        params=params,
        first=first,
        second=second,
        changed=changed,
        removed=removed,
        new=frozenset(new_numbers),
        deep_new=deep_new,
    )


def _write(root: Path, page: Page, body: bytes, mtime: int) -> None:
    path = root / str(page.host) / page.group / f"{page.number}.html"
    path.write_bytes(body)
    os.utime(path, (mtime, mtime))


def write_first(site: RecrawlPlan, root: Path, addresses: list[str], port: int) -> None:
    """The first version under ``root/HOST/GROUP/N.html``, robots.txt per host."""
    for host in range(site.params.hosts):
        for group in GROUPS:
            (root / str(host) / group).mkdir(parents=True, exist_ok=True)
        (root / str(host) / "robots.txt").write_bytes(ROBOTS_TXT)
    for number, page in site.first.items():
        _write(root, page, site.body(number, 1, addresses, port), FIRST_MTIME + number)


def apply_changes(site: RecrawlPlan, root: Path, addresses: list[str], port: int) -> None:
    """Turn the first version on disk into the second; unchanged files are not touched."""
    for number in site.removed:
        page = site.first[number]
        (root / str(page.host) / page.group / f"{number}.html").unlink()
    for number in sorted(site.changed | site.new):
        body = site.body(number, 2, addresses, port)
        _write(root, site.second[number], body, SECOND_MTIME + number)


def sha1_hex(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()
