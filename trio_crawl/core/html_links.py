"""A page's raw links as the HTML Standard's parser reads them (lexbor). Pure.

``html_links(data)`` is ``parse.extract_links``' reader for a page under
1 MiB without a template or a frameset: the (base, hrefs) pair that libxml2's
target parser gives ``libxml2_links.parse_links``, from lexbor (through
selectolax), which implements the HTML Standard's tokenizer and tree
builder, as browsers do.

Why lexbor there: on a documentation site the parse is most of a page's
CPU time, and lexbor parses about twice as fast as libxml2 (PostgreSQL's
docs: 60 us against 124 us a page; with the links read, 90 us against
124 us; bench_extractors in ``benchmarks/README.md``). Its answers are libxml2's
on every real page tried: 129,481 HTML files under 1 MiB (Debian, Python,
Rust and libstdc++ documentation and the benchmark sites; 6,691 more have
a template or a frameset, rule 5) gave the same base and hrefs, in order
(``benchmarks/parser_agreement.py``). With one tag inserted at random
into each page, the links (after de-duplication) differ on 262 of 128,775,
0.2 %, and there lexbor reads as a browser does: a ``<title>`` cut open
runs to the end, a ``<`` may sit in an unquoted ``href``, markup inside
an ``<xmp>`` in MathML (foreign content) is markup, and content misplaced
in a table is moved before it (only the order changes). Repeats may differ
too (the Standard's adoption agency clones a misnested ``<a>``);
``resolve_many`` removes them.

Where the two differ by design, libxml2 stays: for pages with markup the
Standard hides from the document (rule 5), and for bodies of 1 MiB and
more, where libxml2's push parser keeps memory bounded (``parse`` rule 6)
and lexbor has no incremental mode here.

Rules:

1. ``data`` is valid UTF-8 (``page_encoding.utf8`` made it so); selectolax is
   asked to read it as UTF-8 and nothing else (no ``<meta charset>``
   sniffing, which ``parse`` rule 4 already did).
2. Scripting is off, so a ``<noscript>``'s markup is read, as libxml2 reads
   it (a crawler sees what a browser without JavaScript sees).
3. One selector, ``[href]`` (and rule 5's two tags), yields the elements
   in document order; of those with an ``href``, the ``<a>``, ``<area>``
   and ``<base>`` are kept (by lexbor's tag id). An element whose only
   ``href`` is in another namespace (an SVG ``xlink:href``) matches
   ``[href]`` but has no plain ``href``, and is skipped, as libxml2's
   attribute ``xlink:href`` is.
4. A bare ``<a href>`` links to ``""`` (the page itself), as in libxml2 and
   the Standard; selectolax gives a valueless attribute as ``None``.
5. A page with a ``<template>`` or a ``<frameset>`` element is left to
   libxml2 (``None``): the same selector finds them, so spotting them costs
   no second pass. The Standard keeps a template's contents out of the
   document and drops the body of a page that has a frameset; libxml2 reads
   both as ordinary elements, as the crawl always has.
"""

from __future__ import annotations

from typing import Any, Final

from selectolax.lexbor import LexborHTMLParser

__all__ = ["html_links"]

#: Rule 5: elements whose markup the Standard keeps out of the document.
_HIDING: Final = ("template", "frameset")
#: Every element with an ``href``, in document order, and rule 5's two. The
#: loop keeps ``<a>``, ``<area>`` and ``<base>`` by lexbor's tag id: one
#: attribute test an element costs lexbor a third less than a tag and an
#: attribute test for each of three selectors, more than the few other
#: elements with an ``href`` (``<link>``) cost the loop.
_SELECTOR: Final = "[href], template, frameset"


def _tag_ids() -> tuple[int, int, int, frozenset[int]]:
    """lexbor's ids of ``<a>``, ``<area>``, ``<base>`` and rule 5's two tags,
    read from lexbor itself (a one-line parse at import): the loop compares
    an element's id, an int, instead of building its name, a new str a link."""
    ids = {}
    for markup in (b"<a href><area href><base href><template></template>", b"<frameset>"):
        for node in LexborHTMLParser(markup, encoding=False, scripting=False).css(_SELECTOR):
            ids[node.tag] = node.tag_id
    return ids["a"], ids["area"], ids["base"], frozenset(ids[tag] for tag in _HIDING)


_A, _AREA, _BASE, _HIDING_IDS = _tag_ids()
#: an ``href`` that is not there (rule 3); a valueless one reads ``None``
_ABSENT: Final[Any] = object()


def html_links(data: bytes) -> tuple[str | None, list[str]] | None:
    """(first ``<base href>``, the ``href`` of each ``<a>`` and ``<area>``),
    fragments cut as ``parse`` rule 1 cuts them; ``None`` for a page that
    libxml2 must read (rule 5)."""
    base: str | None = None
    hrefs: list[str] = []
    for node in LexborHTMLParser(data, encoding=False, scripting=False).css(_SELECTOR):
        tag = node.tag_id
        if tag != _A and tag != _AREA and tag != _BASE:
            if tag in _HIDING_IDS:
                return None
            continue  # another element with an href: <link>, <image>...
        value: str | None = node.attrs.get("href", _ABSENT)
        if value is _ABSENT:
            continue  # rule 3: xlink:href and the like
        href = value or ""  # rule 4: a bare ``href`` is ""
        if tag == _BASE:
            if base is None:
                base = href
            continue
        cut = href.find("#")  # parse._cut_fragment, inlined (rule 1 of parse)
        if cut == 0:
            href = ""
        elif cut > 0 and href[cut - 1] > " ":
            href = href[:cut]
        hrefs.append(href)
    return base, hrefs
