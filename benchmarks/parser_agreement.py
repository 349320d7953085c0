"""Do lexbor and libxml2 find the same links? On real pages, and on pages broken on purpose.

    python benchmarks/parser_agreement.py [ROOT ...] [--limit N] [--seed 1]

``extract_links`` reads pages under 1 MiB with lexbor (rule 8 of
``core/parse.py``, ``core/html_links.py``); before, libxml2 read them all.
This script puts the two side by side on every ``*.html``/``*.htm`` file
under 1 MiB below the roots (default: Debian's documentation,
``/usr/share/doc``):

1. ``real``: each file as it is; (base, hrefs) must be equal, order and
   repeats included. Pages lexbor leaves to libxml2 (a template, a
   frameset) are counted apart.
2. ``one tag inserted``: the same files, each with one token from ``TOKENS``
   put at a random offset (``--seed``); the link lists are compared after
   de-duplication (what ``resolve_many`` keeps), and each difference is
   charged to the token that made it, with one example each, so a reader
   can open the page and see which parser reads it as a browser does.

Prints counts only; exits 0.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trio_crawl.core import page_encoding
from trio_crawl.core.html_links import html_links
from trio_crawl.core.libxml2_links import parse_links, reopen_html_end, tokenize_links

MAX_BYTES = 1024 * 1024
TOKENS = [
    *(b"<", b"</a>", b"<!--", b"-->", b"<a href=x>", b"<script>", b"</html>", b"<![CDATA["),
    *(b"&amp", b"<base href=/b/>", b"<table>", b"<svg>", b"<math>", b"<noscript>"),
    *(b"<textarea>", b"<title>", b"<plaintext>", b"<xmp>", b"<a href>", b"<base href>"),
    *(b"<area href=y>", b"<A HREF=z>", b"<svg><a xlink:href=q>", b"<a href='#f'>", b"\x00"),
    *(b"<select>", b"<frameset>", b"<table><a href=t>", b"<form>", b"</body>", b"<body>"),
    *(b"<head>", b"<iframe>", b"<noembed>", b"<noframes>", b"<option>", b"<style>", b"</p>"),
    *(b"<p>", b"<li>", b"<html>", b"<frame>", b"<image>", b"<object>", b"<caption>", b"<tr>"),
    *(b"<td>", b"<button>", b"<nobr>", b"<listing>", b"<pre>", b"<template>"),
]


def libxml2_links(data: bytes) -> tuple[str | None, list[str]]:
    """(base, hrefs) as ``extract_links`` read every small page before rule 8."""
    data = reopen_html_end(data)
    found = parse_links(data)
    return tokenize_links(data) if found is None else found


def pages(roots: list[Path], limit: int | None, rng: random.Random) -> list[Path]:
    found = [
        path
        for root in roots
        for pattern in ("*.html", "*.htm")
        for path in root.rglob(pattern)
        if path.is_file() and path.stat().st_size < MAX_BYTES
    ]
    rng.shuffle(found)
    return found[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("roots", nargs="*", type=Path, default=[Path("/usr/share/doc")])
    parser.add_argument("--limit", type=int, default=None, help="at most N files")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    files = pages(args.roots, args.limit, rng)
    real = Counter[str]()
    broken = Counter[str]()
    causes = Counter[bytes]()
    examples: dict[bytes, str] = {}
    for path in files:
        body = path.read_bytes()
        if not body:
            continue
        data = page_encoding.utf8(body, "text/html")
        found = html_links(data)
        if found is None:
            real["left to libxml2"] += 1
        else:
            real["same" if found == libxml2_links(data) else "different"] += 1
        token = rng.choice(TOKENS)
        at = rng.randrange(len(body) + 1)
        data = page_encoding.utf8(body[:at] + token + body[at:], "text/html")
        found = html_links(data)
        if found is None:
            broken["left to libxml2"] += 1
            continue
        base, hrefs = libxml2_links(data)
        if found[0] == base and list(dict.fromkeys(found[1])) == list(dict.fromkeys(hrefs)):
            broken["same"] += 1
            continue
        broken["different"] += 1
        causes[token] += 1
        examples.setdefault(token, f"{path} with {token!r} at byte {at}")
    print(f"roots: {', '.join(map(str, args.roots))}; {len(files)} files under 1 MiB")
    print(f"real pages:        {dict(real)}")
    print(f"one tag inserted:  {dict(broken)}")
    for token, count in causes.most_common():
        print(f"  {count:5d}  {token!r:24}  e.g. {examples[token]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
