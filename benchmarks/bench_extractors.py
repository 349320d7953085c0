"""Link extraction with lxml against lexbor (``extract_links``' since rule 8), on two workloads.

    python benchmarks/bench_extractors.py [--doc-dir DIR] [--repeat 3] [--no-memory]

Workloads:

- ``docs``: every HTML file of a documentation tree on disk (default: Debian's
  python3.11-doc, /usr/share/doc/python3.11/html, as served by realsite.py; 9 KB to
  2.5 MB, ~96 KB on average), each with the URL it has when served from
  ``http://127.0.0.1:8000/``;
- ``synthetic``: bench_links.py's 15 KB page with 30 links, at 480 URLs of one site.

Extractors, each doing the whole of ``extract_links``' work (decode per rule 4 of
``core/parse.py``, parse, collect the ``href`` of ``<a>``/``<area>`` and the first
``<base href>``, ``resolve_many``):

- ``lxml``: ``extract_links`` with rule 8 turned off (libxml2's HTML parser, as
  before rule 8 and as every page with a template or a frameset is still read);
- ``extract_links``: the shipped path (lexbor, ``core/html_links.py``);
- ``selectolax``: selectolax's ``LexborHTMLParser`` and a CSS selector
  (``a[href], area[href], base[href]``: document order);

Left out: Resiliparse (2.0.1, lexbor too): iterating its ``query_selector_all`` result
is quadratic (38 s for the 2,454 links of library/os.html), and walking its DOM from
Python costs ~180 ms on that page, where selectolax needs a few ms.

Figures: microseconds per page (total time over the workload / pages; the best of
``--repeat`` passes, extractors interleaved page by page so machine load hits all
alike), the parse alone, whether each page's link list (order included) is identical
to lxml's, and the peak RSS that parsing the largest page adds (a fresh process per
extractor). A missing package is reported and skipped.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_links import CONTENT_TYPE, make_page
from lxml import etree

from trio_crawl.core import parse as _parse
from trio_crawl.core.parse import extract_links
from trio_crawl.core.url import resolve_many

DOC_DIR = Path("/usr/share/doc/python3.11/html")
SELECTOR = "a[href], area[href], base[href]"


def _finish(pairs: list[tuple[str, str]], url: str) -> list[str]:
    """extract_links' tail: first <base href> wins, fragments cut, resolve_many."""
    base: str | None = None
    hrefs: list[str] = []
    for tag, href in pairs:
        if tag != "base":
            hrefs.append(_parse._cut_fragment(href))
        elif base is None:
            base = href
    if not hrefs:
        return []
    return resolve_many(hrefs, url if base is None else _parse._frozen_base(base, url))


def _prepare(body: bytes) -> bytes:
    return _parse._reopen_html_end(_parse._utf8(body, CONTENT_TYPE))


def lxml_parse(body: bytes) -> object:
    return etree.fromstring(_prepare(body), etree.HTMLParser(encoding="utf-8", huge_tree=True))


def lxml_extract(body: bytes, url: str) -> list[str]:
    """``extract_links`` as it was before rule 8: libxml2 for every page."""
    lexbor_bytes = _parse._LEXBOR_BYTES
    _parse._LEXBOR_BYTES = 0  # type: ignore[misc]
    try:
        return extract_links(body, url, CONTENT_TYPE)
    finally:
        _parse._LEXBOR_BYTES = lexbor_bytes  # type: ignore[misc]


def make_extractors() -> dict[str, tuple[Callable[[bytes, str], list[str]], Callable[..., Any]]]:
    """name -> (extract(body, url), parse(body)) for every installed extractor."""
    out: dict[str, tuple[Callable[[bytes, str], list[str]], Callable[..., Any]]] = {
        "lxml": (lxml_extract, lxml_parse),
    }
    try:
        from selectolax.lexbor import LexborHTMLParser
    except ImportError:
        print("selectolax: not installed (pip install selectolax), skipped")
    else:

        def sl_parse(body: bytes) -> Any:
            return LexborHTMLParser(_parse._utf8(body, CONTENT_TYPE))

        def sl_extract(body: bytes, url: str) -> list[str]:
            tree = sl_parse(body)
            pairs = [(n.tag, n.attrs.get("href")) for n in tree.css(SELECTOR)]
            return _finish(pairs, url)

        out["selectolax"] = (sl_extract, sl_parse)
        out["extract_links"] = (lambda b, u: extract_links(b, u, CONTENT_TYPE), sl_parse)
    return out


def workloads(doc_dir: Path) -> dict[str, list[tuple[bytes, str]]]:
    loads: dict[str, list[tuple[bytes, str]]] = {}
    if (doc_dir / "index.html").is_file():
        loads["docs"] = [
            (p.read_bytes(), "http://127.0.0.1:8000/" + p.relative_to(doc_dir).as_posix())
            for p in sorted(doc_dir.rglob("*.html"))
        ]
    else:
        print(f"docs: {doc_dir} missing (apt-get install -y python3.11-doc), skipped")
    page = make_page()
    loads["synthetic"] = [
        (page, f"https://www.example.com/blog/{year}/{month:02d}/article-{i}.html")
        for year in (2023, 2024)
        for month in range(1, 13)
        for i in range(20)
    ]
    return loads


def bench(pages: list[tuple[bytes, str]], extractors: dict[str, Any], repeat: int) -> None:
    names = list(extractors)
    best = {(n, kind): float("inf") for n in names for kind in ("extract", "parse")}
    reference: list[list[str]] = [extractors["lxml"][0](b, u) for b, u in pages]
    differs: dict[str, list[str]] = {n: [] for n in names}
    for _ in range(repeat):
        total = {(n, kind): 0.0 for n in names for kind in ("extract", "parse")}
        for index, (body, url) in enumerate(pages):
            for name in names:
                extract, parse = extractors[name]
                t0 = time.perf_counter()
                found = extract(body, url)
                t1 = time.perf_counter()
                parse(body)
                t2 = time.perf_counter()
                total[name, "extract"] += t1 - t0
                total[name, "parse"] += t2 - t1
                if found != reference[index] and url not in differs[name]:
                    differs[name].append(url)
        for k, v in total.items():
            best[k] = min(best[k], v)
    links = sum(len(r) for r in reference)
    size = sum(len(b) for b, _ in pages)
    print(f"  {len(pages)} pages, {size / 1e6:.1f} MB, {links} links (lxml)")
    print(f"  {'extractor':12} {'us/page':>9} {'parse us/page':>14}  same links as lxml")
    for name in names:
        same = "yes" if not differs[name] else f"NO: {len(differs[name])} pages differ"
        extract_us = best[name, "extract"] / len(pages) * 1e6
        parse_us = best[name, "parse"] / len(pages) * 1e6
        print(f"  {name:12} {extract_us:9.0f} {parse_us:14.0f}  {same}")
        for url in differs[name][:3]:
            index = next(i for i, (_, u) in enumerate(pages) if u == url)
            mine = extractors[name][0](*pages[index])
            ref = reference[index]
            extra, lost = sorted(set(mine) - set(ref))[:3], sorted(set(ref) - set(mine))[:3]
            print(
                f"      {url}: {len(mine)} vs {len(ref)}; only {name}: {extra}, only lxml: {lost}"
            )


_MEMORY_PROBE = """
import resource, sys
sys.path.insert(0, {here!r})
from bench_extractors import make_extractors
ex = make_extractors()[{name!r}]
body = open({path!r}, "rb").read()
ex[0](b"<a href=x>x</a>", "http://127.0.0.1:8000/x.html")  # warm up imports
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tree = ex[1](body)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def memory(doc_dir: Path, names: list[str]) -> None:
    largest = max(doc_dir.rglob("*.html"), key=lambda p: p.stat().st_size)
    size = largest.stat().st_size
    print(
        f"peak RSS added by one parse of the largest page ({largest.name}, {size / 1e6:.1f} MB):"
    )
    for name in names:
        code = _MEMORY_PROBE.format(
            here=str(Path(__file__).resolve().parent), name=name, path=str(largest)
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        added = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else "failed"
        print(
            f"  {name:12} {int(added) / 1024:6.1f} MB" if added != "failed" else f"  {name} failed"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc-dir", type=Path, default=DOC_DIR)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args()
    extractors = make_extractors()
    for name, pages in workloads(args.doc_dir).items():
        print(f"{name}:")
        bench(pages, extractors, args.repeat)
    if not args.no_memory and (args.doc_dir / "index.html").is_file():
        memory(args.doc_dir, list(extractors))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this process: peak RSS {peak:.0f} MB)")


if __name__ == "__main__":
    main()
