"""``--convert-links`` over a whole mirror directory, at the end of a crawl.

Like wget, links are converted once the crawl is over (a link may point to a
page fetched later). Nothing of the crawl is kept in memory for it: the
directory is walked file by file (``MirrorFiles.walk``), each HTML page and
stylesheet is read, converted (``mirror/links.py``) and written back
when something changed, and "is this link's target saved?" is answered by
looking for the file its URL maps to (``MirrorLayout.candidates``), through
a bounded cache. So memory does not grow with the site, and a resumed
``--state`` crawl converts every page of the directory, the earlier runs'
too (converting a converted page again changes only the links whose target
has been saved since).

Which files: a name ending in an image, script, font, media or archive
extension is not even read; a name ending in ``.html``/``.htm``/``.xhtml``/``.shtml``
(before any ``?query``), or a file that starts as the WHATWG MIME Sniffing
standard says HTML does (``<!doctype html``, ``<html``, ``<a ``, ``<p>``...),
is a page; a name ending in ``.css`` is a
stylesheet (with ``--adjust-extension`` every stylesheet's does). Blocking:
the trio side runs ``ConvertRun.step`` in a worker thread.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from .files import MirrorFiles, MirrorSkip, is_fatal
from .layout import MirrorLayout, url_of_path
from .links import LinkConverter

_PAGE_SUFFIXES: Final = (".html", ".htm", ".xhtml", ".shtml")
_SNIFF_BYTES: Final = 1024
#: Extensions that name a file with no links to convert: it is not read.
_OTHER_EXTENSIONS: Final = frozenset({
    "png", "jpg", "jpeg", "gif", "webp", "avif", "ico", "bmp", "svg", "js", "mjs", "json",
    "woff", "woff2", "ttf", "otf", "eot", "pdf", "zip", "gz", "tgz", "bz2", "xz", "7z", "tar",
    "mp3", "mp4", "m4a", "ogg", "oga", "ogv", "webm", "wav", "flac", "avi", "mov", "txt",
    "xml", "csv", "py", "c", "h",
})  # fmt: skip
#: The WHATWG MIME Sniffing patterns that identify HTML ("identifying a
#: resource with an unknown MIME type"): one of these tags (or a comment)
#: first, followed by a space or ``>``.
_HTML_SNIFF: Final = re.compile(
    rb"<(?:!doctype html|html|head|script|iframe|h1|div|font|table|a|style|title|b|body|br|p|!--)"
    rb"[ >]"
)
#: Link targets remembered (saved path or None): bounded, whatever the site's size.
LOOKUP_CACHE: Final = 65536


def kind_by_name(name: str) -> str | None:
    """``"html"``, ``"css"``, ``"other"`` (a name that says it is neither:
    an image, a script, a font...) or None (the content must tell)."""
    bare = name.split("?", 1)[0].lower()
    lower = name.lower()
    if bare.endswith(".css") or lower.endswith(".css"):
        return "css"
    if bare.endswith(_PAGE_SUFFIXES) or lower.endswith(_PAGE_SUFFIXES):
        return "html"
    if bare.rpartition(".")[2] in _OTHER_EXTENSIONS:
        return "other"
    return None


def file_kind(name: str, head: bytes) -> str | None:
    """``"html"``, ``"css"`` or None for a saved file's name and first bytes."""
    kind = kind_by_name(name)
    if kind is not None:
        return None if kind == "other" else kind
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip(b"\t\n\f\r ")[:_SNIFF_BYTES].lower()
    match = _HTML_SNIFF.match(start)
    return "html" if match is not None else None


@dataclass
class ConvertStatistics:
    files: int = 0
    converted: int = 0
    links: int = 0


class ConvertRun:
    """One pass over the mirror: ``step(n)`` converts up to ``n`` more files
    and says whether any are left (so the caller can checkpoint between)."""

    def __init__(
        self,
        files: MirrorFiles,
        layout: MirrorLayout,
        schemes: Mapping[str, str],
        warn: Callable[[str], None],
    ) -> None:
        self._files = files
        self._layout = layout
        self._schemes = schemes
        self._warn = warn
        self._walk: Iterator[tuple[str, ...]] = files.walk()
        self.statistics = ConvertStatistics()
        self.lookup = functools.lru_cache(maxsize=LOOKUP_CACHE)(self._lookup)
        self._memo: dict[tuple[str, tuple[str, ...], str], str] = {}

    def _lookup(self, url: str) -> tuple[str, ...] | None:
        for candidate in self._layout.candidates(url):
            if self._files.is_file(candidate):
                return candidate
        return None

    def step(self, count: int) -> bool:
        """Convert up to ``count`` files; False once the walk is over.
        ``OSError`` out of here (a fatal one) means the mirror failed."""
        for _ in range(count):
            parts = next(self._walk, None)
            if parts is None:
                return False
            self.statistics.files += 1
            try:
                self._convert(parts)
            except MirrorSkip as exc:
                self._warn(f"cannot convert links in {exc}")
            except OSError as exc:
                if is_fatal(exc):
                    raise
                self._warn(f"cannot convert links in {'/'.join(parts)}: {exc.strerror or exc}")
        return True

    def _convert(self, parts: tuple[str, ...]) -> None:
        if len(parts) < 2:
            return  # a file beside the host directories is not one we saved
        if kind_by_name(parts[-1]) == "other":
            return  # never read: no links to convert in it
        data = self._files.read(parts)
        kind = file_kind(parts[-1], data[:_SNIFF_BYTES])
        if kind is None:
            return
        scheme = self._schemes.get(parts[0], "http")
        if len(self._memo) >= LOOKUP_CACHE:
            self._memo.clear()
        converter = LinkConverter(parts, url_of_path(scheme, parts), self.lookup, self._memo)
        new = converter.page_html(data) if kind == "html" else converter.stylesheet(data)
        if new is not None:
            self._files.rewrite(parts, new)
            self.statistics.converted += 1
            self.statistics.links += converter.changed
