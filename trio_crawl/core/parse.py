"""Pure HTML work: find a page's links (the hot path), its requisites, and
parse trees for handlers.

``extract_links`` is the crawl's per-page path; ``iter_link_chunks`` gives
the same links in chunks while parsing, for huge pages (rule 7).
``extract_links_and_requisites``
gives the same links and the page's requisites (``requisites.py`` says which)
from one parse, for ``--page-requisites``; ``stylesheet.stylesheet_urls``
gives those of a fetched stylesheet.

The rules below are this module's contract; the work is shared by modules
of one job each: ``page_encoding.py`` (rule 4), ``html_links.py`` (rule 8's
lexbor), ``libxml2_links.py`` (rules 1, 2 and 5 with libxml2, no tree),
``push_parse.py`` (rule 6), ``tokenized.py`` (rule 5's fallback) and
``stylesheet.py`` (a fetched stylesheet's requisites). This module chooses
between them and resolves what they found.

Rules:

1. Links are the ``href`` of ``<a>`` and ``<area>`` elements, resolved as a
   browser resolves them and canonicalized (``url.resolve_many``): http(s)
   only, fragments dropped, de-duplicated, first-seen order. The fragment is
   cut from each raw href before resolution (``_cut_fragment``): in the WHATWG
   parser the first ``#`` ends whatever precedes it in every state, so the
   result is the same (unless whitespace precedes the ``#``: then it is kept),
   and the repeats this makes (``os.html#a``, ``os.html#b``) are skipped before
   they are parsed (9x fewer URL parses on the Python docs' API pages).
2. The first ``<base href>`` in document order, wherever it sits, is the base of
   every link, earlier ones included; it is itself resolved against the
   document URL, and if that fails or yields a ``data:``/``javascript:`` URL
   the document URL is used (the HTML Standard's "frozen base URL").
3. Only HTML content types are parsed (``http.is_html_content_type``; a
   missing type counts as HTML); others give ``[]``.
4. Bytes never make us raise. The encoding is chosen as the HTML Standard's
   sniffing does, in this order: a byte order mark; the ``charset`` of the
   Content-Type header, if Python knows it; a ``<meta charset>`` or
   ``<meta http-equiv content="...; charset=...">`` in the first 4 KiB; else
   UTF-8. Labels map as browsers map them (``iso-8859-1`` and ``ascii`` decode
   as windows-1252, ``gb2312`` as gb18030, ...). Undecodable bytes become
   U+FFFD. lxml always receives valid UTF-8 with the encoding forced, so it
   never second-guesses us from a ``<meta>``, and a wrong label cannot make it
   drop the rest of the page.
5. Malformed HTML is libxml2's to recover from, as browsers do, with two
   repairs where libxml2 differs from them. It drops everything after
   ``</html>``, where browsers go on parsing into the body: when a start tag
   (a link, a ``<base>``, a tracker's ``<script src>``) follows the first
   ``</html>``, the ``</html>`` tags are removed before parsing. And
   past its nesting limit (2048 open elements even with ``huge_tree``) libxml2's
   tree builder stops; then the whole page is re-read with the stdlib's
   streaming tokenizer (no tree, no depth limit; slow, but only for such
   pages). ``extract_links`` builds no tree (a parser target), so it never
   meets that limit: libxml2 reads a deep page to its end, as any other.
6. Bodies of 1 MiB and more are parsed incrementally (libxml2's push parser,
   256 KiB at a time; smaller chunks cost libxml2 more), only the tags that
   matter raising events, and every finished element deleted after each
   chunk: a 2.6 MB page then costs ~8 MB of memory instead of ~32 MB for its
   whole tree, for ~40 % more CPU time on such pages. The links are the
   same as from the whole tree (checked on every page of the Python docs and
   by the tests with every body streamed, in chunks down to 3 bytes). The push
   parser stops silently where the tree parser reports the nesting limit; the
   element it stopped in is then 2048 deep, which sends the page to the
   tokenizer too (as it does a page whose last element is that deep).
7. ``iter_link_chunks`` hands a big page's links out as the push parser
   finds them, resolved ``LINK_CHUNK`` (8,192) hrefs at a time, so that no
   list, set or canonical string of them all ever exists: the crawl's link
   pipeline for a page of 1,000,000 links is a few chunks, not ~240 MB. Rule
   2 still holds: when the body has no ``<base`` the base is the document
   URL from the start; else the raw hrefs wait until the parse meets the
   ``<base href>`` (in the head, as a rule) or the end. On a page libxml2
   gives up on (rule 5), the chunks already handed out were libxml2's, and
   the tokenizer's links for the whole page follow: a superset of
   ``extract_links`` that equals it whenever the two parsers agree on the
   part libxml2 read (every page in the tests). libxml2 itself keeps the
   pushed input (it does not shrink it in push mode) and interns short text
   nodes, so parsing a body costs up to about its size again.
8. ``extract_links`` reads a body under 1 MiB with lexbor, the HTML
   Standard's parser (``html_links``): the same links as libxml2's on every
   real page tried, in about two thirds of the time. Where they differ, on
   markup no site writes on purpose (a ``<title>`` left open, a ``<`` in an
   unquoted ``href``, misnested tables), lexbor reads it as a browser does.
   A page with a ``<template>`` or a ``<frameset>`` goes to libxml2 (rules
   1-5), which reads their markup as ordinary elements; so does every body
   from 1 MiB up (rule 6) and ``--page-requisites``' one tree for links and
   requisites. lxml, and the tokenizer (``tokenized``), are imported on
   first use: a crawl whose pages all go to lexbor never loads them (~5 ms
   of its start-up).

Speed, before rule 8 (bench_links, 15 KB page, 30 links; ``benchmarks/README.md``): libxml2's
parse is ~70% of ``extract_links``. ``extract_links`` builds no tree: libxml2
hands each start tag to a parser target (``libxml2_links._LinkTarget``), the
one link loop (``read_elements``) written as a callback, so no node is allocated and none
freed: 8 % less time on the PostgreSQL docs' pages, 16 % on libstdc++'s
(lxml 6.1, libxml2 2.14; its hrefs, base and completeness equal the tree's
on every page of those two trees and the Python docs, and the streaming
tests compare it with the push parser on random bytes). The parsers that do
build a tree for links (requisites, the push parser) build no table of
``id`` attributes (``collect_ids=False``), which nothing here reads: 3-7 %
less parse time. ``parse_html`` keeps the table (a handler may look
elements up by id).
Measured and rejected: ``lxml.html`` element classes (the same parse, twice
the iteration cost), an XPath union with smart strings to spot ``<base>``
(slower than ``iter`` with a tag check), ``iterparse`` (no faster than
building the tree), ``iterlinks`` (4x slower, and it returns every kind of
link), parsing ``str`` (fails on XML declarations). selectolax/lexbor
(bench_extractors, ``benchmarks/README.md``) parses 2-3x faster, but reading nodes
from Python costs it more: end to end ~25 % faster on the synthetic page and
~30 % on the Python and PostgreSQL docs, with the same links: rule 8, for
the pages it suits (``html_links`` says which, and why).
A new parser per call costs 0.5 us and keeps the function safe to run in
worker threads; the link parser, whose target lxml inspects when it is made
(~10 us), is made once per thread instead.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Final

from .content_type import is_html_content_type
from .html_links import html_links
from .page_encoding import utf8
from .url import join, resolve_many

if TYPE_CHECKING:
    import lxml.html
    from lxml import etree

__all__ = [
    "LINK_CHUNK",
    "extract_links",
    "extract_links_and_requisites",
    "extract_requisites",
    "iter_link_chunks",
    "parse_html",
]

#: Rule 6: bodies from this size up are parsed incrementally (the engine's
#: default ``thread_parse_bytes``: such pages are parsed in threads, two at once).
_STREAM_BYTES: Final = 1024 * 1024
#: Rule 8: bodies under this size are read by lexbor (``html_links``).
_LEXBOR_BYTES: Final = _STREAM_BYTES


def _cut_fragment(href: str) -> str:
    """Rule 1: ``href`` without its fragment, when that cannot change what it
    resolves to: not when C0 controls or spaces precede the ``#`` (``"a #"``
    is ``a%20``, but ``"a "`` would lose the space to stripping). Inlined in
    the link loops (``read_elements``, ``libxml2_links._LinkTarget``, ``html_links``: it
    runs for every link)."""
    cut = href.find("#")
    if cut == 0:
        return ""
    if cut > 0 and href[cut - 1] > " ":
        return href[:cut]
    return href


def _frozen_base(href: str, document_url: str) -> str:
    """Rule 2: the base URL that a ``<base href>`` sets."""
    base = join(href, document_url)
    if base is None or base.startswith(("data:", "javascript:")):
        return document_url
    return base


def _link_parser() -> etree.HTMLParser:
    """A parser for the link and requisite extractors: no ``id`` table, which
    they never read (``collect_ids=False``: less work per element)."""
    from lxml import etree

    return etree.HTMLParser(encoding="utf-8", huge_tree=True, collect_ids=False)


def _fromstring(data: bytes, parser: etree.HTMLParser) -> tuple[etree._Element | None, bool]:
    """(root, complete): the tree libxml2 recovered, and False when it gave up
    part-way (a fatal error, such as the nesting limit)."""
    from lxml import etree

    try:
        root = etree.fromstring(data, parser)
    except etree.LxmlError:
        return None, False
    last = parser.error_log.last_error
    return root, last is None or last.level != etree.ErrorLevels.FATAL


def extract_links(body: bytes, url: str, content_type: str | None) -> list[str]:
    """The canonical http(s) links of an HTML page (rules 1-5), in first-seen
    order, without duplicates. ``url`` is the page's own (canonical) URL.

    Returns ``[]`` for empty bodies and non-HTML content types. Never raises
    because of the body's content.
    """
    if not body or not is_html_content_type(content_type):
        return []
    data = utf8(body, content_type)
    found = html_links(data) if len(data) < _LEXBOR_BYTES else None  # rule 8
    if found is not None:
        base, hrefs = found
        if not hrefs:
            return []
        return resolve_many(hrefs, url if base is None else _frozen_base(base, url))
    # Pages lexbor does not read (rule 8) and requisites load libxml2's
    # link loops on first use: a plain crawl of small pages never compiles
    # their rules (issue #36 item 11).
    from .libxml2_links import parse_links, reopen_html_end, tokenize_links
    from .push_parse import stream

    data = reopen_html_end(data)
    if len(data) >= _STREAM_BYTES:
        streamed = stream(data, requisites=False)
        if streamed is None:
            base, hrefs = tokenize_links(data)
        else:
            base, hrefs, _ = streamed
        if not hrefs:
            return []
        return resolve_many(hrefs, url if base is None else _frozen_base(base, url))
    parsed = parse_links(data)
    base, hrefs = tokenize_links(data) if parsed is None else parsed
    if not hrefs:
        return []
    return resolve_many(hrefs, url if base is None else _frozen_base(base, url))


#: Rule 7: the most links ``iter_link_chunks`` hands out at once (the SQLite
#: frontier writes one transaction per chunk).
LINK_CHUNK: Final = 8192
#: Rule 7: a ``<base`` start tag, or text that might be one (in a comment, a
#: script): the base of a page without it is known before parsing.
_BASE_TAG: Final = re.compile(rb"<base(?![\w:.-])", re.I)


def iter_link_chunks(
    body: bytes, url: str, content_type: str | None, *, size: int = LINK_CHUNK
) -> Generator[list[str], None, None]:
    """``extract_links`` handed out in chunks of at most ``size`` links, as
    the page is parsed (rule 7), so that a huge page's links are never all
    in memory at once. Each chunk is de-duplicated and canonical; a link may
    come again in a later chunk (``DistinctCounter`` counts them once). The
    chunks are ``extract_links`` in order, split, except on a page libxml2
    gives up on: see rule 7. Never raises because of the body's content.
    """
    if not body or not is_html_content_type(content_type):
        return
    from .libxml2_links import reopen_html_end, tokenize_links
    from .push_parse import PushParse

    data = reopen_html_end(utf8(body, content_type))
    if len(data) < _STREAM_BYTES:
        links = extract_links(body, url, content_type)  # rare: 1 MiB once transcoded
        for start in range(0, len(links), size):
            yield links[start : start + size]
        return
    push = PushParse(data, requisites=False)
    # Rule 2: the base applies to the links before it too. Without a <base
    # anywhere it is the document URL from the start; else the hrefs wait
    # (raw) until the parse meets it, or the end.
    base_url: str | None = url if _BASE_TAG.search(data) is None else None
    waiting: list[str] = []
    for hrefs, _ in push.batches():
        if base_url is None and push.base is not None:
            base_url = _frozen_base(push.base, url)
        if base_url is None:
            waiting += hrefs
            continue
        if waiting:
            hrefs, waiting = waiting + hrefs, []
        yield from _resolved_chunks(hrefs, base_url, size)
    if push.failed:  # rule 5's fallback, for the whole page
        base, waiting = tokenize_links(data)
        base_url = url if base is None else _frozen_base(base, url)
    yield from _resolved_chunks(waiting, base_url or url, size)


def _resolved_chunks(hrefs: list[str], base_url: str, size: int) -> Iterator[list[str]]:
    """``hrefs`` resolved, a chunk of at most ``size`` at a time."""
    for start in range(0, len(hrefs), size):
        links = resolve_many(hrefs[start : start + size], base_url)
        if links:
            yield links


@functools.cache
def _style_with_paren() -> etree.XPath:
    """Whether a tree has a style attribute with a ``(`` (a url() maybe)."""
    from lxml import etree

    return etree.XPath("boolean(//@style[contains(., '(')])")


def extract_links_and_requisites(
    body: bytes, url: str, content_type: str | None
) -> tuple[list[str], list[str]]:
    """``(links, requisites)`` of an HTML page from one parse: ``links`` is
    ``extract_links(body, url, content_type)`` (on a page nested past
    libxml2's tree limit, rule 5, these come from the tokenizer and
    ``extract_links``'s from libxml2 without a tree), ``requisites`` the
    canonical http(s) URLs of the resources the page needs (``requisites.py``,
    rule 1), resolved against the same base, de-duplicated in first-seen
    order. The two lists are independent: a URL can be in both (an
    ``<iframe>`` whose page is also linked). Never raises because of the body.
    """
    if not body or not is_html_content_type(content_type):
        return [], []
    from .libxml2_links import WALK_TAGS, read_elements, reopen_html_end
    from .push_parse import stream

    data = reopen_html_end(utf8(body, content_type))
    base: str | None = None
    hrefs: list[str] = []
    refs: list[str] = []
    streamed = stream(data, requisites=True) if len(data) >= _STREAM_BYTES else None
    root, complete = None, streamed is not None
    if streamed is not None:
        base, hrefs, refs = streamed
    elif len(data) < _STREAM_BYTES:
        root, complete = _fromstring(data, _link_parser())
    if not complete:
        from .tokenized import RequisiteTokenizer, tokenize

        tokenizer = RequisiteTokenizer()
        base, hrefs = tokenize(data, tokenizer)
        refs = tokenizer.refs
    elif root is not None:
        # Every element when a style attribute may hold a url(); else only the
        # tags that matter, which is ~6x cheaper (proxies for 5 % of the nodes).
        from lxml import etree

        styled = bool(_style_with_paren()(root))
        elements = root.iter(etree.Element) if styled else root.iter(*WALK_TAGS)
        base = read_elements(elements, hrefs, refs)
    if not hrefs and not refs:
        return [], []
    base_url = url if base is None else _frozen_base(base, url)
    return (
        resolve_many(hrefs, base_url) if hrefs else [],
        resolve_many(refs, base_url) if refs else [],
    )


def extract_requisites(body: bytes, url: str, content_type: str | None) -> list[str]:
    """The page requisites of an HTML page (``requisites.py``, rule 1): the
    canonical http(s) URLs of the images, scripts, stylesheets, icons, frames,
    media and CSS ``url()``s it needs, resolved like ``extract_links`` (rules
    2-5), de-duplicated in first-seen order. ``[]`` for non-HTML. Use
    ``extract_links_and_requisites`` to get the links from the same parse."""
    return extract_links_and_requisites(body, url, content_type)[1]


def parse_html(body: bytes, content_type: str | None) -> lxml.html.HtmlElement | None:
    """The ``lxml.html`` tree of an HTML page, for handlers (``page.tree``).

    Same decoding as ``extract_links`` (rule 4). ``None`` for non-HTML content
    types and for bodies with no elements. A page past libxml2's nesting limit
    gives the part parsed before it.
    """
    if not body or not is_html_content_type(content_type):
        return None
    import lxml.html  # for handlers only: the crawl's own parse needs lxml.etree alone

    from .libxml2_links import reopen_html_end

    parser = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)
    root, _ = _fromstring(reopen_html_end(utf8(body, content_type)), parser)
    return root  # lxml.html's parser builds HtmlElements
