"""One response, as libcurl's header and body callbacks deliver it. Pure.

The decisions about a response are those of every fetcher (``fetch.body``:
header joining, the HTML-only skip, draining, the size caps); this module
applies them to curl's raw header lines and decoded body pieces, and says
when to abort the transfer.
"""

from __future__ import annotations

from ...core.models import FetchError, FetchResult
from ..body import content_length, declared_too_large, drains, join_header, skips_body, too_large
from .errors import CurlError

__all__ = ["Collector"]


class Collector:
    """Builds one response from curl's header and body callbacks.

    Knows nothing of curl or trio: ``header_line`` gets every raw header line
    (status lines included), ``body`` every decoded body piece; each returns
    ``False`` to ask for the transfer to be aborted. ``reset`` readies it for
    the next response (``any_body=True``: keep its body whatever its content
    type). Interim (1xx) heads are forgotten; lines after the final head
    (chunked trailers) are ignored.
    """

    __slots__ = (
        "_last",
        "abort",
        "any_body",
        "chunks",
        "declared",
        "drain",
        "head_done",
        "headers",
        "html_only",
        "http_version",
        "max_bytes",
        "set_cookies",
        "size",
        "skip",
        "status",
    )

    def __init__(self, *, max_bytes: int, html_only: bool) -> None:
        self.max_bytes = max_bytes
        self.html_only = html_only
        self.reset()

    def reset(self, *, any_body: bool = False) -> None:
        self.any_body = any_body
        self.status = 0
        self.http_version: str | None = None  # from the status line: "HTTP/1.1", "HTTP/2"
        self.headers: dict[str, str] = {}
        #: each Set-Cookie field of the final head, unjoined (``fetch.identity``)
        self.set_cookies: list[str] = []
        self.chunks: list[bytes] = []
        self.size = 0
        self.declared: int | None = None
        self.head_done = False
        self.skip = False  # the body is unwanted (html_only and not HTML)
        self.drain = False  # ...but small: read it and drop it
        #: why we aborted the transfer: "too_large", "skipped", or None
        self.abort: str | None = None
        self._last: str | None = None  # last header name, for obs-fold lines

    def header_line(self, line: bytes) -> bool:
        if self.head_done:
            return True  # trailers of a chunked body: not part of the head
        if line.startswith(b"HTTP/"):
            parts = line.split(None, 2)
            self.http_version = parts[0].decode("ascii", "replace")
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            self.headers = {}
            self.set_cookies = []
            self._last = None
            return True
        if not line.strip():
            if 100 <= self.status < 200:
                return True  # an interim head ends; the real one follows
            return self._end_of_head()
        text = _decode_header(line).rstrip("\r\n")
        if text[:1] in (" ", "\t"):
            if self._last is not None:  # obsolete line folding: continue the last value
                self.headers[self._last] += " " + text.strip()
            return True
        name, sep, value = text.partition(":")
        if not sep:
            return True  # not a header; curl already judged the head acceptable
        self._last = join_header(self.headers, name.strip(), value.strip())
        if self._last == "set-cookie":
            self.set_cookies.append(value.strip())
        return True

    def _end_of_head(self) -> bool:
        self.head_done = True
        self.declared = content_length(self.headers)
        if skips_body(self.html_only, self.any_body, self.headers.get("content-type")):
            self.skip = True
            return True  # decided at the first body write: a bodiless answer keeps its connection
        if declared_too_large(self.status, self.declared, self.max_bytes) is not None:
            self.abort = "too_large"
            return False
        return True

    def body(self, data: bytes) -> bool:
        if self.skip:
            if self.drain:
                return True
            if drains(self.declared):
                self.drain = True
                return True
            self.abort = "skipped"
            return False
        self.size += len(data)
        if self.size > self.max_bytes:
            self.abort = "too_large"
            return False
        self.chunks.append(data)
        return True

    def outcome(
        self, url: str, code: int, message: str, elapsed: float
    ) -> FetchResult | FetchError | CurlError:
        """The result of the finished transfer, given curl's code and message:
        a result, our own refusal, or curl's failure (for the fetcher to raise)."""
        if self.skip:  # the head was complete; whatever became of the body, we did not want it
            return FetchResult(
                url, self.status, self.headers, b"", elapsed, True, self.http_version
            )
        if self.abort == "too_large":
            declared = declared_too_large(self.status, self.declared, self.max_bytes)
            if self.size > self.max_bytes or declared is None:
                return too_large(self.max_bytes)
            return declared
        if code:
            return CurlError(code, message)
        body = b"".join(self.chunks)
        return FetchResult(url, self.status, self.headers, body, elapsed, False, self.http_version)


def _decode_header(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("latin-1")
