"""Pure URL logic: resolve links like a browser, canonicalize them for dedup.

Which of those URLs a crawl may visit is ``scope.py``'s job.

Rules (each one is tested in ``tests/test_url.py``):

1. Parsing and resolution follow the WHATWG URL Standard, via ada (``ada_url``),
   exactly as a browser does: leading/trailing C0 controls and spaces are
   stripped, tabs and newlines removed, backslashes act as slashes in http(s),
   dot segments are removed, the scheme and host are lower-cased, the host is
   IDNA-encoded (UTS #46) and IPv4/IPv6 literals are normalized, the default port
   is dropped, an empty path becomes ``/``, and non-ASCII or unsafe characters
   are percent-encoded as UTF-8. The WPT conformance data is the test.
2. Only ``http`` and ``https`` URLs are kept; every other scheme (``javascript:``,
   ``mailto:``, ``tel:``, ``data:``, ``ftp:``...) and every invalid URL gives
   ``None`` (or is skipped by ``resolve_many``).
3. On top of WHATWG, the canonical form used as the dedup key (and as the URL we
   fetch) also:

   a. drops the fragment: it never reaches the server;
   b. decodes percent-escapes of unreserved characters (``ALPHA DIGIT - . _ ~``,
      RFC 3986 section 2.3 says they are equivalent) and upper-cases the hex of
      every other escape (``%7e`` -> ``~``, ``%2f`` -> ``%2F``). Exception: a URL
      holding a stray ``%`` (one not starting a valid escape) only gets the
      upper-casing, because decoding next to it could forge a new escape
      (``%%341`` -> ``%41``) and break idempotence; the stray ``%`` itself is kept
      as the browser sends it;
   c. drops a bare trailing ``?`` (an empty query): no server tells ``/a?``
      from ``/a``;
   d. KEEPS the order of query parameters;
   e. drops the userinfo (``user:password@``): a link must never make the
      crawler send credentials the user did not give (libcurl and httpx turn
      userinfo into an ``Authorization`` header), and no password may reach a
      record. A start URL with userinfo is refused (``parse_start_url``);
      ``mask_credentials`` hides it in messages about raw, unparsed text.

4. ``canonicalize`` is idempotent, and ``resolve`` output is a fixed point of it.

Compared with w3lib's ``canonicalize_url`` (what Scrapy's duplicate filter uses):

- w3lib sorts query parameters; we keep their order. Sorting merges URLs that
  some sites treat differently (order-sensitive routers, signed URLs, repeated
  keys whose order carries meaning), and a crawler that fetches a URL the site
  never linked to can get errors or different content. The price is a few
  duplicates on sites that emit the same parameters in different orders.
- w3lib rewrites spaces in the query as ``+`` and re-encodes the whole path
  (decoding reserved-but-safe characters such as ``%21``); we only decode
  unreserved characters, the one transformation RFC 3986 guarantees safe.
- w3lib parses with RFC 3986-style splitting and Python's IDNA 2003 codec,
  keeps default ports and ``..`` segments; we use the WHATWG parser, so a link
  means here what it means in a browser (``\\``, ``..`` above the root, hosts
  like ``0x7f.1``, UTS #46 IDNA, default ports), which also fixes the URL we
  send.
- Both drop the fragment, upper-case escapes and lower-case the host.

Known gap: in a page whose encoding is not UTF-8 a browser percent-encodes the
*query* of a link with that encoding; we always use UTF-8 (ada does), so such
links with non-ASCII query text differ from what a browser would request.

Speed: ``resolve_many`` is on the per-page hot path. It calls ada's C API
directly (one parse per link, no Python URL object), skips repeated raw hrefs
before parsing, does the percent-escape work only when a ``%`` is present, and
memoizes results across pages under keys that provably determine them (see
its docstring): on a site's pages most links are the same navigation links.
The memo, the per-label IDNA check cache and ``host_port``'s cache are the
module's only state; they never change an answer, only how fast it comes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any, Final

from ada_url import idna_to_ascii
from ada_url._ada_wrapper import ffi, lib

from ..errors import ConfigError

__all__ = [
    "DEFAULT_PORTS",
    "canonicalize",
    "host_port",
    "join",
    "mask_credentials",
    "parse_start_url",
    "resolve",
    "resolve_many",
    "split_authority",
]

_UNRESERVED: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)
_HEX: Final = "0123456789ABCDEFabcdef"

#: Replacement for every two-hex-digit escape, in either case: the character
#: itself when unreserved, otherwise the escape with upper-case hex.
_DECODE: Final[dict[str, str]] = {}
#: The same escapes, upper-cased only (used when a stray '%' is present).
_UPPER: Final[dict[str, str]] = {}
for _h in _HEX:
    for _l in _HEX:
        _upper = f"%{_h}{_l}".upper()
        _char = chr(int(_h + _l, 16))
        _DECODE[_h + _l] = _char if _char in _UNRESERVED else _upper
        _UPPER[_h + _l] = _upper
del _h, _l, _upper, _char

_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")

#: Each scheme we keep, and its default port.
DEFAULT_PORTS: Final = {"http": "80", "https": "443"}

# ada's C API (the cffi module behind ``ada_url``). ``ada_url.join_url`` wraps
# the same calls in a garbage-collected object and exceptions, which measured
# ~1.7x slower per link; here every parse is freed explicitly.
_parse: Final[Any] = lib.ada_parse
_parse_with_base: Final[Any] = lib.ada_parse_with_base
_get_href: Final[Any] = lib.ada_get_href
_free: Final[Any] = lib.ada_free
_unpack: Final[Any] = ffi.unpack

_HTTP_PREFIXES: Final = (b"http://", b"https://")


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``, with lone surrogates as U+FFFD (what a browser's
    USVString conversion does before URL parsing)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def _userinfo_end(href: bytes) -> int:
    """In ada's serialization of an http(s) URL, the index just after the
    userinfo's ``@``, or -1 when there is none. The path always starts with
    ``/`` there, and ``@`` inside the userinfo is percent-encoded, so the
    authority's only raw ``@`` ends the userinfo."""
    start = 8 if href[4] == 115 else 7  # len("https://") or len("http://")
    at = href.rfind(b"@", start, href.find(b"/", start))
    return at + 1 if at >= 0 else -1


def _finish(href: bytes) -> str | None:
    """Rule 2 and 3 applied to ada's serialization of a valid URL (empty when
    invalid). The serialization is ASCII, and its first '#' starts the fragment
    (WHATWG escapes '#' everywhere else)."""
    if not href.startswith(_HTTP_PREFIXES) or (b"xn--" in href and not _xn_labels_ok(href)):
        return None
    end = _userinfo_end(href)
    if end >= 0:  # rule 3e
        href = href[: 8 if href[4] == 115 else 7] + href[end:]
    cut = href.find(b"#")
    if cut >= 0:
        href = href[:cut]
    if href[-1] == 63 and href.find(b"?") == len(href) - 1:  # empty query
        href = href[:-1]
    url = href.decode()
    if "%" in url:
        url = _normalize_escapes(url)
    return url


_XN_CACHE: Final[dict[bytes, bool]] = {}


def _xn_labels_ok(href: bytes) -> bool:
    """Whether every ``xn--`` label of the host is valid punycode for a label
    that IDNA would produce (UTS #46 "Processing", step 4): it must decode,
    to something non-empty and non-ASCII that encodes back to the same label.
    ada 4.0 lets such labels through (WPT "Domain is ASCII, but a label is
    invalid IDNA"); a browser refuses the URL. Cached per label."""
    host = href.partition(b"://")[2].partition(b"/")[0].rpartition(b"@")[2]
    if not host.endswith(b"]"):
        host = host.partition(b":")[0]
    for label in host.split(b"."):
        if not label.startswith(b"xn--"):
            continue
        ok = _XN_CACHE.get(label)
        if ok is None:
            try:
                text = label[4:].decode("punycode")
            except UnicodeError:
                ok = False
            else:
                ok = bool(text) and not text.isascii() and _to_ascii(text) == label
            if len(_XN_CACHE) >= 4096:
                _XN_CACHE.clear()
            _XN_CACHE[label] = ok
        if not ok:
            return False
    return True


def _to_ascii(text: str) -> bytes:
    try:
        result: bytes = idna_to_ascii(text)
        return result
    except Exception:  # ada's binding raises assorted errors on odd input
        return b""


def _normalize_escapes(url: str) -> str:
    """Rule 3b: decode unreserved escapes, upper-case the others' hex."""
    if _STRAY_PERCENT.search(url) is None:
        return _ESCAPE.sub(lambda m: _DECODE[m.group(1)], url)
    return _ESCAPE.sub(lambda m: _UPPER[m.group(1)], url)


def _ada_href(data: bytes, base: bytes | None) -> bytes:
    """ada's serialization of ``data`` (resolved against ``base``), b"" if invalid."""
    handle = (
        _parse(data, len(data))
        if base is None
        else _parse_with_base(data, len(data), base, len(base))
    )
    try:
        ref = _get_href(handle)
        result: bytes = _unpack(ref.data, ref.length) if ref.length else b""
        return result
    finally:
        _free(handle)


def canonicalize(url: str) -> str | None:
    """The canonical dedup key of an absolute http(s) URL, or ``None``.

    ``None`` for invalid URLs, relative references and every other scheme.
    Idempotent: ``canonicalize(canonicalize(u)) == canonicalize(u)``.

    >>> canonicalize("HTTP://Example.COM:80/a/./b/../%7euser?#top")
    'http://example.com/a/~user'
    """
    return _finish(_ada_href(_utf8(url), None))


def resolve(href: str, base: str) -> str | None:
    """Resolve a raw ``href`` found in a page against ``base``, as a browser
    would, then canonicalize it. ``None`` when the result is not an http(s)
    URL or nothing valid comes out, and whenever ``base`` itself is invalid
    (as with ``new URL(href, base)`` in a browser).

    >>> resolve(" ../b?x=1#frag\\n", "https://example.com/a/c/d")
    'https://example.com/a/b?x=1'
    >>> resolve("mailto:someone@example.com", "https://example.com/") is None
    True
    """
    return _finish(_ada_href(_utf8(href), _utf8(base)))


def join(href: str, base: str) -> str | None:
    """Plain WHATWG resolution of ``href`` against ``base``: any scheme, no
    canonicalization, fragment kept; ``None`` when invalid. For the rare callers
    that must see what a browser sees before our policy applies (``<base href>``).
    """
    raw = _ada_href(_utf8(href), _utf8(base))
    return raw.decode() if raw else None


#: Memo of ``resolve_many``: href or (base prefix, href) -> canonical URL or
#: None, see its docstring. Cleared when it reaches ``_RESOLVE_CACHE_SIZE`` entries.
_RESOLVE_CACHE: Final[dict[object, str | None]] = {}
_RESOLVE_CACHE_SIZE: Final = 1 << 16
#: First characters after which a relative href may depend on the base's last
#: path segment, query or everything (``?x``, ``#x``, stripped whitespace).
_WHOLE_BASE_FIRST: Final = frozenset([chr(i) for i in range(33)] + ["?", "#", "\\"])
_ABSOLUTE_HTTP: Final = ("http://", "https://")


def _base_prefixes(base: bytes) -> tuple[str, str] | None:
    """(origin, directory) prefixes of an ada-serialized http(s) URL:
    ``https://u@h:1`` and ``https://u@h:1/a/b/`` for ``https://u@h:1/a/b/c?q``."""
    if not base.startswith(_HTTP_PREFIXES):
        return None
    text = base.decode()
    slash = text.index("/", 8 if text[4] == "s" else 7)  # the path always starts with "/"
    end = len(text)
    for stop in "?#":
        i = text.find(stop, slash, end)
        if i >= 0:
            end = i
    return text[:slash], text[: text.rindex("/", slash, end) + 1]


def resolve_many(hrefs: Iterable[str], base: str) -> list[str]:
    """Canonical absolute http(s) URLs of a page's hrefs: de-duplicated, in
    first-seen order, everything else (other schemes, invalid) silently left out.

    Equivalent to ``[resolve(h, base) for h in hrefs]`` without ``None`` and
    duplicates, only faster: this is the per-page fast path.

    Pages of one site repeat most of their links, so results are memoized in a
    bounded module-level table, keyed by the part of the base URL that the href
    can depend on (WHATWG "relative state"):

    - ``http://...``/``https://...``: nothing, the href is absolute;
    - starts with ``/`` (or ``//``, ``/\\``): the base's scheme and authority;
    - starts with anything else and has no ``:`` (so no scheme that could be the
      base's own, like ``http:?x``): the base up to its last path ``/``;
    - otherwise (``?q``, ``#f``, leading whitespace, ``x:y``): not memoized.

    The base is first serialized by ada, so the prefixes are those of the parsed
    URL, never of raw text that parsing would change (``/a/b/..``).
    """
    base_b = _ada_href(_utf8(base), None) or _utf8(base)
    base_len = len(base_b)
    prefixes = _base_prefixes(base_b)
    origin, directory = prefixes if prefixes is not None else ("", "")
    cache = _RESOLVE_CACHE if prefixes is not None else {}
    whole_base_first = _WHOLE_BASE_FIRST
    absolute_http = _ABSOLUTE_HTTP
    parse = _parse_with_base
    get_href = _get_href
    free = _free
    unpack = _unpack
    finish = _finish
    seen_raw: set[str] = set()
    seen: set[str] = set()
    out: list[str] = []
    for href in hrefs:
        if href in seen_raw:
            continue
        seen_raw.add(href)
        key: object = None
        first = href[:1]
        if first == "/":
            key = (origin, href)
        elif first == "h" and href.startswith(absolute_http):
            key = href
        elif first and first not in whole_base_first and ":" not in href:
            key = (directory, href)
        if key is not None:
            url = cache.get(key, "")  # "" = not memoized: no URL is empty
            if url != "":
                if url is not None and url not in seen:
                    seen.add(url)
                    out.append(url)
                continue
        try:
            data = href.encode()
        except UnicodeEncodeError:
            data = _utf8(href)
        handle = parse(data, len(data), base_b, base_len)
        ref = get_href(handle)
        raw: bytes = unpack(ref.data, ref.length) if ref.length else b""
        free(handle)
        url = finish(raw)
        if url is not None and url not in seen:
            seen.add(url)
            out.append(url)
        if key is not None:
            if len(cache) >= _RESOLVE_CACHE_SIZE:
                cache.clear()
            cache[key] = url
    return out


def split_authority(url: str) -> tuple[str, str, str]:
    """(scheme, host, port) of a canonical http(s) URL; port '' when default."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in DEFAULT_PORTS:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    end = len(rest)
    for stop in "/?#":
        i = rest.find(stop, 0, end)
        if i >= 0:
            end = i
    authority = rest[:end]
    authority = authority[authority.rfind("@") + 1 :]
    if authority.endswith("]") or ":" not in authority:
        return scheme, authority, ""
    host, _, port = authority.rpartition(":")
    return scheme, host, port


@functools.lru_cache(maxsize=1024)
def host_port(url: str) -> str:
    """``"host:port"`` of a canonical http(s) URL, the port always explicit:
    the key for scope, robots.txt and per-host politeness.

    The URL must be canonical (output of ``canonicalize``/``resolve``): this is
    string slicing, not parsing, because it runs for every link. Cached: a
    page's URL is asked for again when its request ends.

    >>> host_port("https://example.com/a")
    'example.com:443'
    >>> host_port("http://[::1]:8080/")
    '[::1]:8080'

    Raises ``ValueError`` for anything that is not an http(s) URL.
    """
    scheme, host, port = split_authority(url)
    return f"{host}:{port or DEFAULT_PORTS[scheme]}"


_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_HOST_PORT: Final = re.compile(r"^[^/?#:@\[\]\\]+:[0-9]+(?:[/?#]|$)")


def parse_start_url(text: str) -> str:
    """A user-given start URL (CLI), validated and canonicalized.

    A missing scheme means ``http://``, as curl, wget and Scrapy assume:
    ``example.com/docs``, ``localhost:8000`` and ``[::1]:8080/`` are accepted.
    (https would be the better guess for most public sites today; we follow
    the tools users know. Give the scheme to be sure: the default scope is the
    start URL's host:port, so http and https are different sites to it.)
    An explicit scheme other than http/https is refused, as is anything the
    WHATWG parser rejects.

    Raises ``ValueError`` with a one-line message naming the input.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("empty start URL")
    match = _SCHEME.match(stripped)
    if match is not None and match.group(1).lower() in DEFAULT_PORTS:
        candidate = stripped
    elif match is None or _HOST_PORT.match(stripped) is not None:
        candidate = "http://" + stripped.lstrip("/")
    else:
        raise ValueError(
            f"unsupported scheme {match.group(1).lower()!r} in start URL "
            f"{mask_credentials(text)!r} (only http and https)"
        )
    href = _ada_href(_utf8(candidate), None)
    url = _finish(href)
    if url is None:
        raise ValueError(f"invalid start URL {mask_credentials(text)!r}")
    if _userinfo_end(href) >= 0:
        raise ConfigError(
            f"start URL {mask_credentials(text)!r} holds a user name or password: "
            "credentials in URLs are never sent; give them with auth=",
            "auth=",
        )
    return url


#: Userinfo in raw text: after ``//``, or (``ann:pw@host``, scheme-less) a
#: word with a ``:`` before its ``@``; up to the last ``@`` before the path,
#: as WHATWG reads it.
_RAW_USERINFO: Final = re.compile(
    r"""(//)([^\s'"<>/?#\\]*)@|(^|[\s'"(<])([^\s'"<>/?#\\:@]*:[^\s'"<>/?#\\]*)@"""
)


def mask_credentials(text: str) -> str:
    """``text`` with the userinfo of every URL in it masked, for messages:
    ``http://ann:secret@h/`` -> ``http://ann:***@h/``, and a lone user name
    (often a token: ``https://TOKEN@h/``) -> ``https://***@h/``. Raw text
    cannot be parsed reliably, so it errs on the side of masking.

    >>> mask_credentials("cannot fetch https://ann:pw@example.com/a")
    'cannot fetch https://ann:***@example.com/a'
    """
    if "@" not in text:
        return text
    return _RAW_USERINFO.sub(_mask_one, text)


def _mask_one(match: re.Match[str]) -> str:
    before, userinfo = match.group(1, 2) if match.group(1) else match.group(3, 4)
    user, colon, _ = userinfo.partition(":")
    return f"{before}{user}:***@" if colon else f"{before}***@"
