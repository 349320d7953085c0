"""Generate the benchmark's static website, and the exact set of URLs a crawl must fetch.

Rules of the site (each one is what the exactness check in ``run.py`` relies on):

1. Page 0 is the start page, served at ``/`` (file ``index.html``); page ``i >= 1`` is
   ``/p/<i>.html``. Every page is HTML of about ``page_bytes`` bytes with exactly ``links``
   ``<a href>`` anchors and no other kind of link (no ``<link>``, ``<img>``, ``<base>``),
   so no crawler can disagree about what a link is.
2. Reachability with a small depth: page ``i`` links to its "tree children"
   ``i*B+1 .. i*B+B`` (B = ``branching``), so every page is reachable from ``/`` within
   ``ceil(log_B(pages)) + 1`` hops whatever the random links do.
3. Every other in-scope link points at a page that exists. Links are written in mixed forms
   that resolve to the same URL: ``/p/7.html``, ``7.html``, ``./7.html``, ``../p/7.html``
   (``p/7.html`` from ``/``), and ``/`` or ``../`` for the start page.
4. Duplicates a crawler must collapse: each page has a ``#top`` self link and two links that
   repeat another link of the same page with a ``#sN`` fragment added; random links also
   repeat pages many times across the site.
5. Query strings: about 1 % of the pages have three *distinct* query variants,
   ``?a=1&b=2``, ``?x=1`` and ``?x=2``. nginx serves a variant as the same file, but each
   variant is its own URL and must be fetched once. Each variant is linked from two random
   pages (an exact duplicate the crawler must drop). Keys are written in sorted order and
   values are never empty, so a canonicaliser that sorts query parameters or drops blank
   values (Scrapy's fingerprint does the former) still sees the same URL set. A variant's
   body is its base page, whose links all resolve to URLs already in the set.
6. Out of scope: about half the pages link to ``http://external.invalid/...`` (a reserved,
   never-resolving name). No crawler may fetch it; it is not in the expected set.

The expected set is computed twice: by construction, and by resolving every href of every
page with ``urljoin`` and dropping fragments and other hosts; the two must agree or the
generator raises. It is written one URL (path plus query) per line to
``expected_urls.txt``, with ``manifest.json`` beside it. ``robots.txt`` allows everything.

Generation is deterministic from the parameters (``random.Random(seed)``, nothing else).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

#: Bump when the site's shape changes, so cached sites are regenerated.
GENERATOR_VERSION = 1

EXPECTED_FILE = "expected_urls.txt"
MANIFEST_FILE = "manifest.json"
ROBOTS_TXT = "User-agent: *\nDisallow:\n"

#: Query variants of a variant page: sorted keys, non-empty values (rule 5).
QUERY_VARIANTS = ("a=1&b=2", "x=1", "x=2")
#: Pages that link to each query variant (rule 5: an exact duplicate).
VARIANT_LINKERS = 2
#: Fraction of pages that get query variants.
VARIANT_FRACTION = 0.01
#: Fragment duplicates per page (rule 4), besides the ``#top`` self link.
FRAGMENT_DUPS = 2
#: Probability that a page has one external link (rule 6).
EXTERNAL_PROBABILITY = 0.5

DEFAULT_PAGES = 20_000
DEFAULT_PAGE_BYTES = 15 * 1024
DEFAULT_LINKS = 30
DEFAULT_SEED = 1
DEFAULT_BRANCHING = 4

_PLACEHOLDER_HOST = "site.invalid"
_BASE = f"http://{_PLACEHOLDER_HOST}"

_WORDS_TEXT = (
    "crawl frontier trio nursery channel robots fetch parse link depth budget host "
    "worker limiter cancel deadline record canonical fragment query scope polite "
    "retry timeout socket buffer stream header status redirect gzip chunk pool "
    "connection sitemap anchor index archive article section paragraph the of and to "
    "in is for on with as by at from that this it be are was were will can"
)
_WORDS = tuple(_WORDS_TEXT.split())


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteParams:
    """The knobs of the generated site; equal params give byte-identical sites."""

    pages: int = DEFAULT_PAGES
    page_bytes: int = DEFAULT_PAGE_BYTES
    links: int = DEFAULT_LINKS
    seed: int = DEFAULT_SEED
    branching: int = DEFAULT_BRANCHING

    def __post_init__(self) -> None:
        if self.pages < 10:
            raise ValueError(f"pages must be >= 10, got {self.pages}")
        if self.branching < 2:
            raise ValueError(f"branching must be >= 2, got {self.branching}")
        # Fixed links: children, home, #top, fragment dups, external, a few variants.
        if self.links < self.branching + FRAGMENT_DUPS + 8:
            raise ValueError(f"links must be >= {self.branching + FRAGMENT_DUPS + 8}")

    def cache_key(self) -> str:
        """A short stable name for a cache directory of this site."""
        blob = json.dumps({"v": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
        return f"site-{self.pages}p-{digest}"


@dataclass(frozen=True, slots=True)
class SitePlan:
    """Every page's hrefs (as written), and the in-scope URLs they add up to."""

    params: SiteParams
    hrefs: tuple[tuple[str, ...], ...]  # hrefs[i] are page i's anchors, in order
    expected: frozenset[str]  # path plus "?query", no fragment
    stats: dict[str, int]


def page_path(i: int) -> str:
    """The URL path of page ``i``."""
    return "/" if i == 0 else f"/p/{i}.html"


def page_file(i: int) -> str:
    """The file, relative to the site root, that serves page ``i``."""
    return "index.html" if i == 0 else f"p/{i}.html"


def resolve(base: str, href: str) -> str | None:
    """The in-scope target (path plus query, no fragment) of ``href`` seen on ``base``.

    ``base`` is a path plus query; returns None for links to other hosts.
    """
    absolute, _fragment = urldefrag(urljoin(_BASE + base, href))
    parts = urlsplit(absolute)
    if parts.scheme != "http" or parts.netloc != _PLACEHOLDER_HOST:
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _page_href(rng: random.Random, source: int, target: int) -> str:
    """One of the equivalent ways to write a link from ``source`` to ``target`` (rule 3)."""
    if target == 0:
        return "/" if source == 0 else rng.choice(("/", "../"))
    if source == 0:
        return rng.choice((f"/p/{target}.html", f"p/{target}.html", f"./p/{target}.html"))
    return rng.choice(
        (f"/p/{target}.html", f"{target}.html", f"./{target}.html", f"../p/{target}.html")
    )


def plan_site(params: SiteParams) -> SitePlan:
    """Decide every page's links. Pure: the only randomness is ``Random(params.seed)``."""
    rng = random.Random(params.seed)
    n, b = params.pages, params.branching

    # Rule 5: query variants, each assigned to VARIANT_LINKERS random source pages.
    n_bases = max(1, round(n * VARIANT_FRACTION))
    bases = sorted(rng.sample(range(1, n), n_bases))
    variant_links: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    variants: set[str] = set()
    for base in bases:
        for query in QUERY_VARIANTS:
            variants.add(f"/p/{base}.html?{query}")
            for source in rng.sample(range(n), VARIANT_LINKERS):
                variant_links[source].append((base, query))

    hrefs: list[tuple[str, ...]] = []
    n_external = n_fragment = n_query = 0
    for i in range(n):
        targets = [c for c in range(i * b + 1, i * b + b + 1) if c < n]  # rule 2
        targets.append(0)  # home
        page_links = [_page_href(rng, i, t) for t in targets]
        for base, query in variant_links[i]:
            page_links.append(f"{_page_href(rng, i, base)}?{query}")
            n_query += 1
        fixed = 1 + FRAGMENT_DUPS + 1  # "#top", fragment dups, room for one external
        while len(page_links) < params.links - fixed:  # rule 3: random pages
            page_links.append(_page_href(rng, i, rng.randrange(n)))
        for k, href in enumerate(rng.sample(page_links, FRAGMENT_DUPS)):  # rule 4
            page_links.append(f"{href.split('#', 1)[0]}#s{k + 1}")
            n_fragment += 1
        page_links.append("#top")
        if rng.random() < EXTERNAL_PROBABILITY:  # rule 6
            page_links.append(f"http://external.invalid/p/{rng.randrange(10 * n)}.html")
            n_external += 1
        while len(page_links) < params.links:
            page_links.append(_page_href(rng, i, rng.randrange(n)))
        rng.shuffle(page_links)
        hrefs.append(tuple(page_links))

    expected = frozenset(page_path(i) for i in range(n)) | variants
    plan = SitePlan(
        params=params,
        hrefs=tuple(hrefs),
        expected=expected,
        stats={
            "pages": n,
            "query_variants": len(variants),
            "expected_urls": len(expected),
            "anchors": sum(len(h) for h in hrefs),
            "query_links": n_query,
            "fragment_duplicate_links": n_fragment,
            "external_links": n_external,
        },
    )
    _check_plan(plan)
    return plan


def _check_plan(plan: SitePlan) -> None:
    """Recompute the expected set by resolving every href from ``/``; raise on mismatch.

    Also records the BFS depth of the deepest URL (``max_depth``), which a crawler's depth
    limit must not cut off.
    """
    n = plan.params.pages
    for i, page_links in enumerate(plan.hrefs):
        if len(page_links) != plan.params.links:
            raise AssertionError(f"page {i} has {len(page_links)} links")

    def page_of(url: str) -> int:
        path = url.split("?", 1)[0]
        return 0 if path == "/" else int(path.removeprefix("/p/").removesuffix(".html"))

    depth = {"/": 0}
    queue = deque(["/"])
    while queue:
        url = queue.popleft()
        for href in plan.hrefs[page_of(url)]:
            target = resolve(url, href)
            if target is not None and target not in depth:
                if not 0 <= page_of(target) < n:
                    raise AssertionError(f"{url} links to missing page {target}")
                depth[target] = depth[url] + 1
                queue.append(target)
    if set(depth) != plan.expected:
        missing = sorted(plan.expected - set(depth))[:5]
        extra = sorted(set(depth) - plan.expected)[:5]
        raise AssertionError(f"expected set mismatch: unreachable {missing}, extra {extra}")
    plan.stats["max_depth"] = max(depth.values())


def _filler(rng: random.Random, count: int = 64) -> list[str]:
    """A pool of text paragraphs (~300-700 bytes) that pad pages to size."""
    pool = []
    for _ in range(count):
        words = [rng.choice(_WORDS) for _ in range(rng.randrange(50, 110))]
        pool.append(f"<p>{' '.join(words).capitalize()}.</p>\n")
    return pool


def render_page(plan: SitePlan, i: int, rng: random.Random, filler: list[str]) -> bytes:
    """Page ``i`` as HTML: its anchors in small groups between filler paragraphs."""
    anchors = [f'<a href="{h}">link {k}</a>' for k, h in enumerate(plan.hrefs[i])]
    head = (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>Page {i}</title></head>\n<body>\n<h1 id="top">Page {i}</h1>\n'
    )
    tail = "</body></html>\n"
    groups = [anchors[k : k + 5] for k in range(0, len(anchors), 5)]
    blocks = [f"<ul>{''.join(f'<li>{a}</li>' for a in g)}</ul>\n" for g in groups]
    size = len(head) + len(tail) + sum(len(x) for x in blocks)
    paragraphs: list[str] = []
    while size < plan.params.page_bytes:
        paragraphs.append(rng.choice(filler))
        size += len(paragraphs[-1])
    # Spread the link groups through the text.
    body: list[str] = []
    step = max(1, len(paragraphs) // max(1, len(blocks)))
    for k, block in enumerate(blocks):
        body.append(block)
        body.extend(paragraphs[k * step : (k + 1) * step])
    body.extend(paragraphs[len(blocks) * step :])
    return (head + "".join(body) + tail).encode()


def write_site(plan: SitePlan, out_dir: Path) -> dict[str, object]:
    """Write the pages, robots.txt, the expected-URL list and the manifest into ``out_dir``."""
    rng = random.Random(plan.params.seed + 1)
    filler = _filler(rng)
    (out_dir / "p").mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(plan.params.pages):
        data = render_page(plan, i, rng, filler)
        total += len(data)
        (out_dir / page_file(i)).write_bytes(data)
    (out_dir / "robots.txt").write_text(ROBOTS_TXT)
    (out_dir / EXPECTED_FILE).write_text("".join(f"{u}\n" for u in sorted(plan.expected)))
    manifest: dict[str, object] = {
        "generator_version": GENERATOR_VERSION,
        "params": asdict(plan.params),
        **plan.stats,
        "html_bytes": total,
    }
    (out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def default_cache_root() -> Path:
    """Where generated sites are cached: readable by nginx's unprivileged worker."""
    return Path(tempfile.gettempdir()) / "trio-crawl-bench"


def ensure_site(params: SiteParams, cache_root: Path | None = None) -> tuple[Path, bool]:
    """The directory of the site for ``params``, generated unless already cached.

    Returns ``(directory, generated_now)``. The site is written to a scratch directory
    and renamed into place, so an interrupted run never leaves a half site in the cache.
    Directories are made world-readable (0o755): nginx's worker may run as ``nobody``.
    """
    root = cache_root or default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    final = root / params.cache_key()
    if (final / MANIFEST_FILE).is_file():
        return final, False
    scratch = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    try:
        write_site(plan_site(params), scratch)
        for directory in (scratch, scratch / "p"):
            os.chmod(directory, 0o755)
        os.rename(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return final, True


def read_expected(site_dir: Path) -> list[str]:
    """The expected URLs (path plus query) of a generated site."""
    return (site_dir / EXPECTED_FILE).read_text().split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out_dir", type=Path, help="directory to write (must not exist)")
    parser.add_argument("--pages", type=int, default=DEFAULT_PAGES)
    parser.add_argument("--page-bytes", type=int, default=DEFAULT_PAGE_BYTES)
    parser.add_argument("--links", type=int, default=DEFAULT_LINKS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    params = SiteParams(
        pages=args.pages, page_bytes=args.page_bytes, links=args.links, seed=args.seed
    )
    if args.out_dir.exists():
        parser.error(f"{args.out_dir} exists")
    manifest = write_site(plan_site(params), args.out_dir)
    json.dump(manifest, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
