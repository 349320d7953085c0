"""One response, as libcurl's header and body callbacks deliver it. Pure.

The decisions about a response are those of every fetcher (``fetch.body``:
header joining, the HTML-only skip, draining, the size caps; ``fetch.decode``:
content codings); this module applies them to curl's raw header lines and
raw body pieces, and says when to abort the transfer. Three decisions are
curl's alone:

1. No silent resend. libcurl sends a request again, on another connection
   (up to 5 times), when a reused keep-alive connection closes before any
   answer; the crawler's ``--retries`` would no longer bound what a server
   receives. ``request_sent`` (curl's pre-request callback) refuses a send
   that follows a request with no answer at all: the fetch is ``reset``, and
   the crawler's own retry policy decides, keep-alive untouched. A request
   that follows an answer (an authentication challenge that libcurl answers
   itself) is not a resend and goes.
2. A status line whose code is not three digits is ``protocol`` (libcurl
   accepts ``HTTP/1.1 2000``), and so is a head that does not begin with
   ``HTTP/`` (libcurl accepts ``http/1.1 200 OK``, the case-sensitive
   HTTP-name of RFC 9112 does not), checked once per head, at its end. A
   transfer libcurl ends without error before the end of the head
   (``HTTP/1.1 200 OK``, then the close) is ``reset``, as in every fetcher:
   it is no answer, not an empty 200.
3. Bodies arrive undecoded (libcurl's decoders accept a gzip stream cut
   short) and are decoded here in bounded steps, like every fetcher: a
   compressed body that ends before its stream does is ``decode``.
"""

from __future__ import annotations

from ...core.models import FetchResult
from ...errors import FetchError
from ..body import content_length, declared_too_large, drains, join_header, skips_body, too_large
from ..decode import BodyDecoder, is_decode_error
from .errors import CurlError

__all__ = ["Collector"]

#: First characters of an obsolete folded line (a continuation of the last field).
_FOLD = (" ", "\t")


class Collector:
    """Builds one response from curl's header and body callbacks.

    Knows nothing of curl or trio: ``request_sent`` is told of every request
    curl is about to send, ``header_line`` gets every raw header line (status
    lines included), ``body`` every raw body piece; each returns ``False`` to
    ask for the transfer to be aborted. ``reset`` readies it for
    the next response (``any_body=True``: keep its body whatever its content
    type). Interim (1xx) heads are forgotten; lines after the final head
    (chunked trailers) are ignored.
    """

    __slots__ = (
        "_answered",
        "_decoder",
        "_fields",
        "abort",
        "any_body",
        "chunks",
        "declared",
        "drain",
        "failure",
        "head_done",
        "headers",
        "html_only",
        "http_version",
        "max_bytes",
        "requests",
        "set_cookies",
        "size",
        "skip",
        "status",
        "wire",
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
        self.size = 0  # decoded body bytes kept
        self.wire = 0  # body bytes received, before decoding (counted when encoded)
        self.requests = 0  # requests curl set out to send for this transfer
        self.declared: int | None = None
        self.head_done = False
        self.skip = False  # the body is unwanted (html_only and not HTML)
        self.drain = False  # ...but small: read it and drop it
        #: why we aborted the transfer: "too_large", "skipped", "failed", or None
        self.abort: str | None = None
        #: what a "failed" abort ends with: our ``FetchError``, or a decoder's error
        self.failure: Exception | None = None
        self._decoder: BodyDecoder | None = None  # None: the body is not encoded
        self._answered = False  # a status line came after the last request sent
        #: the raw field lines of the head being read, parsed at its end
        self._fields: list[bytes] = []

    def request_sent(self) -> bool:
        """curl is about to send a request; ``False`` refuses a resend (rule 1)."""
        self.requests += 1
        if self.requests == 1 or self._answered:
            self._answered = False
            return True
        return self._fail(
            FetchError(
                "reset",
                "the reused connection closed before any answer "
                "(libcurl's silent resend on another connection was refused)",
            )
        )

    def _fail(self, failure: Exception) -> bool:
        self.abort = "failed"
        self.failure = failure
        return False

    def header_line(self, line: bytes) -> bool:
        """One raw line of a head. A field line is only kept here: the head's
        fields are parsed together when its blank line comes (``_read_fields``),
        so the usual line costs curl's callback an append."""
        if self.head_done:
            return True  # trailers of a chunked body: not part of the head
        if line.startswith(b"HTTP/"):
            parts = line.split(None, 2)
            code = parts[1] if len(parts) > 1 else b""
            if len(code) != 3 or not code.isdigit():  # rule 2; bytes.isdigit is ASCII-only
                shown = line.rstrip(b"\r\n")[:100].decode("latin-1")
                return self._fail(FetchError("protocol", f"bad status line: {shown!r}"))
            self.http_version = parts[0].decode("ascii", "replace")
            self.status = int(code)
            self._answered = True
            self._fields.clear()
            return True
        if line.strip():
            self._fields.append(line)
            return True
        if self.http_version is None:  # rule 2: no status line began this head
            first = self._fields[0].rstrip(b"\r\n")[:100] if self._fields else b""
            return self._fail(FetchError("protocol", f"bad status line: {_decode(first)!r}"))
        try:
            self._read_fields()
        except FetchError as exc:  # two different Locations (``body.join_header``)
            return self._fail(exc)
        if 100 <= self.status < 200:
            self.http_version = None  # the real head must begin with its own status line
            return True  # an interim head ends; the real one follows
        return self._end_of_head()

    def _read_fields(self) -> None:
        """``headers`` and ``set_cookies`` from the head's field lines: names
        lower-cased, repeats joined (``body.join_header``), obsolete line
        folding unfolded, lines without a colon skipped (curl already judged
        the head acceptable).

        Once a page, about ten lines: the head is decoded in one call when it
        is all UTF-8 (as good as always; line by line, UTF-8 or else Latin-1,
        otherwise), and a name seen once is stored without ``join_header``'s
        call, which only a repeat needs."""
        lines = self._fields
        try:
            texts = b"".join(lines).decode("utf-8").split("\n")
        except UnicodeDecodeError:
            texts = []
        # curl hands over whole lines, each ending with its one LF: the joined
        # text splits back into the same lines, plus an empty tail
        if len(texts) == len(lines) + 1:
            texts.pop()
        else:
            texts = [_decode(line) for line in lines]
        headers: dict[str, str] = {}
        set_cookies: list[str] = []
        last: str | None = None  # the last name, for obs-fold lines
        for raw in texts:
            text = raw.rstrip("\r\n")
            if text[:1] in _FOLD:
                if last is not None:
                    headers[last] += " " + text.strip()
                continue
            name, sep, value = text.partition(":")
            if not sep:
                continue
            value = value.strip()
            last = name.strip().lower()
            if last in headers:
                join_header(headers, last, value)
            else:
                headers[last] = value
            if last == "set-cookie":
                set_cookies.append(value)
        lines.clear()
        self.headers = headers
        self.set_cookies = set_cookies

    def _end_of_head(self) -> bool:
        self.head_done = True
        self.declared = content_length(self.headers)
        if skips_body(self.html_only, self.any_body, self.headers.get("content-type")):
            self.skip = True
            return True  # decided at the first body write: a bodiless answer keeps its connection
        if declared_too_large(self.status, self.declared, self.max_bytes) is not None:
            self.abort = "too_large"
            return False
        coding = self.headers.get("content-encoding")
        if coding is not None:
            decoder = BodyDecoder(coding)
            self._decoder = None if decoder.passes_through else decoder
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
        if self._decoder is None:  # the usual case, inline
            self.size += len(data)
            if self.size > self.max_bytes:
                self.abort = "too_large"
                return False
            self.chunks.append(data)
            return True
        self.wire += len(data)
        if self.wire > self.max_bytes:
            self.abort = "too_large"
            return False
        try:
            return all(self._keep(piece) for piece in self._decoder.feed(data))
        except Exception as exc:
            if not is_decode_error(exc):
                raise
            return self._fail(exc)

    def _keep(self, piece: bytes) -> bool:
        self.size += len(piece)
        if self.size > self.max_bytes:
            self.abort = "too_large"
            return False
        self.chunks.append(piece)
        return True

    def _finish_decoding(self) -> Exception | None:
        """Decode what the decoder still holds; the error if the stream is
        corrupt or cut short (rule 3), else ``None``."""
        if self._decoder is None:
            return None
        try:
            for piece in self._decoder.finish():
                if not self._keep(piece):
                    return too_large(self.max_bytes)
        except Exception as exc:
            if not is_decode_error(exc):
                raise
            return exc
        return None

    def outcome(
        self, url: str, code: int, message: str, elapsed: float
    ) -> FetchResult | Exception:
        """The result of the finished transfer, given curl's code and message:
        a result, or a failure for the fetcher to raise: our own refusal
        (``FetchError``), a decoder's error, or curl's (``CurlError``)."""
        if self.skip:  # the head was complete; whatever became of the body, we did not want it
            return FetchResult(
                url, self.status, self.headers, b"", elapsed, True, self.http_version
            )
        if self.abort == "too_large":
            declared = declared_too_large(self.status, self.declared, self.max_bytes)
            if self.wire > self.max_bytes:
                return too_large(self.max_bytes, "on the wire")
            if self.size > self.max_bytes or declared is None:
                return too_large(self.max_bytes)
            return declared
        if self.failure is not None:
            return self.failure
        if code:
            return CurlError(code, message, sent=self.requests > 0)
        if not self.head_done:  # rule 2: closed before the end of the head
            return FetchError("reset", "the connection closed before the end of the head")
        failure = self._finish_decoding()
        if failure is not None:
            return failure
        body = b"".join(self.chunks)
        return FetchResult(url, self.status, self.headers, body, elapsed, False, self.http_version)


def _decode(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("latin-1")
