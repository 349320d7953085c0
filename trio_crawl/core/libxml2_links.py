"""A page's links as libxml2 reads it, with no tree: rules 1, 2 and 5 of
``core/parse.py`` for the pages lexbor does not read (rule 8).

``parse_links`` hands each start tag to a parser target (``_LinkTarget``)
and ``read_elements`` is the same link loop over elements a tree or the
push parser (``core/push_parse.py``) gives; both cut fragments (rule 1) and
keep the first ``<base href>`` (rule 2). ``reopen_html_end`` is rule 5's
repair for markup after ``</html>``, ``tokenize_links`` its fallback where
libxml2 gives up (the stdlib's tokenizer, ``core/tokenized.py``). lxml is
imported on first use: a crawl whose pages all go to lexbor never loads it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from .requisites import REQUISITE_TAGS, css_refs, element_refs

if TYPE_CHECKING:
    from lxml import etree

__all__ = [
    "LINK_TAGS",
    "WALK_TAGS",
    "parse_links",
    "read_elements",
    "reopen_html_end",
    "tokenize_links",
]

LINK_TAGS: Final = frozenset({"a", "area", "base"})
WALK_TAGS: Final = tuple(sorted(LINK_TAGS | REQUISITE_TAGS))


_HTML_END: Final = re.compile(rb"</html[^>]*>", re.I)


_START_TAG: Final = re.compile(rb"<[A-Za-z]")


def reopen_html_end(data: bytes) -> bytes:
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


class _LinkTarget:
    """``read_elements`` for ``extract_links`` as a parser target: libxml2
    calls ``start`` for each start tag, in document order, and no tree is
    built. The ``href`` of each ``<a>`` and ``<area>`` goes to ``hrefs``, its
    fragment cut (rule 1, ``parse._cut_fragment`` inlined), and the first
    ``<base href>`` is ``base`` (rule 2)."""

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


def parse_links(data: bytes) -> tuple[str | None, list[str]] | None:
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


def tokenize_links(data: bytes) -> tuple[str | None, list[str]]:
    """Rule 5's fallback: (base, hrefs) from the stdlib's tokenizer."""
    from .tokenized import LinkTokenizer, tokenize

    return tokenize(data, LinkTokenizer())


def read_elements(
    elements: Iterable[etree._Element],
    hrefs: list[str],
    refs: list[str] | None = None,
    base: str | None = None,
    *,
    style_text: bool = True,
) -> str | None:
    """The one link loop, over elements in document order: the ``href`` of
    each ``<a>`` and ``<area>`` goes to ``hrefs``, its fragment cut (rule 1,
    ``parse._cut_fragment`` inlined: this runs for every link), and the first
    ``<base href>`` is returned (``base`` when one came before: rule 2).
    With ``refs``, each element's raw requisites go there too
    (``requisites.py``); ``style_text=False``: a ``<style>``'s text is not
    complete yet (the push parser reads it at the element's end)."""
    link_tags = LINK_TAGS
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
