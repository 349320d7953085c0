"""Pure HTML work: find a page's links (the hot path), its requisites, and
parse trees for handlers.

``extract_links`` is the crawl's per-page path; ``iter_link_chunks`` gives
the same links in chunks while parsing, for huge pages (rule 7).
``extract_links_and_requisites``
gives the same links and the page's requisites (``requisites.py`` says which)
from one parse, for ``--page-requisites``; ``stylesheet_urls`` gives those of a
fetched stylesheet.

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
hands each start tag to a parser target (``_LinkTarget``), the one link loop
(``_read_elements``) written as a callback, so no node is allocated and none
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

import codecs
import functools
import re
import threading
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Final, Literal

from .content_type import is_html_content_type
from .html_links import html_links
from .requisites import REQUISITE_TAGS, css_refs, element_refs, extract_css_urls
from .url import join, resolve_many

if TYPE_CHECKING:
    import lxml.html
    from lxml import etree

__all__ = [
    "decode_css",
    "extract_css_urls",
    "extract_links",
    "extract_links_and_requisites",
    "extract_requisites",
    "iter_link_chunks",
    "parse_html",
    "stylesheet_urls",
]

#: Python codec names (as ``codecs.lookup`` spells them) that browsers decode
#: with a different, wider codec (WHATWG Encoding Standard, "Encodings" table).
_BROWSER_CODEC: Final = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
    "utf-16": "utf-16-le",
}
#: Codecs Python knows but no browser would apply to a page.
_NOT_PAGE_CODECS: Final = frozenset(
    {
        *("undefined", "idna", "punycode", "unicode-escape", "raw-unicode-escape"),
        *("utf-7", "utf-32", "utf-32-le", "utf-32-be"),
    }
)
_CHARSET_PARAM: Final = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.I)
_META_CHARSET: Final = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([^\s"'/>;]+)""", re.I)
_META_SCAN: Final = 4096


@functools.lru_cache(maxsize=256)
def _codec(label: str) -> str | None:
    """The Python codec a browser would use for an encoding label, or None.
    Cached: every page of a site names the same charset."""
    try:
        info = codecs.lookup(label.strip())
    except (LookupError, ValueError):  # ValueError: embedded NUL
        return None
    name = info.name
    if name in _NOT_PAGE_CODECS or not getattr(info, "_is_text_encoding", True):
        return None
    return _BROWSER_CODEC.get(name, name)


def _sniff(body: bytes, content_type: str | None) -> str:
    """Rule 4: the codec to decode ``body`` with."""
    if body.startswith(b"\xef\xbb\xbf"):
        return "utf-8"  # libxml2 skips the BOM itself
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"  # Python reads the BOM and picks the byte order
    if content_type:
        match = _CHARSET_PARAM.search(content_type)
        if match is not None:
            codec = _codec(match.group(1))
            if codec is not None:
                return codec
    meta = _META_CHARSET.search(body, 0, _META_SCAN)
    if meta is not None:
        codec = _codec(meta.group(1).decode("latin-1"))
        if codec is not None:
            # A page that could be read as ASCII to find this label is not UTF-16.
            return "utf-8" if codec.startswith("utf-16") else codec
    return "utf-8"


def _utf8(body: bytes, content_type: str | None) -> bytes:
    """``body`` as valid UTF-8, decoded per rule 4; ``body`` itself (no copy)
    when it is valid UTF-8 already."""
    codec = _sniff(body, content_type)
    if codec == "utf-8":
        if body.isascii():  # no copy of a huge page to validate it (and ~10x faster)
            return body
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return body.decode("utf-8", "replace").encode()
        return body
    try:
        text = body.decode(codec, "replace")
    except Exception:  # a codec that fails even with errors="replace": read as UTF-8
        text = body.decode("utf-8", "replace")
    return text.encode("utf-8", "replace")


_HTML_END: Final = re.compile(rb"</html[^>]*>", re.I)


_START_TAG: Final = re.compile(rb"<[A-Za-z]")


def _reopen_html_end(data: bytes) -> bytes:
    """Rule 5's first repair: ``data`` without ``</html>`` tags when a start
    tag follows the first one (a link, a ``<base>``, a requisite such as the
    ``<script src>`` of a tracker), else ``data`` itself.

    ``rfind`` from the end is the cheap scan here (~3 us on a 15 KB page), so
    the first ``</html`` is found by walking back from the last one; a page
    that mixes cases (``</Html>``) is not looked at."""
    first = -1
    for needle in (b"</html", b"</HTML"):
        at = data.rfind(needle)
        while at >= 0:
            first = at
            at = data.rfind(needle, 0, at)
        if first >= 0:
            break
    if first < 0 or _START_TAG.search(data, first) is None:
        return data
    return _HTML_END.sub(b"", data)


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


class _LinkTarget:
    """``_read_elements`` for ``extract_links`` as a parser target: libxml2
    calls ``start`` for each start tag, in document order, and no tree is
    built. The ``href`` of each ``<a>`` and ``<area>`` goes to ``hrefs``, its
    fragment cut (rule 1, ``_cut_fragment`` inlined), and the first ``<base
    href>`` is ``base`` (rule 2)."""

    __slots__ = ("base", "hrefs")

    def __init__(self) -> None:
        self.base: str | None = None
        self.hrefs: list[str] = []

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        if tag == "a" or tag == "area":
            href = attrib.get("href")
            if href is not None:
                cut = href.find("#")
                if cut == 0:
                    href = ""
                elif cut > 0 and href[cut - 1] > " ":
                    href = href[:cut]
                self.hrefs.append(href)
        elif tag == "base" and self.base is None:
            self.base = attrib.get("href")

    def close(self) -> None:
        return None


#: Each thread's link parser and its target, made once: lxml inspects a
#: target's ``start`` (``inspect.signature``, ~10 us) when a parser is made
#: with it. A parser serves one parse at a time, so one per thread.
_LINK_PARSERS: Final = threading.local()


def _parse_links(data: bytes) -> tuple[str | None, list[str]] | None:
    """(base, hrefs) of ``data`` through ``_LinkTarget``; None when libxml2
    gave up part-way (rule 5: the caller reads the page with the tokenizer)."""
    from lxml import etree

    made: tuple[etree.HTMLParser, _LinkTarget] | None = getattr(_LINK_PARSERS, "made", None)
    if made is None:
        target = _LinkTarget()
        # The stubs' ParserTarget lists every callback; lxml calls only those a
        # target has, and a ``data`` or ``end`` would cost a call per text or tag.
        parser = etree.HTMLParser(
            encoding="utf-8",
            huge_tree=True,
            collect_ids=False,
            target=target,  # type: ignore[arg-type]
        )
        made = _LINK_PARSERS.made = (parser, target)
    parser, target = made
    target.base, target.hrefs = None, []
    try:
        etree.fromstring(data, parser)
    except etree.LxmlError:
        return None
    last = parser.error_log.last_error
    if last is not None and last.level == etree.ErrorLevels.FATAL:
        return None
    return target.base, target.hrefs


def _tokenize_links(data: bytes) -> tuple[str | None, list[str]]:
    """Rule 5's fallback: (base, hrefs) from the stdlib's tokenizer."""
    from .tokenized import LinkTokenizer, tokenize

    return tokenize(data, LinkTokenizer())


def _cut_fragment(href: str) -> str:
    """Rule 1: ``href`` without its fragment, when that cannot change what it
    resolves to: not when C0 controls or spaces precede the ``#`` (``"a #"``
    is ``a%20``, but ``"a "`` would lose the space to stripping). Inlined in
    the link loops (``_read_elements``, ``_LinkTarget``, ``html_links``: it
    runs for every link)."""
    cut = href.find("#")
    if cut == 0:
        return ""
    if cut > 0 and href[cut - 1] > " ":
        return href[:cut]
    return href


def _read_elements(
    elements: Iterable[etree._Element],
    hrefs: list[str],
    refs: list[str] | None = None,
    base: str | None = None,
    *,
    style_text: bool = True,
) -> str | None:
    """The one link loop, over elements in document order: the ``href`` of
    each ``<a>`` and ``<area>`` goes to ``hrefs``, its fragment cut (rule 1,
    ``_cut_fragment`` inlined: this runs for every link), and the first
    ``<base href>`` is returned (``base`` when one came before: rule 2).
    With ``refs``, each element's raw requisites go there too
    (``requisites.py``); ``style_text=False``: a ``<style>``'s text is not
    complete yet (the push parser reads it at the element's end)."""
    link_tags = _LINK_TAGS
    requisite_tags = REQUISITE_TAGS
    for element in elements:
        tag = element.tag
        get = element.get
        if tag in link_tags:
            href = get("href")
            if href is not None:
                if tag != "base":
                    cut = href.find("#")
                    if cut == 0:
                        href = ""
                    elif cut > 0 and href[cut - 1] > " ":
                        href = href[:cut]
                    hrefs.append(href)
                elif base is None:
                    base = href
            if refs is None:
                continue
        elif refs is None:
            continue
        elif tag in requisite_tags:
            if tag != "style":
                element_refs(tag, get, None, refs)
            elif style_text:
                element_refs(tag, get, element.text, refs)
            continue
        style = get("style")  # a url() in any element's style attribute
        if style and "(" in style:
            refs.extend(css_refs(style))
    return base


def _frozen_base(href: str, document_url: str) -> str:
    """Rule 2: the base URL that a ``<base href>`` sets."""
    base = join(href, document_url)
    if base is None or base.startswith(("data:", "javascript:")):
        return document_url
    return base


#: Rule 6: bodies from this size up are parsed incrementally (the engine's
#: default ``thread_parse_bytes``: such pages are parsed in threads, two at once).
_STREAM_BYTES: Final = 1024 * 1024
_STREAM_CHUNK: Final = 256 * 1024
#: Rule 8: bodies under this size are read by lexbor (``html_links``).
_LEXBOR_BYTES: Final = _STREAM_BYTES


_STYLE_ATTRIBUTE: Final = re.compile(rb"style\s*=", re.I)
#: libxml2's nesting limit: the depth of the last element when it stops.
_LIBXML2_MAX_DEPTH: Final = 2048


class _PushParse:
    """Rule 6: libxml2's push parser over ``data``, read one chunk at a time.

    ``batches`` yields the hrefs (fragments cut, rule 1) and raw requisites
    found in each chunk fed; ``base`` is the first ``<base href>`` seen so
    far; ``failed`` is set at the end when libxml2 gave up part-way (the
    caller falls back to the tokenizer, as with a whole tree).

    Only the tags that matter raise events (libxml2 filters them), and after
    each chunk every finished element is deleted: all but the last child at
    each level of the path to the element being parsed."""

    def __init__(self, data: bytes, *, requisites: bool) -> None:
        self._data = data
        self._requisites = requisites
        self.base: str | None = None
        self.failed = False
        self._root: etree._Element | None = None

    def batches(self) -> Iterator[tuple[list[str], list[str]]]:
        from lxml import etree

        data = self._data
        requisites = self._requisites
        tags: set[str] | None = {"html", *_LINK_TAGS}
        if requisites:
            # A style attribute may be on any element: then every element counts.
            tags = None if _STYLE_ATTRIBUTE.search(data) else {"html", *_WALK_TAGS}
        # End events only for <style> text: 20,000 links make 20,000 more events.
        events: tuple[Literal["start", "end"], ...] = (
            ("start", "end") if requisites else ("start",)
        )
        parser = etree.HTMLPullParser(
            events=events, tag=tags, encoding="utf-8", huge_tree=True, collect_ids=False
        )
        try:
            for start in range(0, len(data), _STREAM_CHUNK):
                parser.feed(data[start : start + _STREAM_CHUNK])
                yield self._drain(parser)
                self._prune()
            parser.close()
        except etree.LxmlError:
            self.failed = True
            return
        yield self._drain(parser)
        last = parser.error_log.last_error
        # At the nesting limit the push parser stops silently, its last element
        # 2048 deep (where a page that ends at that depth is sent as well).
        if self._prune() >= _LIBXML2_MAX_DEPTH or (
            last is not None and last.level == etree.ErrorLevels.FATAL
        ):
            self.failed = True

    def _drain(self, parser: etree.HTMLPullParser) -> tuple[list[str], list[str]]:
        """The hrefs and raw requisites of the events parsed so far."""
        hrefs: list[str] = []
        refs: list[str] = []
        self.base = _read_elements(
            self._started(parser.read_events(), refs),
            hrefs,
            refs if self._requisites else None,
            self.base,
            style_text=False,
        )
        return hrefs, refs

    def _started(
        self, events: Iterator[tuple[str, object]], refs: list[str]
    ) -> Iterator[etree._Element]:
        """The elements of the start events; the end event of a ``<style>``
        (asked for with requisites only) gives its text's requisites."""
        from lxml import etree

        for event, element in events:
            if not isinstance(element, etree._Element):
                continue  # not with these events; for the type checker
            if event == "end":
                if element.tag == "style":
                    element_refs("style", element.get, element.text, refs)
                continue
            if self._root is None:
                self._root = element.getroottree().getroot()
            yield element

    def _prune(self) -> int:
        """Delete every element before the last one inserted, on its path
        from the root (they are finished); the length of that path."""
        depth = 0
        node = self._root
        while node is not None:
            depth += 1
            if not len(node):
                break
            if len(node) > 1:
                del node[:-1]
            node = node[-1]
        return depth


def _stream(data: bytes, *, requisites: bool) -> tuple[str | None, list[str], list[str]] | None:
    """Rule 6: (base, hrefs, raw requisites) of ``data`` from libxml2's push
    parser; None when libxml2 gave up part-way."""
    push = _PushParse(data, requisites=requisites)
    hrefs: list[str] = []
    refs: list[str] = []
    for found, needed in push.batches():
        hrefs += found
        refs += needed
    return None if push.failed else (push.base, hrefs, refs)


def extract_links(body: bytes, url: str, content_type: str | None) -> list[str]:
    """The canonical http(s) links of an HTML page (rules 1-5), in first-seen
    order, without duplicates. ``url`` is the page's own (canonical) URL.

    Returns ``[]`` for empty bodies and non-HTML content types. Never raises
    because of the body's content.
    """
    if not body or not is_html_content_type(content_type):
        return []
    data = _utf8(body, content_type)
    found = html_links(data) if len(data) < _LEXBOR_BYTES else None  # rule 8
    if found is not None:
        base, hrefs = found
        if not hrefs:
            return []
        return resolve_many(hrefs, url if base is None else _frozen_base(base, url))
    data = _reopen_html_end(data)
    if len(data) >= _STREAM_BYTES:
        streamed = _stream(data, requisites=False)
        if streamed is None:
            base, hrefs = _tokenize_links(data)
        else:
            base, hrefs, _ = streamed
        if not hrefs:
            return []
        return resolve_many(hrefs, url if base is None else _frozen_base(base, url))
    parsed = _parse_links(data)
    base, hrefs = _tokenize_links(data) if parsed is None else parsed
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
    data = _reopen_html_end(_utf8(body, content_type))
    if len(data) < _STREAM_BYTES:
        links = extract_links(body, url, content_type)  # rare: 1 MiB once transcoded
        for start in range(0, len(links), size):
            yield links[start : start + size]
        return
    push = _PushParse(data, requisites=False)
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
        base, waiting = _tokenize_links(data)
        base_url = url if base is None else _frozen_base(base, url)
    yield from _resolved_chunks(waiting, base_url or url, size)


def _resolved_chunks(hrefs: list[str], base_url: str, size: int) -> Iterator[list[str]]:
    """``hrefs`` resolved, a chunk of at most ``size`` at a time."""
    for start in range(0, len(hrefs), size):
        links = resolve_many(hrefs[start : start + size], base_url)
        if links:
            yield links


_LINK_TAGS: Final = frozenset({"a", "area", "base"})
_WALK_TAGS: Final = tuple(sorted(_LINK_TAGS | REQUISITE_TAGS))


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
    data = _reopen_html_end(_utf8(body, content_type))
    base: str | None = None
    hrefs: list[str] = []
    refs: list[str] = []
    streamed = _stream(data, requisites=True) if len(data) >= _STREAM_BYTES else None
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
        elements = root.iter(etree.Element) if styled else root.iter(*_WALK_TAGS)
        base = _read_elements(elements, hrefs, refs)
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


def decode_css(body: bytes, content_type: str | None) -> str:
    """A stylesheet's bytes as text, the encoding chosen as CSS Syntax 3.2
    chooses it: a byte order mark, else the ``charset`` of the Content-Type,
    else an ``@charset "...";`` at the very start (a UTF-16 label there means
    UTF-8), else UTF-8; labels map as for pages (rule 4). Undecodable bytes
    become U+FFFD. Never raises."""
    if body.startswith(b"\xef\xbb\xbf"):
        return body[3:].decode("utf-8", "replace")
    codec: str | None = None
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        codec = "utf-16"
    if codec is None and content_type:
        match = _CHARSET_PARAM.search(content_type)
        if match is not None:
            codec = _codec(match.group(1))
    if codec is None:
        declared = _CSS_CHARSET.match(body)
        if declared is not None:
            codec = _codec(declared.group(1).decode("latin-1"))
            if codec is not None and codec.startswith("utf-16"):
                codec = "utf-8"
    try:
        return body.decode(codec or "utf-8", "replace")
    except Exception:  # a codec that fails even with errors="replace": read as UTF-8
        return body.decode("utf-8", "replace")


_CSS_CHARSET: Final = re.compile(rb'@charset "([^"]{1,64})";')


def stylesheet_urls(body: bytes, url: str, content_type: str | None) -> list[str]:
    """The requisites of a fetched stylesheet: ``extract_css_urls`` of its text
    (``decode_css``) against its own ``url``. ``[]`` unless the content type is
    ``text/css`` or missing (browsers refuse other types for a stylesheet in
    standards mode). Never raises because of the body."""
    if not body:
        return []
    if content_type and content_type.split(";", 1)[0].strip().lower() != "text/css":
        return []
    return extract_css_urls(decode_css(body, content_type), url)


def decode_text(body: bytes, content_type: str | None) -> str:
    """``body`` as text, decoded the way ``extract_links`` reads it (rule 4)."""
    return _utf8(body, content_type).decode("utf-8")


def parse_html(body: bytes, content_type: str | None) -> lxml.html.HtmlElement | None:
    """The ``lxml.html`` tree of an HTML page, for handlers (``page.tree``).

    Same decoding as ``extract_links`` (rule 4). ``None`` for non-HTML content
    types and for bodies with no elements. A page past libxml2's nesting limit
    gives the part parsed before it.
    """
    if not body or not is_html_content_type(content_type):
        return None
    import lxml.html  # for handlers only: the crawl's own parse needs lxml.etree alone

    parser = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)
    root, _ = _fromstring(_reopen_html_end(_utf8(body, content_type)), parser)
    return root  # lxml.html's parser builds HtmlElements
