"""A fetched stylesheet's requisites (``--page-requisites``): its text,
decoded as CSS Syntax says, and the ``url()``s and ``@import``s in it
(``requisites.extract_css_urls``) against its own URL. Pure."""

from __future__ import annotations

import re
from typing import Final

from .page_encoding import CHARSET_PARAM, browser_codec
from .requisites import extract_css_urls

__all__ = ["decode_css", "stylesheet_urls"]


def decode_css(body: bytes, content_type: str | None) -> str:
    """A stylesheet's bytes as text, the encoding chosen as CSS Syntax 3.2
    chooses it: a byte order mark, else the ``charset`` of the Content-Type,
    else an ``@charset "...";`` at the very start (a UTF-16 label there means
    UTF-8), else UTF-8; labels map as for pages (rule 4 of ``core/parse.py``).
    Undecodable bytes become U+FFFD. Never raises."""
    if body.startswith(b"\xef\xbb\xbf"):
        return body[3:].decode("utf-8", "replace")
    codec: str | None = None
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        codec = "utf-16"
    if codec is None and content_type:
        match = CHARSET_PARAM.search(content_type)
        if match is not None:
            codec = browser_codec(match.group(1))
    if codec is None:
        declared = _CSS_CHARSET.match(body)
        if declared is not None:
            codec = browser_codec(declared.group(1).decode("latin-1"))
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
