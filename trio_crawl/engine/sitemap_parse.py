"""Sitemaps (sitemaps.org protocol 0.9) as pure data: bytes in, URL lists out.

Rules:

1. ``<urlset>`` lists pages (``<url><loc>``); ``<sitemapindex>`` lists further
   sitemaps (``<sitemap><loc>``). Elements are matched by local name, so a file
   that forgot (or misspelt) the ``xmlns`` still works. A body that is not XML
   at all is read as the protocol's plain-text format: one URL per line.
2. Only absolute http(s) ``<loc>`` values are kept, whitespace-stripped,
   de-duplicated in document order. Relative or other-scheme values are
   dropped, as the protocol requires fully qualified URLs, and so is a
   ``<loc>`` holding an (unexpanded) entity reference other than the five
   predefined ones: we cannot know what it stood for.
3. A gzip body (detected by its magic bytes, whatever the file name or
   Content-Type claimed) is decompressed incrementally, never beyond
   ``MAX_SITEMAP_BYTES`` (50 MB, the protocol's limit), so a gzip bomb costs
   at most that much memory. A larger body raises ``SitemapError``.
4. At most ``MAX_SITEMAP_URLS`` (50,000) URLs are returned, pages and nested
   sitemaps together; the rest of the file is ignored.
5. The XML parser is defused: no entity expansion (billion laughs), no DTD or
   external entity loading, no network, no huge-tree mode. It recovers from
   malformed markup (a bare ``&`` in a URL is escaped first) and keeps what it
   could read, except the last URL of a body cut short (no end tag for the
   root), which may itself be cut. A body with no sitemap root
   (an HTML error page, say), or a text body without a single URL, raises
   ``SitemapError``; an empty ``<urlset>`` is a valid, empty sitemap.
"""

from __future__ import annotations

import re
import zlib
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..errors import SitemapError

if TYPE_CHECKING:
    from lxml import etree  # imported when a sitemap is read: a crawl without one never needs it

#: The protocol's limit on an uncompressed sitemap file.
MAX_SITEMAP_BYTES = 50 * 1000 * 1000
#: The protocol's limit on the number of URLs in one sitemap file.
MAX_SITEMAP_URLS = 50_000

_GZIP_MAGIC = b"\x1f\x8b"
_BARE_AMPERSAND = re.compile(rb"&(?!(?:[A-Za-z_][A-Za-z0-9._-]*|#[0-9]+|#[xX][0-9A-Fa-f]+);)")


def parse_sitemap(body: bytes) -> tuple[list[str], list[str]]:
    """Page URLs and nested sitemap URLs listed by a sitemap or sitemap index body.

    Returns ``(pages, sitemaps)``; for a ``<urlset>`` the second list is empty
    and for a ``<sitemapindex>`` the first is.

    Raises:
        SitemapError: over ``MAX_SITEMAP_BYTES`` (after decompression), a
            corrupt gzip stream, or no sitemap in the body.
    """
    if body.startswith(_GZIP_MAGIC):
        body = _gunzip(body)
    elif len(body) > MAX_SITEMAP_BYTES:
        raise SitemapError(f"sitemap larger than {MAX_SITEMAP_BYTES} bytes")
    text_start = body.lstrip()[:1]
    if text_start != b"<" and not body.startswith(b"\xef\xbb\xbf<"):
        pages = _parse_text(body)
        if not pages:
            raise SitemapError("not a sitemap: neither XML nor a list of URLs")
        return pages, []
    return _parse_xml(body)


def _gunzip(body: bytes) -> bytes:
    """Decompress a gzip ``body``, never producing more than MAX_SITEMAP_BYTES + 1 bytes.

    Only the first gzip member is read; anything after it is ignored.
    """
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(body, MAX_SITEMAP_BYTES + 1)
    except zlib.error as exc:
        raise SitemapError(f"corrupt gzip sitemap: {exc}") from exc
    if len(out) > MAX_SITEMAP_BYTES:
        raise SitemapError(f"sitemap larger than {MAX_SITEMAP_BYTES} bytes uncompressed")
    if not decompressor.eof:
        raise SitemapError("corrupt gzip sitemap: truncated stream")
    return out


def _parser() -> etree.XMLParser:
    # A fresh parser per call: lxml parsers are not safe to share across threads.
    from lxml import etree

    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        recover=True,
        remove_comments=True,
        remove_pis=True,
    )


def _parse_xml(body: bytes) -> tuple[list[str], list[str]]:
    # Escape bare "&" (a common mistake in query strings) before the parser
    # "recovers" by deleting the text after it.
    body = _BARE_AMPERSAND.sub(b"&amp;", body)
    from lxml import etree

    try:
        root = etree.fromstring(body, parser=_parser())
    except etree.XMLSyntaxError as exc:
        raise SitemapError(f"not a sitemap: {exc}") from exc
    if root is None:
        raise SitemapError("not a sitemap: no XML root element")
    kind = _local_name(root)
    if kind not in ("urlset", "sitemapindex"):
        raise SitemapError(f"not a sitemap: root element <{kind}>")
    urls = _locs(root, "url" if kind == "urlset" else "sitemap")
    if urls and len(urls) < MAX_SITEMAP_URLS and not _ends_with_close_tag(body, kind):
        # Truncated: the parser closed the last <loc> for us, maybe mid-URL.
        urls.pop()
    return (urls, []) if kind == "urlset" else ([], urls)


def _ends_with_close_tag(body: bytes, kind: str) -> bool:
    """True when ``body`` ends with the root's end tag (any prefix, trailing space)."""
    pattern = rb"</(?:[^\s<>/:]+:)?" + kind.encode() + rb"\s*>\s*\Z"
    return re.search(pattern, body[-256:]) is not None


def _locs(root: etree._Element, entry: str) -> list[str]:
    """The usable ``<loc>`` of each child ``<entry>`` of ``root`` (rules 2 and 4)."""
    found: dict[str, None] = {}
    for child in root:
        if _local_name(child) != entry:
            continue
        for loc in child:
            if _local_name(loc) == "loc":
                # Child nodes in a <loc> are unexpanded entity references (or
                # junk): the URL cannot be read faithfully, so skip it.
                url = None if len(loc) else _usable(loc.text or "")
                if url is not None:
                    found[url] = None
                    if len(found) >= MAX_SITEMAP_URLS:
                        return list(found)
                break
    return list(found)


def _parse_text(body: bytes) -> list[str]:
    found: dict[str, None] = {}
    for line in body.decode("utf-8", errors="replace").splitlines():
        url = _usable(line)
        if url is not None:
            found[url] = None
            if len(found) >= MAX_SITEMAP_URLS:
                break
    return list(found)


def _usable(text: str) -> str | None:
    url = text.strip().lstrip("\ufeff")
    if not url or any(c.isspace() for c in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url


def _local_name(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):  # comments and processing instructions
        return ""
    return tag.rpartition("}")[2]
