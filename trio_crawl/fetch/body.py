"""What every fetcher does with a response once its head has arrived.

The decisions are the same whatever the HTTP library, so they live here once:

1. Headers: names lower-cased, repeated fields joined with ``", "`` in
   arrival order (``join_header``), as ``FetchResult.headers`` promises.
   Except ``Location``, a single URI (RFC 9110, 10.2.2), whose joined
   values would name a URL no header named: a repeat of the same value is
   one field, two different values are ``protocol`` (Chromium's
   ERR_RESPONSE_HEADERS_MULTIPLE_LOCATION, Firefox's rule for duplicate
   Location, curl's "Multiple Location headers": none follows either one).
2. Skip: with ``html_only`` (and not ``any_body``), a response whose content
   type is not HTML-ish is not downloaded (``skips_body``): the result says
   ``body_skipped``.
3. Drain: a skipped body is still read and dropped when its declared length
   is at most ``DRAIN_LIMIT``, because keeping the connection is cheaper than
   closing it; a bigger or unsized one is abandoned with its connection
   (``drains``).
4. Declared size: a ``Content-Length`` above ``max_bytes`` is ``too_large``
   before a byte of the body is read, except on answers that never have a
   body (204, 304) (``declared_too_large``).
5. Counted size: more than ``max_bytes`` on the wire, or once decoded, is
   ``too_large`` as soon as it happens (``read_capped``, ``too_large``), so
   a decompression bomb is stopped early, never inflated whole.
6. Release: a response or socket is closed in a shielded scope bounded by
   ``CLOSE_GRACE`` (``close_shielded``), even when the fetch is being
   cancelled, so a cancelled fetch never keeps its connection or pool slot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping

import trio

from ..core.http import is_html_content_type
from ..errors import FetchError
from .decode import BodyDecoder

__all__ = [
    "CLOSE_GRACE",
    "DRAIN_LIMIT",
    "close_shielded",
    "content_length",
    "declared_too_large",
    "drains",
    "join_header",
    "joined_headers",
    "read_capped",
    "skips_body",
    "too_large",
]

DRAIN_LIMIT = 16 * 1024  # skipped bodies this small are read to keep the connection
CLOSE_GRACE = 2.0  # seconds a cancelled fetch may spend releasing its connection
_NO_BODY = frozenset({204, 304})  # answers whose Content-Length announces no body


def join_header(headers: dict[str, str], name: str, value: str) -> str:
    """Add one field to ``headers`` (rule 1); returns the lower-cased name.
    Raises ``FetchError("protocol")`` for a second, different ``Location``."""
    key = name.lower()
    old = headers.get(key)
    if old is None:
        headers[key] = value
    elif key != "location":
        headers[key] = f"{old}, {value}"
    elif value != old:
        shown = f"{old[:100]!r} and {value[:100]!r}"
        raise FetchError("protocol", f"two different Location headers: {shown}")
    return key


def joined_headers(fields: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``FetchResult.headers`` from ``(name, value)`` fields in arrival order."""
    headers: dict[str, str] = {}
    for name, value in fields:
        join_header(headers, name, value)
    return headers


def skips_body(html_only: bool, any_body: bool, content_type: str | None) -> bool:
    """Whether a response's body is left unread (rule 2)."""
    return html_only and not any_body and not is_html_content_type(content_type)


def content_length(headers: Mapping[str, str]) -> int | None:
    """The declared Content-Length, or None when absent or not a number."""
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


def drains(declared: int | None) -> bool:
    """Whether a skipped body of ``declared`` length is read anyway (rule 3)."""
    return declared is not None and declared <= DRAIN_LIMIT


def declared_too_large(status: int, declared: int | None, cap: int) -> FetchError | None:
    """The error for a body announced bigger than ``cap`` (rule 4), or None."""
    if declared is None or declared <= cap or status in _NO_BODY:
        return None
    return FetchError("too_large", f"Content-Length {declared} > max_bytes {cap}")


def too_large(cap: int, where: str = "once decoded") -> FetchError:
    """The error for a body that grew past ``cap`` bytes (rule 5)."""
    return FetchError("too_large", f"more than {cap} bytes {where}")


async def read_capped(chunks: AsyncIterator[bytes], encoding: str | None, cap: int) -> bytes:
    """Decode a raw body stream, raising ``too_large`` as soon as more than
    ``cap`` bytes arrive on the wire or come out of the decoder (rule 5)."""
    decoder = BodyDecoder(encoding)
    body = bytearray()
    wire = 0
    async for raw in chunks:
        wire += len(raw)
        if wire > cap:
            raise too_large(cap, "on the wire")
        for piece in decoder.feed(raw):
            body += piece
            if len(body) > cap:
                raise too_large(cap)
    for piece in decoder.finish():
        body += piece
        if len(body) > cap:
            raise too_large(cap)
    return bytes(body)


async def close_shielded(aclose: Callable[[], Awaitable[object]]) -> None:
    """Run ``aclose()`` even inside a cancelled scope, for at most
    ``CLOSE_GRACE`` seconds (rule 6)."""
    with trio.move_on_after(CLOSE_GRACE) as cleanup:
        cleanup.shield = True  # (the shield= argument needs trio >= 0.27)
        await aclose()
