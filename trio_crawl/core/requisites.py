"""Pure page-requisite rules: which attributes of which elements name a resource
that a page needs, ``srcset`` parsing, and URLs in CSS. No I/O, no trio.

The HTML side (one parse shared with ``extract_links``) is in ``parse.py``:
``extract_requisites`` and ``extract_links_and_requisites`` walk the tree and
call ``element_refs`` here for each element. Stylesheets fetched as requisites
go through ``stylesheet.stylesheet_urls`` (bytes: it decodes them) or
``extract_css_urls`` here (text).

Rules:

1. The requisites of an HTML page are, in document order, for each element:

   - ``img``: ``src``, then every candidate of ``srcset``;
   - ``source``: ``src``, then every candidate of ``srcset`` (``<picture>`` or
     ``<video>``/``<audio>``, wherever it sits);
   - ``script``: ``src`` (whatever its ``type``);
   - ``link``: ``href`` and every candidate of ``imagesrcset`` when ``rel``
     (a case-insensitive token list) holds one of ``REQUISITE_RELS``:
     ``stylesheet`` (so also ``alternate stylesheet``), ``icon`` (so also
     ``shortcut icon``), ``apple-touch-icon``, ``apple-touch-icon-precomposed``,
     ``mask-icon``, ``manifest``, ``preload`` and ``modulepreload``. Left out:
     ``prefetch``/``prerender`` (for later navigations), ``preconnect``/
     ``dns-prefetch`` (no resource), ``alternate``/``canonical``/``next``/...
     (other documents: links, not requisites);
   - ``iframe``, ``frame``, ``embed``, ``track``: ``src``;
   - ``object``: ``data`` (``codebase`` is obsolete and ignored);
   - ``video``: ``src``, then ``poster``; ``audio``: ``src``;
   - ``input`` with ``type=image`` (case-insensitive): ``src``;
   - ``body``, ``table``, ``thead``, ``tbody``, ``tfoot``, ``tr``, ``td``,
     ``th``: ``background`` (the HTML Standard's rendering section maps it to
     ``background-image`` on exactly these);
   - any element's ``style`` attribute, and the text of ``<style>`` elements:
     the URLs of rule 3.

   A value that is empty or all whitespace names no resource (a browser fetches
   nothing for ``<img src="">``) and is skipped, as are ``data:`` URLs (their
   content is inline; skipping them early spares resolving long strings).
   Everything is resolved like links (the document's frozen base URL, WHATWG
   resolution, canonical http(s) only, fragments dropped, de-duplicated in
   first-seen order): ``javascript:`` and other schemes drop out there.

   Not covered: SVG ``<image href>``/``<use href>`` and ``xlink:href``,
   lazy-loading conventions (``data-src``), ``<template>`` contents (inert in a
   browser, parsed here as ordinary elements), ``<noscript>`` contents (kept:
   a crawler is a user agent without scripting), and URLs that scripts build.

2. ``srcset`` (and ``imagesrcset``) follows the HTML Standard's "parse a srcset
   attribute" algorithm: candidates are split on whitespace and commas, a URL
   is a run of non-whitespace (so it may contain commas) with trailing commas
   removed, descriptors are tokenized with parentheses, and a candidate whose
   descriptors are invalid (``2x 3x``, ``0w``, ``1.5w``, ``10h`` without a
   width, an unknown descriptor) is dropped, as a browser drops it. Every
   valid candidate is a requisite, not only the one a browser would pick.

3. CSS (CSS Syntax Level 3 tokenization, as far as URLs need it): the URL of
   every ``url(...)`` (unquoted, or with a single- or double-quoted string;
   the function name matched case-insensitively, escapes decoded) and of
   every ``@import "..."``; comments and strings elsewhere hide what they
   contain; escapes are decoded in names, strings and URLs. Skipped: empty
   URLs, ``data:`` URLs, fragment-only URLs (``url(#clip)`` is a reference
   into the same document, never a fetch), the namespace URL of
   ``@namespace``, and bad strings/URLs (an unescaped newline in a string;
   a quote, ``(`` or inner whitespace in an unquoted URL). An ``@import``
   placed after other rules (which a browser ignores) is still reported.
   A stylesheet's URLs resolve against the stylesheet's own URL; those of
   ``<style>`` and ``style=""`` against the document's base URL.

4. Nothing here raises on any input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeGuard

from .payloads import REQUISITE, Requisite
from .url import resolve_many

__all__ = [
    "REQUISITE",
    "REQUISITE_RELS",
    "REQUISITE_TAGS",
    "Requisite",
    "css_refs",
    "element_refs",
    "extract_css_urls",
    "parse_srcset",
]

#: ``<link rel>`` tokens that make its ``href`` a requisite (rule 1).
REQUISITE_RELS: Final = frozenset(
    {
        "stylesheet",
        "icon",
        "apple-touch-icon",
        "apple-touch-icon-precomposed",
        "mask-icon",
        "manifest",
        "preload",
        "modulepreload",
    }
)

_ASCII_WS: Final = " \t\n\r\f"
_WS_OR_COMMA: Final = _ASCII_WS + ","
_DATA: Final = re.compile(r"[\x00-\x20]*data:", re.I)


def _usable(value: str | None) -> TypeGuard[str]:
    """Rule 1: not empty, not all whitespace, not a ``data:`` URL."""
    return value is not None and value != "" and not value.isspace() and not _DATA.match(value)


# --- rule 2: srcset ------------------------------------------------------------------

_NON_NEGATIVE_INTEGER: Final = re.compile(r"[0-9]+\Z")
_FLOAT: Final = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")


def _descriptors_ok(descriptors: list[str]) -> bool:
    """The HTML Standard's descriptor parser: False where it sets "error"."""
    width = density = height = False
    for descriptor in descriptors:
        kind, number = descriptor[-1], descriptor[:-1]
        if kind == "w":
            if width or density or not _NON_NEGATIVE_INTEGER.match(number) or int(number) == 0:
                return False
            width = True
        elif kind == "x":
            if width or density or height or not _FLOAT.match(number) or float(number) < 0:
                return False
            density = True
        elif kind == "h":
            if height or density or not _NON_NEGATIVE_INTEGER.match(number) or int(number) == 0:
                return False
            height = True
        else:
            return False
    return not (height and not width)


def _descriptors(value: str, pos: int) -> tuple[list[str], int]:
    """The HTML Standard's descriptor tokenizer, from ``pos`` (just after a URL
    and the whitespace after it): the descriptors and the position after them."""
    n = len(value)
    out: list[str] = []
    current = ""
    state = 0  # 0: in descriptor, 1: in parens, 2: after descriptor
    while True:
        c = value[pos] if pos < n else ""
        if state == 0:
            if c and c in _ASCII_WS:
                if current:
                    out.append(current)
                    current = ""
                state = 2
            elif c == ",":
                pos += 1
                if current:
                    out.append(current)
                return out, pos
            elif c == "(":
                current += c
                state = 1
            elif not c:
                if current:
                    out.append(current)
                return out, pos
            else:
                current += c
        elif state == 1:
            if c == ")":
                current += c
                state = 0
            elif not c:
                out.append(current)
                return out, pos
            else:
                current += c
        elif not c:
            return out, pos
        elif c not in _ASCII_WS:
            state = 0
            continue  # reconsume in "in descriptor"
        pos += 1


def parse_srcset(value: str) -> list[str]:
    """The URLs (raw, unresolved) of the valid image candidates of a ``srcset``
    attribute, in order (rule 2).

    >>> parse_srcset("a.png 1x, b,c.png 2x,d.png, e.png 2x 3x, f.png 100w")
    ['a.png', 'b,c.png', 'd.png', 'f.png']
    """
    urls: list[str] = []
    pos, n = 0, len(value)
    while True:
        while pos < n and value[pos] in _WS_OR_COMMA:
            pos += 1
        if pos >= n:
            return urls
        start = pos
        while pos < n and value[pos] not in _ASCII_WS:
            pos += 1
        url = value[start:pos]
        descriptors: list[str] = []
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            while pos < n and value[pos] in _ASCII_WS:
                pos += 1
            descriptors, pos = _descriptors(value, pos)
        if _descriptors_ok(descriptors):
            urls.append(url)


# --- rule 3: CSS ---------------------------------------------------------------------

_ESCAPE_RE: Final = r"\\(?:[0-9A-Fa-f]{1,6}[ \t\n]?|[^\n0-9A-Fa-f])"
#: What the scanner stops at: a comment, a string, or a run of name code points
#: (an identifier, a number with its unit, an at-keyword or a hash; scanning
#: whole runs is what keeps ``myurl(`` and ``1url(`` from looking like
#: ``url(``), followed by ``(`` when it is a function.
_TOKEN: Final = re.compile(
    r"(?P<comment>/\*)|(?P<string>[\"'])"
    rf"|(?P<name>[@#]?(?:[A-Za-z0-9_\-]|[^\x00-\x7f]|{_ESCAPE_RE})+)(?P<paren>\()?"
)
_ESCAPE: Final = re.compile(r"\\(?:([0-9A-Fa-f]{1,6})[ \t\n]?|([^\n0-9A-Fa-f])|\Z)")
_WS_AND_COMMENTS: Final = re.compile(r"(?:[ \t\n]+|/\*.*?(?:\*/|\Z))*", re.S)
_WS: Final = re.compile(r"[ \t\n]*")
_STRING_RUN: Final = {q: re.compile(rf"[^{q}\\\n]*") for q in "\"'"}
_URL_RUN: Final = re.compile(r"[^\"'()\\ \t\n\x00-\x08\x0b\x0e-\x1f\x7f]*")
_BAD_URL_REST: Final = re.compile(r"(?:[^)\\]|\\.)*(?:\)|\\?\Z)", re.S)


def _skip(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """The end of ``pattern`` (which matches the empty string) at ``pos``."""
    match = pattern.match(text, pos)
    return pos if match is None else match.end()


def _unescape_match(match: re.Match[str]) -> str:
    hexa, char = match.group(1), match.group(2)
    if hexa is not None:
        code = int(hexa, 16)
        if code == 0 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            return "\ufffd"
        return chr(code)
    return "\ufffd" if char is None else char  # a backslash at the end: U+FFFD


def _unescape(text: str) -> str:
    return _ESCAPE.sub(_unescape_match, text) if "\\" in text else text


def _preprocess(text: str) -> str:
    """CSS Syntax 3.3: newlines normalized to LF, NUL and surrogates to U+FFFD."""
    if "\r" in text or "\f" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _string(text: str, start: int) -> tuple[str | None, int]:
    """A string token from its opening quote at ``start``: (value or None for a
    bad string, position after it)."""
    quote = text[start]
    run = _STRING_RUN[quote]
    n = len(text)
    pos = start + 1
    parts: list[str] = []
    while True:
        match = run.match(text, pos)
        assert match is not None  # the pattern matches the empty string
        parts.append(match.group())
        pos = match.end()
        if pos >= n:
            return "".join(parts), n  # EOF ends the string (a parse error only)
        c = text[pos]
        if c == quote:
            return "".join(parts), pos + 1
        if c == "\n":
            return None, pos  # bad string; the newline is the next token
        # a backslash
        if pos + 1 >= n:
            return "".join(parts), n
        if text[pos + 1] == "\n":
            pos += 2  # an escaped newline continues the string
            continue
        escape = _ESCAPE.match(text, pos)
        assert escape is not None
        parts.append(_unescape_match(escape))
        pos = escape.end()


def _url_token(text: str, pos: int) -> tuple[str | None, int]:
    """The rest of an unquoted ``url(`` from ``pos`` (after the whitespace that
    follows the parenthesis): (value or None for a bad URL, position after it)."""
    n = len(text)
    parts: list[str] = []
    while True:
        match = _URL_RUN.match(text, pos)
        assert match is not None
        parts.append(match.group())
        pos = match.end()
        if pos >= n:
            return "".join(parts), n
        c = text[pos]
        if c == ")":
            return "".join(parts), pos + 1
        if c in " \t\n":
            pos = _skip(_WS, text, pos)
            if pos >= n:
                return "".join(parts), n
            if text[pos] == ")":
                return "".join(parts), pos + 1
        elif c == "\\" and pos + 1 < n and text[pos + 1] != "\n":
            escape = _ESCAPE.match(text, pos)
            assert escape is not None
            parts.append(_unescape_match(escape))
            pos = escape.end()
            continue
        # A bad URL: consume up to ")" (escapes included) and report nothing.
        rest = _BAD_URL_REST.match(text, pos)
        return None, n if rest is None else rest.end()


def css_refs(text: str) -> list[str]:
    """The raw (unresolved) URLs of ``text``, a stylesheet or a ``style``
    attribute's declarations, in order (rule 3). Usable ones only: not empty,
    not ``data:``, not fragment-only."""
    text = _preprocess(text)
    refs: list[str] = []
    n = len(text)
    pos = 0
    namespace_end = -1  # URLs before this offset are an @namespace's
    while pos < n:
        match = _TOKEN.search(text, pos)
        if match is None:
            break
        pos = match.end()
        if match.group("comment") is not None:
            end = text.find("*/", pos)
            pos = n if end < 0 else end + 2
            continue
        start = match.start()
        if match.group("string") is not None:
            _, pos = _string(text, start)  # a string that no url()/@import owns
            continue
        name = _unescape(match.group("name")).lower()
        value: str | None = None
        if match.group("paren") is not None:
            if name != "url":
                continue
            pos = _skip(_WS, text, pos)
            if pos < n and text[pos] in "\"'":
                value, pos = _string(text, pos)
            else:
                value, pos = _url_token(text, pos)
        elif name == "@import":
            after = _skip(_WS_AND_COMMENTS, text, pos)
            if after < n and text[after] in "\"'":
                value, pos = _string(text, after)
        elif name == "@namespace":
            ends = [i for i in (text.find(";", pos), text.find("{", pos)) if i >= 0]
            namespace_end = min(ends) if ends else n
            continue
        if value is None or start < namespace_end:
            continue
        if _usable(value) and not value.lstrip(_ASCII_WS).startswith("#"):
            refs.append(value)
    return refs


def extract_css_urls(text: str, base_url: str) -> list[str]:
    """The canonical http(s) URLs that stylesheet ``text`` refers to (rule 3),
    resolved against ``base_url`` (the stylesheet's own URL), de-duplicated in
    first-seen order, fragments dropped.

    >>> extract_css_urls('@import "a.css"; p { background: url( b.png ) }',
    ...                  "http://example.com/css/site.css")
    ['http://example.com/css/a.css', 'http://example.com/css/b.png']
    """
    refs = css_refs(text)
    return resolve_many(refs, base_url) if refs else []


# --- rule 1: which elements and attributes ---------------------------------------------

_BACKGROUND_TAGS: Final = frozenset({"body", "table", "thead", "tbody", "tfoot", "tr", "td", "th"})
#: Tags whose requisites ``element_refs`` finds, beside ``style`` attributes.
REQUISITE_TAGS: Final = frozenset(
    {
        *("img", "source", "script", "link", "iframe", "frame", "embed", "track"),
        *("object", "video", "audio", "input", "style"),
        *_BACKGROUND_TAGS,
    }
)
_SIMPLE: Final[dict[str, tuple[str, ...]]] = {
    "script": ("src",),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "track": ("src",),
    "audio": ("src",),
    "object": ("data",),
    "video": ("src", "poster"),
    **{tag: ("background",) for tag in _BACKGROUND_TAGS},
}


def _is_requisite_link(rel: str | None) -> bool:
    return rel is not None and not REQUISITE_RELS.isdisjoint(rel.lower().split())


def element_refs(
    tag: str, get: Callable[[str], str | None], text: str | None, refs: list[str]
) -> None:
    """Append to ``refs`` the raw requisite URLs of one element (rule 1, the
    ``style`` attribute included): ``tag`` lower-case, ``get`` its attribute
    getter (first attribute of a name wins), ``text`` the text of a ``<style>``."""
    attrs = _SIMPLE.get(tag)
    if attrs is not None:
        for name in attrs:
            value = get(name)
            if _usable(value):
                refs.append(value)
    elif tag in ("img", "source"):
        value = get("src")
        if _usable(value):
            refs.append(value)
        srcset = get("srcset")
        if srcset:
            refs.extend(u for u in parse_srcset(srcset) if _usable(u))
    elif tag == "link":
        if _is_requisite_link(get("rel")):
            value = get("href")
            if _usable(value):
                refs.append(value)
            srcset = get("imagesrcset")
            if srcset:
                refs.extend(u for u in parse_srcset(srcset) if _usable(u))
    elif tag == "input":
        kind = get("type")
        if kind is not None and kind.strip(_ASCII_WS).lower() == "image":
            value = get("src")
            if _usable(value):
                refs.append(value)
    elif tag == "style" and text:
        refs.extend(css_refs(text))
    style = get("style")
    if style and ("(" in style):
        refs.extend(css_refs(style))
