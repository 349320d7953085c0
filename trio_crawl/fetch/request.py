"""What every fetcher checks before a request reaches its HTTP library.

Libraries disagree about bad input: httpx refuses a header value with a line
break as a protocol error, libcurl's binding raised a bare ``ValueError``,
and both raised ``UnicodeEncodeError`` on a non-ASCII value. Such input
is refused here instead, the same way for every fetcher, before any library
sees it:

1. Request headers (``request_headers``): a name must be an RFC 9110 token;
   a value may hold visible ASCII, spaces and tabs only (no CR, LF, NUL or
   other control characters, which could smuggle a header, and no non-ASCII
   text, which no library here encodes). Whitespace around a value is not
   part of it (RFC 9110, 5.5) and is dropped. Anything else is
   ``FetchError("protocol")``, as a malformed request.
2. The URL (``check_url``): a control character (C0, DEL) is
   ``FetchError("connect")``, as an unusable URL is everywhere else.

Pure: no trio, no HTTP client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..core.identity import HEADER_NAME as _TOKEN
from ..core.identity import HEADER_VALUE as _VALUE
from ..errors import FetchError

__all__ = ["check_url", "request_headers"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def request_headers(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """``headers`` checked and trimmed (rule 1); ``None`` when there are none."""
    if not headers:
        return None
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise FetchError("protocol", f"invalid request header name {name!r}")
        if not _VALUE.fullmatch(value):
            raise FetchError(
                "protocol",
                f"invalid value of request header {name!r}: "
                "a line break, NUL, other control character or non-ASCII text",
            )
        checked[name] = value.strip(" \t")
    return checked


def check_url(url: str) -> None:
    """Refuse a URL with a control character in it (rule 2)."""
    if not (url.isascii() and url.isprintable()) and _CONTROL.search(url):
        raise FetchError("connect", f"invalid URL {url!r}: it contains a control character")
