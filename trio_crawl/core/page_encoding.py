"""A page's bytes as text: the encoding chosen as a browser chooses it.

Rule 4 of ``core/parse.py``: a byte order mark; the ``charset`` of the
Content-Type header, if Python knows it; a ``<meta charset>`` in the first
4 KiB; else UTF-8, each label mapped as browsers map it. Every reader of a
page (lexbor, libxml2, the tokenizer, a handler's ``page.text``) gets the
same text from here, so they can disagree on markup but never on
characters; a stylesheet's labels map the same way (``core/stylesheet.py``).
Pure; never raises because of the body.
"""

from __future__ import annotations

import codecs
import functools
import re
from typing import Final

__all__ = ["CHARSET_PARAM", "browser_codec", "decode_text", "utf8"]

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
CHARSET_PARAM: Final = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.I)
_META_CHARSET: Final = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([^\s"'/>;]+)""", re.I)
_META_SCAN: Final = 4096


@functools.lru_cache(maxsize=256)
def browser_codec(label: str) -> str | None:
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
        match = CHARSET_PARAM.search(content_type)
        if match is not None:
            codec = browser_codec(match.group(1))
            if codec is not None:
                return codec
    meta = _META_CHARSET.search(body, 0, _META_SCAN)
    if meta is not None:
        codec = browser_codec(meta.group(1).decode("latin-1"))
        if codec is not None:
            # A page that could be read as ASCII to find this label is not UTF-16.
            return "utf-8" if codec.startswith("utf-16") else codec
    return "utf-8"


def utf8(body: bytes, content_type: str | None) -> bytes:
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


def decode_text(body: bytes, content_type: str | None) -> str:
    """``body`` as text, decoded the way ``extract_links`` reads it (rule 4)."""
    return utf8(body, content_type).decode("utf-8")
