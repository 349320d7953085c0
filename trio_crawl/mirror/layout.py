"""Pure ``--mirror`` layout: where a URL's body goes under the mirror directory,
and the relative link from one saved file to another. No I/O, no trio.

The mapping is a pure function of the URL (and, with ``--adjust-extension``,
the Content-Type), so the link converter needs no per-crawl table: a link's
target is saved iff the file its URL maps to exists (``MirrorLayout.candidates``
lists the names to look for).

Rules (wget's layout, ``-nH`` not applied, no ``--protocol-directories``):

1. The first component is the host, with ``:port`` when the port is not the
   scheme's default (``127.0.0.1:8000``, ``example.com``). The scheme is not
   in the path: ``http://h/x`` and ``https://h/x`` share a file (as in wget).
2. Then one component per path segment. Empty segments (``a//b``) are
   dropped; a path ending in ``/`` (a directory URL) ends in ``index.html``.
3. The query string is kept in the file name after a ``?``, as wget does:
   ``/page?x=1`` is the file ``page?x=1``; ``/dir/?x=1`` is ``dir/index.html?x=1``.
4. Each component is percent-decoded (``a%20b`` is the file ``a b``), then
   re-escaped as ``%XX``: ``/``, ``\\``, NUL and the other control characters,
   bytes that are not UTF-8, and ``%`` itself (so a name never means two
   URLs). A component that would be ``.`` or ``..`` (``%2e%2e``) has its dots
   escaped (``%2E%2E``). So no component is empty, ``.``, ``..``, or holds a
   separator, and every path stays inside the mirror directory.
5. ``adjust_extension`` (wget's ``-E``): an HTML body whose name does not end
   in ``.html``/``.htm`` gets ``.html`` appended, a CSS body not ending in
   ``.css`` gets ``.css`` (after the query, as wget: ``page?x=1.html``).
6. ``case_insensitive`` (set when the mirror directory's file system folds
   case, as macOS and Windows ones do by default): a component with an
   upper-case letter is lower-cased and gets ``~`` and 8 hex digits of the
   SHA-256 of its exact text before its extension (``readme~1a2b3c4d.txt``
   for ``README.txt``), so ``/A`` and ``/a`` never land on one file.
   Lower-case names are unchanged, and a marked name maps to itself.
7. A component longer than 255 bytes (UTF-8) is cut at a character boundary
   and ends in ``~`` and 16 hex digits of the SHA-256 of the whole component,
   keeping a short extension: always at most 255 bytes.
8. A file and a directory wanting one name (``/a`` saved, then ``/a/b``): the
   directory wins and the file moves to ``a/index.html`` (the writer does
   this, ``mirror/files.py``); ``candidates`` therefore also looks
   for ``<name>/index.html``. ``/a`` and ``/a/`` then share a file, as wget's.

``relative_href`` gives the link from one saved file to another, each name
percent-encoded for a URL (``?`` as ``%3F``, ``:`` as ``%3A``), so a browser
opening the copy from ``file://`` finds the file by its exact name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote, unquote_to_bytes, urlsplit

from ..core.filters import file_name

#: The longest file name most file systems take (ext4, XFS, APFS, NTFS: 255 bytes).
MAX_NAME_BYTES: Final = 255
#: The file a directory URL is saved as (wget's ``--default-page``).
INDEX: Final = "index.html"
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}
_UNSAFE: Final = re.compile(r"[\x00-\x1f\x7f%/\\\udc80-\udcff]")
_HTML_TYPES: Final = ("text/html", "application/xhtml+xml")
_HTML_SUFFIXES: Final = (".html", ".htm")
_EXTENSION: Final = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"%{code - 0xDC00:02X}"
    return f"%{code:02X}"


def _safe_name(raw: str) -> str:
    """A percent-encoded URL part as a file name (rule 4)."""
    text = unquote_to_bytes(raw).decode("utf-8", "surrogateescape")
    name = _UNSAFE.sub(_escape_char, text)
    if name in (".", ".."):
        name = "%2E" * len(name)
    return name


def _split_extension(name: str) -> tuple[str, str]:
    match = _EXTENSION.search(name)
    if match is None:
        return name, ""
    return name[: match.start()], match.group()


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def _fold_mark(name: str) -> str:
    """Rule 6: mark a name with upper-case letters with a hash of its text."""
    if name == name.lower():
        return name
    stem, extension = _split_extension(name)
    return f"{stem}~{_digest(name, 8)}{extension}".lower()


def _shorten(name: str) -> str:
    """Rule 7: at most ``MAX_NAME_BYTES`` bytes, unique by a hash of the whole."""
    data = name.encode("utf-8")
    if len(data) <= MAX_NAME_BYTES:
        return name
    _, extension = _split_extension(name)
    tail = f"~{_digest(name, 16)}{extension}"
    room = MAX_NAME_BYTES - len(tail.encode("utf-8"))
    head = data[:room].decode("utf-8", "ignore")  # cut at a character boundary
    return head + tail


def _kind(content_type: str | None) -> str | None:
    if not content_type:
        return None
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in _HTML_TYPES:
        return "html"
    if mime == "text/css":
        return "css"
    return None


@dataclass(frozen=True, slots=True)
class MirrorLayout:
    """The URL -> relative file path rules of one mirror (module docstring)."""

    adjust_extension: bool = False
    case_insensitive: bool = False

    def path(self, url: str, content_type: str | None = None) -> tuple[str, ...]:
        """The components of the file ``url`` is saved as, relative to the
        mirror directory: never empty, never ``.``/``..``, no separators, at
        most 255 bytes each. ``content_type`` matters with ``adjust_extension``.

        >>> MirrorLayout().path("http://127.0.0.1:8000/docs/")
        ('127.0.0.1:8000', 'docs', 'index.html')
        >>> MirrorLayout(adjust_extension=True).path("https://h/a?x=1", "text/html")
        ('h', 'a?x=1.html')
        """
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        if ":" in host:  # IPv6: keep the brackets of the URL
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        authority = (
            host if port is None or str(port) == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
        )
        segments = parts.path.split("/")
        directories = [s for s in segments[1:-1] if s]
        last = segments[-1] if len(segments) > 1 else ""
        names = [_safe_name(authority or "_")] + [_safe_name(s) for s in directories]
        name = _safe_name(last) if last else INDEX
        if parts.query:
            name += "?" + _safe_name(parts.query)
        if self.adjust_extension:
            name = self._adjusted(name, _kind(content_type))
        names.append(name)
        if self.case_insensitive:
            names = [names[0].lower()] + [_fold_mark(n) for n in names[1:]]
        return tuple(_shorten(n) for n in names)

    def judged_name(self, url: str, content_type: str | None = None) -> str:
        """The name ``-A``/``-R`` judge for the file ``url`` is saved as (wget
        judges the saved file's name): the path's last segment decoded
        (``index.html`` for a directory), with ``-E``'s extension, without the
        query (the filters never see one), before case folding.

        >>> MirrorLayout(adjust_extension=True).judged_name("http://h/a?x=1", "text/html")
        'a.html'
        """
        name = file_name(url) or INDEX
        return self._adjusted(name, _kind(content_type)) if self.adjust_extension else name

    @staticmethod
    def _adjusted(name: str, kind: str | None) -> str:
        lower = name.lower()
        if kind == "html" and not lower.endswith(_HTML_SUFFIXES):
            return name + ".html"
        if kind == "css" and not lower.endswith(".css"):
            return name + ".css"
        return name

    def candidates(self, url: str) -> list[tuple[str, ...]]:
        """Where ``url``'s body may have been saved, most likely first: its
        name as is, with ``.html`` or ``.css`` added (``adjust_extension``),
        and ``<name>/index.html`` (rule 8). The link converter takes the first
        that exists as a regular file."""
        found: list[tuple[str, ...]] = []
        types: Sequence[str | None] = (None,)
        if self.adjust_extension:
            types = (None, "text/html", "text/css")
        for content_type in types:
            path = self.path(url, content_type)
            if path not in found:
                found.append(path)
        plain = self.path(url)
        if plain[-1] != INDEX:
            found.append((*plain, INDEX))
        return found


def url_of_path(scheme: str, parts: Sequence[str]) -> str:
    """A URL that resolves relative links the way the saved page's own URL
    did: same host and directory (the file name may differ: ``index.html``,
    an added ``.html``). ``parts`` as ``MirrorLayout.path`` gives them."""
    path = "/".join(quote(unquote(p), safe="") for p in parts[1:])
    return f"{scheme}://{unquote(parts[0])}/{path}"


def relative_href(source: Sequence[str], target: Sequence[str], fragment: str = "") -> str:
    """The relative URL, from the saved file ``source`` to the saved file
    ``target`` (both as ``MirrorLayout.path`` gives them), each name
    percent-encoded so a browser finds the exact file; ``fragment`` (without
    ``#``) is kept.

    >>> relative_href(("h", "a", "x.html"), ("h", "b", "y?z=1"), "top")
    '../b/y%3Fz=1#top'
    """
    common = 0
    source_dirs = source[:-1]
    while (
        common < len(source_dirs)
        and common < len(target) - 1
        and source_dirs[common] == target[common]
    ):
        common += 1
    up = [".."] * (len(source_dirs) - common)
    down = [quote(name, safe="=&;!$*+@~") for name in target[common:]]
    href = "/".join(up + down)
    return f"{href}#{fragment}" if fragment else href
