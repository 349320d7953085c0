"""Pure ``--convert-links``: rewrite the links of one saved page or stylesheet
for offline reading. No I/O, no trio: where a link's target was saved comes
from the ``lookup`` the caller gives (``mirror/convert.py`` asks the
mirror directory).

Rules:

1. A link whose target was saved becomes the relative path from this file to
   that file (``relative_href``), its ``#fragment`` kept. Any other http(s)
   link becomes the absolute URL it resolves to (so a relative link to a page
   that was not fetched still works online). ``mailto:``, ``javascript:``,
   ``data:``, fragment-only and invalid values are left as they are.
2. HTML links are those of ``requisites.py`` rule 1 plus ``<a>``/``<area>``
   ``href`` and every ``<link href>``: ``href``, ``src``, ``srcset``,
   ``imagesrcset``, ``poster``, ``data``, ``background`` of the elements that
   have them, and the URLs in ``style`` attributes and ``<style>`` elements.
   lxml parses the page and says which attribute values are links (resolved
   against ``<base href>`` when there is one); the bytes are then rewritten
   in place, attribute value by attribute value: everything else (spacing,
   quoting, entities, comments, the doctype, bytes lxml would repair) stays
   byte for byte. The trade-off against re-serializing lxml's tree: a value
   rewritten is found by its attribute name and exact value, so the same
   ``name="value"`` text inside a comment or script is rewritten too (to the
   same target, so it still means the same thing).
3. ``<base href>`` is renamed ``data-trio-crawl-base-href``: the rewritten
   relative links are relative to the saved file, so a base must not apply.
   This also makes a second conversion (a resumed crawl) give the same bytes
   for links whose targets did not change.
4. CSS (stylesheets, ``style`` attributes, ``<style>``): the values of
   ``url(...)`` (quoted or not) and ``@import "..."``, rewritten in place.
5. The page's bytes are read as UTF-8 with undecodable bytes kept as they
   are (``surrogateescape``), so any ASCII-compatible encoding round-trips; a
   UTF-16 page is left unconverted.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from lxml import etree

from ..core.url import join, resolve
from .layout import relative_href

#: A canonical URL -> the saved file's path components, or None if not saved.
Lookup = Callable[[str], tuple[str, ...] | None]

_ASCII_WS: Final = "\t\n\f\r "
#: First characters after which a value may depend on more of the base than
#: its directory (``url.resolve_many``'s rule): not memoized.
_WHOLE_BASE_FIRST: Final = frozenset([chr(i) for i in range(33)] + ["?", "#", "\\"])
_BACKGROUND: Final = ("body", "table", "thead", "tbody", "tfoot", "tr", "td", "th")
_LINK_ATTRIBUTES: Final[dict[str, tuple[str, ...]]] = {
    "a": ("href",),
    "area": ("href",),
    "link": ("href", "imagesrcset"),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "script": ("src",),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "track": ("src",),
    "audio": ("src",),
    "input": ("src",),
    "video": ("src", "poster"),
    "object": ("data",),
    **{tag: ("background",) for tag in _BACKGROUND},
}
#: The attribute names ``attribute_spans`` finds.
_NAMES: Final = ("href", "src", "srcset", "imagesrcset", "poster", "data", "background", "style")
#: What a case-insensitive ``str`` regular expression takes for these ASCII
#: letters besides their two cases (Unicode case folding): spelled out, the
#: search runs without ``re.I``, whose per-character folding made it a third
#: slower.
_FOLDS: Final = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}


def _any_case(word: str) -> str:
    return "".join(f"[{c}{c.upper()}{_FOLDS.get(c, '')}]" for c in word)


#: An attribute found in the text, read backwards (``attribute_spans``):
#: ``=``, spaces, one of ``_NAMES`` reversed in any case (group 1), then a
#: space, quote or ``/``.
_ATTRIBUTE_REVERSED: Final = re.compile(
    r"""=\s*(""" + "|".join(_any_case(name[::-1]) for name in _NAMES) + r""")[\s"'/]"""
)
_VALUE: Final = re.compile(r"""\s*("[^"]*"|'[^']*'|[^\s"'<>`]+)""")
_STYLE_ELEMENT: Final = re.compile(r"(<style\b[^>]*>)(.*?)(</style\s*>)", re.I | re.S)
#: Text that may hold a ``style`` attribute: libxml2 reads an attribute's
#: name as written (ASCII letters folded), then blanks (form feed too),
#: then ``=``. A page without it is not asked for its style attributes (an
#: XPath over every attribute of every element: a tenth of a Sphinx page's
#: conversion).
_STYLE_ATTRIBUTE: Final = re.compile(rb"style[\t\n\f\r ]*=", re.I)
_BASE_HREF: Final = re.compile(r"(<base\b[^>]*?[\s\"'/])(href)(?=\s*=)", re.I)
_CSS_URL: Final = re.compile(
    r"""(url\(\s*)(?:"([^"\n]*)"|'([^'\n]*)'|([^\s"'()\\]*))(\s*\))"""
    r"""|(@import\s+)(?:"([^"\n]*)"|'([^'\n]*)')""",
    re.I,
)
_SRCSET_URL: Final = re.compile(r"(^|,)(\s*)([^\s,]+)")


class LinkConverter:
    """Converts the links of one saved file, ``page`` (its path components),
    whose URL (or one in the same directory: ``url_of_path``) is ``url``."""

    def __init__(
        self,
        page: Sequence[str],
        url: str,
        lookup: Lookup,
        memo: dict[tuple[str, tuple[str, ...], str], str] | None = None,
    ) -> None:
        self.page = tuple(page)
        self.url = url
        self.lookup = lookup
        self.changed = 0
        #: Shared by the pages of one conversion: (base directory, this
        #: file's directory, raw value) -> new value, for values whose
        #: resolution depends on the base's directory only (``resolve_many``'s
        #: rule). Cleared by its owner when it grows too large.
        self.memo = memo
        #: The last base seen and its directory: a page's links share one base,
        #: and working out its directory per link was a tenth of the conversion.
        self._base: str | None = None
        self._base_directory = ""
        self._directory = self.page[:-1]

    def href(self, raw: str, base: str) -> str:
        """Rule 1 for one raw link value (memoized when ``memo`` is given)."""
        memo = self.memo
        if memo is None or not raw or raw[0] in _WHOLE_BASE_FIRST:
            return self._href(raw, base)
        if base != self._base:
            cut = len(base)
            for stop in "?#":
                found = base.find(stop)
                if 0 <= found < cut:
                    cut = found
            self._base, self._base_directory = base, base[: base.rfind("/", 0, cut) + 1]
        key = (self._base_directory, self._directory, raw)
        new = memo.get(key)
        if new is None:
            new = memo[key] = self._href(raw, base)
        return new

    def _href(self, raw: str, base: str) -> str:
        value = raw.strip(_ASCII_WS)
        if not value or value.startswith("#"):
            return raw
        resolved = resolve(value, base)
        if resolved is None:
            return raw
        target = self.lookup(resolved)
        if target is not None:
            cut = value.find("#")
            new = relative_href(self.page, target, value[cut + 1 :] if cut >= 0 else "")
        else:
            new = join(value, base) or raw
        return new if new != value else raw

    def srcset(self, raw: str, base: str) -> str:
        return _SRCSET_URL.sub(
            lambda m: m.group(1) + m.group(2) + self.href(m.group(3), base), raw
        )

    def css(self, text: str, base: str | None = None) -> str:
        """Rule 4 on CSS text."""
        base = base or self.url

        def one(match: re.Match[str]) -> str:
            if match.group(1) is not None:
                index = next(i for i in (2, 3, 4) if match.group(i) is not None)
                quote = '"' if index == 2 else "'" if index == 3 else ""
                new = self.href(match.group(index), base)
                return f"{match.group(1)}{quote}{new}{quote}{match.group(5)}"
            index = 7 if match.group(7) is not None else 8
            quote = '"' if index == 7 else "'"
            return f"{match.group(6)}{quote}{self.href(match.group(index), base)}{quote}"

        return _CSS_URL.sub(one, text)

    def stylesheet(self, data: bytes) -> bytes | None:
        """A stylesheet's bytes with its links converted; None if unchanged."""
        text = data.decode("utf-8", "surrogateescape")
        new = self.css(text)
        return None if new == text else new.encode("utf-8", "surrogateescape")

    def page_html(self, data: bytes) -> bytes | None:
        """An HTML page's bytes with its links converted (rules 1-3); None
        if nothing changed or the page cannot be read."""
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return None  # UTF-16: not ASCII-compatible (rule 5)
        try:
            # Plain etree elements, not lxml.html's: its per-element class
            # lookup was a tenth of the conversion; only named tags are visited.
            root = etree.fromstring(
                data, parser=etree.HTMLParser(encoding="utf-8", huge_tree=True)
            )
        except (etree.LxmlError, ValueError):
            return None
        if root is None:
            return None  # nothing lxml calls a document
        base = self.url
        has_base = False
        for element in root.iter("base"):
            href = element.get("href")
            if href is not None:
                base = join(href, self.url) or self.url
                has_base = True
                break
        has_style = any("(" in (element.text or "") for element in root.iter("style"))
        changes: dict[tuple[str, str], str] = {}
        for element in root.iter(*_LINK_ATTRIBUTES):
            for name in _LINK_ATTRIBUTES[element.tag]:
                value = element.get(name)
                if value and (name, value) not in changes:
                    if name.endswith("srcset"):
                        new = self.srcset(value, base)
                    else:
                        new = self.href(value, base)
                    if new != value:
                        changes[(name, value)] = new
        styles = root.xpath("//@style") if _STYLE_ATTRIBUTE.search(data) else []
        assert isinstance(styles, list)  # a node-set: the attribute values
        for found in styles:
            style = str(found)
            if "(" in style and ("style", style) not in changes:
                new = self.css(style, base)
                if new != style:
                    changes[("style", style)] = new
        text = data.decode("utf-8", "surrogateescape")

        new_text = text
        if changes:
            pieces: list[str] = []
            done = 0
            for start, name_end, value_start, end in attribute_spans(text):
                raw = text[value_start:end]
                quote = raw[0] if raw[0] in "\"'" else ""
                value = raw[1:-1] if quote else raw
                if "&" in value:
                    value = html.unescape(value)
                replacement = changes.get((text[start:name_end].lower(), value))
                if replacement is not None:
                    self.changed += 1
                    pieces += (text[done:value_start], _quoted(replacement, quote))
                    done = end
            new_text = "".join(pieces) + text[done:] if pieces else text
        if has_style:
            new_text = _STYLE_ELEMENT.sub(
                lambda m: m.group(1) + self.css(m.group(2), base) + m.group(3), new_text
            )
        if has_base:
            new_text = _BASE_HREF.sub(r"\1data-trio-crawl-base-href", new_text)
        if new_text == text:
            return None
        return new_text.encode("utf-8", "surrogateescape")


def attribute_spans(text: str) -> Iterator[tuple[int, int, int, int]]:
    """(start, end of the name, start of the value, end) of each link-like
    attribute in ``text``, in order, never overlapping: what ``re.finditer``
    gives for ``(?<=[\\s"'/])(NAME)(\\s*=\\s*)(VALUE)`` (case-insensitive).

    That look-behind was tried at every character of every page; then a
    Python loop over every ``=`` was (a Sphinx page has one per ``class=``):
    most of a conversion's CPU time. Now the candidates, a name between a
    space, quote or ``/`` and ``=``, are found in the reversed text, where
    each starts with the literal ``=`` the regular expression engine jumps
    to in C. Two candidates never share a character (each ends at its own
    ``=``, which no other one contains), so reading them left to right and
    skipping those that start inside the previous match (its value) gives
    the forward search's matches exactly. The character before a name may be
    the last one of the previous value, as the look-behind allowed.

    >>> list(attribute_spans('<a x=1 HREF = "a=b" data-src=c>'))
    [(7, 11, 14, 19)]
    """
    size = len(text)
    # (the character before the name, the name's start and end, the end of "=")
    candidates = [
        (size - m.end(), size - m.end(1), size - m.start(1), size - m.start())
        for m in _ATTRIBUTE_REVERSED.finditer(text[::-1])
    ]
    candidates.reverse()
    value_at = _VALUE.match
    position = 0
    for before, start, name_end, equals_end in candidates:
        if before < position:
            continue
        value = value_at(text, equals_end)
        if value is None:
            position = before + 1
            continue
        yield start, name_end, value.start(1), value.end()
        position = value.end() - 1


def _quoted(value: str, quote: str) -> str:
    """``value`` as an attribute value with the original quoting."""
    value = value.replace("&", "&amp;")
    if quote == '"':
        return '"' + value.replace('"', "&quot;") + '"'
    if quote == "'":
        return "'" + value.replace("'", "&#39;") + "'"
    if any(c in value for c in "\t\n\f\r \"'=<>`"):
        return '"' + value.replace('"', "&quot;") + '"'
    return value
