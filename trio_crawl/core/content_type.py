"""Which content types are pages (parsed for links, bodies downloaded).

A module of its own so that the parse co-process (``engine/parse_child.py``)
can ask without importing ``core.http``, whose ``http.cookiejar`` (and
``urllib.request``, ``http.client``, ``email``) cost ~20 ms of every child's
start: the child is ready that much sooner, and takes pages that much earlier.
"""

from __future__ import annotations


def is_html_content_type(content_type: str | None) -> bool:
    """True for the content types we parse for links (and download bodies of).

    A missing content type counts as HTML: many small sites omit it, and the
    parser copes with anything.
    """
    if not content_type:
        return True
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime in ("text/html", "application/xhtml+xml") or mime.endswith("+html")
