"""What a WARC file holds, record by record: WARC 1.1 records as gzip members.

``WarcRecords`` turns a fetch (or the crawl's settings, or a page's fields)
into the bytes of its records, ready for one write; ``WarcWriter``
(``writer.py``) owns the file they go to. Nothing here touches a file or
imports trio: the only inputs besides the arguments are the clock (a
record's date) and random record ids.

What is written
---------------

* One ``warcinfo`` record when a writer opens the file, new or resumed (WARC 1.1
  §6.1: a warcinfo record describes the records after it, up to the next
  one). It names the software (``trio-crawl/<version>``) and the crawl's
  settings.
* Per fetched page, in one write: a ``response`` record, the ``request`` record
  that produced it and, if the engine passes fields, a ``metadata`` record.
  The last two carry ``WARC-Concurrent-To`` with the response's record id. The
  response comes first, as in warcio and Heritrix: indexers look for a request
  *after* its response.
* With ``dedup=True``, a page whose body is byte-identical to one already
  stored in this session gets a ``revisit`` record instead. The revisit has the
  ``identical-payload-digest`` profile and holds only the HTTP head. It
  points at the first capture with ``WARC-Refers-To``,
  ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date``.
* With ``revisit_of`` (a recrawl found the page unchanged), a ``revisit``
  record that refers to a capture of an *earlier* crawl (``RevisitOf``, in
  ``revisit.py``), with the WARC 1.1 profile the caller names.
  ``identical-payload-digest`` (a body equal to the earlier one) holds this
  answer's HTTP head, as above. ``server-not-modified`` (a 304) holds no
  block at all (Content-Length 0, as §6.7.3 allows): pywb serves a revisit
  whose head is a 304 as an empty 304, never the body it stands for, while
  a revisit without a head is served as the capture it refers to, body and
  head. The 304's own status line and headers are kept, as received, in
  the exchange's ``metadata`` record (``http-response``,
  ``http-response-headers``), and the request record holds the validators
  sent.

Each record has ``WARC-Block-Digest`` (SHA-1, base32), and each response also has
``WARC-Payload-Digest``. Every record is its own gzip member, as the spec's
annex recommends for ``.warc.gz``.

The decoded-body rule
---------------------

Fetchers hand over the *decoded* body: gzip, deflate and br are already undone.
So the stored HTTP head is rewritten to match the stored bytes.
``Content-Encoding`` and ``Transfer-Encoding`` are dropped, and
``Content-Length`` is set to the stored body's length. When a stored value
differs from what the server sent, the server's value is kept as
``X-Crawler-Original-Content-Encoding``, ``X-Crawler-Original-Transfer-Encoding``
or ``X-Crawler-Original-Content-Length``. A replay tool can then serve the
record as it is. The price is that the record is not the exact bytes that
crossed the wire. Header names are lower case, as the fetcher reports them,
and a header the server repeated is one line, its values joined with ", ".

Truncation
----------

A body that was not fully downloaded is stored as far as it was, with
``WARC-Truncated`` set to one of the values that WARC 1.1 §5.13 defines:

* ``unspecified``: a body the crawler chose not to download. That is a
  non-HTML response without ``--all-bodies`` (``FetchResult.body_skipped``).
  No size or time limit caused it, so "length" and "time" would be false.
  This is the default for ``body_skipped`` results.
* ``length``: the body passed ``--max-bytes``. The engine passes it for a
  partial result it was given.
* ``time``: the body was cut by a deadline.
* ``disconnect``: the peer closed the connection mid-body.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from ...core.digest import sha1_digest as _sha1
from ...core.models import FetchResult
from ...core.version import VERSION
from .members import GZ_HEADER, GZ_MAGIC, GZ_SUBFIELD, PLAIN_GZ_HEADER_SIZE
from .revisit import PROFILES, RevisitOf, Stored

#: One record, or several, as the buffers of one ``os.writev``.
Parts = list[bytes | memoryview]

try:  # ISA-L deflate: 3-4x faster than zlib at level 1, and smaller output
    from isal import isal_zlib

    _isal_compress: Callable[..., bytes] | None = isal_zlib.compress
except ImportError:  # pragma: no cover - the warc extra installs it
    _isal_compress = None

#: Whether ISA-L (from the ``warc`` extra) is there. Without it the writer uses
#: zlib and costs about twice the CPU; a CLI that wants the fast path can refuse
#: ``--warc`` with ``WARC_EXTRA_MESSAGE`` when this is False.
HAVE_ISAL: Final = _isal_compress is not None

#: The one-line message for a missing optional dependency.
WARC_EXTRA_MESSAGE: Final = "--warc needs the optional dependency: pip install 'trio-crawl[warc]'"

WARC_VERSION: Final = "WARC/1.1"
#: ``WARC-Truncated`` values defined by WARC 1.1 §5.13.
TRUNCATED_REASONS: Final = frozenset({"length", "time", "disconnect", "unspecified"})
#: The profile of the revisits that in-crawl dedup writes.
REVISIT_PROFILE: Final = PROFILES["identical-payload-digest"]
#: Deflate level of each record. On the benchmark's HTML, zlib's level 1 output
#: is about 13% bigger than level 6, for half the CPU. ISA-L's level 1 output is
#: smaller than zlib's level 1, for half of that CPU again
#: (``benchmarks/bench_warc.py``).
DEFAULT_COMPRESSLEVEL: Final = 1
#: With ``dedup``, bodies shorter than this are always stored: a revisit record's
#: head would cost about as much as the body.
DEDUP_MIN_BYTES: Final = 1024

_REASONS: Final = {s.value: s.phrase for s in HTTPStatus}
#: Response headers that describe the wire form of a body we store decoded.
_WIRE_HEADERS: Final = frozenset({"content-encoding", "transfer-encoding", "content-length"})
_ORIGINAL_PREFIX: Final = "x-crawler-original-"


def _record_id() -> str:
    """``<urn:uuid:...>`` with a random (version 4) UUID, minus uuid's overhead."""
    h = os.urandom(16).hex()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}>"


def _warc_date(t: float) -> str:
    """W3C-ISO8601 with microseconds, as WARC 1.1 §5.4 allows."""
    whole = int(t)
    micros = int((t - whole) * 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def new_record_id() -> str:
    """A new ``WARC-Record-ID``: ``<urn:uuid:...>``, a random (version 4) UUID.
    A caller that must know an exchange's record id before it is written
    (the crawl, whose WARC is written by another process) makes it here."""
    return _record_id()


def warc_date(t: float) -> str:
    """The ``WARC-Date`` written for a capture begun at ``t`` (epoch seconds)."""
    return _warc_date(t)


def _clean(value: str) -> str:
    """A header value on one line (a CR or LF in it would forge a header)."""
    if "\r" in value or "\n" in value:
        return " ".join(value.splitlines())
    return value


def stored_response_headers(headers: Mapping[str, str], body_length: int) -> list[tuple[str, str]]:
    """The HTTP header lines stored for a decoded body of ``body_length`` bytes.

    Drops ``content-encoding`` and ``transfer-encoding``, sets ``content-length``
    to ``body_length``, and keeps a changed server value as
    ``x-crawler-original-<name>``. Other headers are kept in order, with their
    names lower case.
    """
    out: list[tuple[str, str]] = []
    originals: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name in _WIRE_HEADERS:
            if name != "content-length" or value.strip() != str(body_length):
                originals.append((_ORIGINAL_PREFIX + name, _clean(value)))
            continue
        out.append((name, _clean(value)))
    out.append(("content-length", str(body_length)))
    out.extend(originals)
    return out


def not_modified_fields(
    protocol: str, status: int, headers: Mapping[str, str]
) -> dict[str, object]:
    """The ``metadata`` fields that keep a 304's own HTTP head: its status
    line and its header lines as received (names lower case, in order).
    A server-not-modified revisit holds no HTTP head (see ``WarcRecords``),
    so that replay tools serve the capture it refers to; this is where the
    304's head goes instead."""
    return {
        "http-response": f"{protocol} {status} {_REASONS.get(status, '')}".rstrip(),
        "http-response-headers": [[name, value] for name, value in headers.items()],
    }


def _http_head(protocol: str, status: int, lines: list[tuple[str, str]]) -> bytes:
    """An HTTP response head: status line, header lines, blank line."""
    return "".join(
        [f"{protocol} {status} {_REASONS.get(status, '')}\r\n"]
        + [f"{n}: {v}\r\n" for n, v in lines]
        + ["\r\n"]
    ).encode("utf-8")


def check_revisit(revisit_of: RevisitOf, result: FetchResult) -> None:
    """Refuse a revisit that would say something false (``ValueError``): a
    server-not-modified revisit is for a 304, an identical-payload-digest
    one for a body that was read. (The writer also checks the digest; this
    part is cheap enough for the crawl's side of the writer process.)"""
    if revisit_of.profile == "server-not-modified":
        if result.status != 304:
            raise ValueError(f"a server-not-modified revisit is for a 304, not {result.status}")
    elif result.status == 304 or result.body_skipped:
        raise ValueError("an identical-payload-digest revisit is for a body that was read")


def _check_digest(revisit_of: RevisitOf, payload_digest: str, truncated: str | None) -> None:
    """An identical-payload-digest revisit is for the whole body of that digest."""
    if revisit_of.profile == "identical-payload-digest" and (
        truncated is not None or payload_digest != revisit_of.payload_digest
    ):
        raise ValueError(
            f"an identical-payload-digest revisit needs the whole body of digest "
            f"{revisit_of.payload_digest}, not {payload_digest}"
            + (f" (truncated: {truncated})" if truncated else "")
        )


def _target_and_host(url: str) -> tuple[str, str]:
    """The request-target (path and query) and Host of an absolute http(s) URL."""
    _, sep, rest = url.partition("://")
    if not sep:
        parts = urlsplit(url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), parts.netloc
    cut = len(rest)
    for ch in "/?#":
        i = rest.find(ch)
        if 0 <= i < cut:
            cut = i
    host, target = rest[:cut], rest[cut:].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target
    return target, host.rpartition("@")[2]


def _header_lines(headers: Mapping[str, str]) -> str:
    """Request header lines; ``Host`` is left out (it is written from the URL)."""
    return "".join(
        f"{name}: {_clean(value)}\r\n" for name, value in headers.items() if name.lower() != "host"
    )


def _gzip_function(level: int, compressor: str) -> Callable[[bytes], bytes]:
    """``data -> one gzip member`` (a plain 10-byte header, deflate, trailer)."""
    if compressor not in ("auto", "isal", "zlib"):
        raise ValueError(f"compressor must be auto, isal or zlib, not {compressor!r}")
    isal_compress = _isal_compress
    if compressor == "isal" and isal_compress is None:
        raise ModuleNotFoundError(WARC_EXTRA_MESSAGE)
    if isal_compress is not None and compressor != "zlib" and level <= 3:
        return lambda data: isal_compress(data, level, wbits=31)
    zlib_compress = zlib.compress
    return lambda data: zlib_compress(data, level, wbits=31)


class _Capture(NamedTuple):
    uri: str
    date: str
    record_id: str


def _fields_block(fields: Mapping[str, object]) -> bytes:
    """``application/warc-fields``: one ``name: value`` line per field."""
    lines = []
    for name, value in fields.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{_clean(str(name))}: {_clean(text)}\r\n")
    return "".join(lines).encode("utf-8")


def truncation(result: FetchResult, truncated: str | None) -> str | None:
    """The ``WARC-Truncated`` value of ``result``: ``truncated`` when given
    (one of ``TRUNCATED_REASONS``, else ``ValueError``), "unspecified" for a
    ``body_skipped`` result, else None (the body is whole)."""
    if truncated is None and result.body_skipped:
        truncated = "unspecified"
    if truncated is not None and truncated not in TRUNCATED_REASONS:
        raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATED_REASONS)}")
    return truncated


class WarcRecords:
    """The records of one WARC file, each as one gzip member (see the module
    docstring for what each holds); ``WarcWriter`` writes what they return.

    Keeps what later records refer to: the current ``warcinfo_id`` and, with
    ``dedup``, the first capture of each body (for revisit records). Counts
    ``records``, ``revisits`` and ``raw_bytes`` (before compression).
    """

    def __init__(
        self,
        *,
        request_headers: Mapping[str, str] | None = None,
        compresslevel: int = DEFAULT_COMPRESSLEVEL,
        compressor: str = "auto",
        dedup: bool = False,
        warcinfo_id: str | None = None,
    ) -> None:
        self._default_request_headers = _header_lines(request_headers or {})
        self._gzip = _gzip_function(compresslevel, compressor)
        self._dedup: dict[str, _Capture] | None = {} if dedup else None
        #: The ``warcinfo`` record the next records refer to (``WARC-Warcinfo-ID``).
        self.warcinfo_id = warcinfo_id
        self.records = 0
        self.revisits = 0
        self.raw_bytes = 0

    def warcinfo(self, info: Mapping[str, object], filename: str) -> tuple[str, Parts]:
        """A ``warcinfo`` record: the software, the format and ``info`` (the
        crawl's settings). Returns its WARC-Record-ID and its bytes; the caller
        makes it ``warcinfo_id`` once it is written."""
        fields: dict[str, object] = {
            "software": f"trio-crawl/{VERSION}",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.1/",
            "http-body": "decoded: content-encoding removed, content-length of the stored "
            "body; the server's values in x-crawler-original-* headers",
        }
        fields.update(info)
        record_id = _record_id()
        head = f"WARC-Type: warcinfo\r\nWARC-Record-ID: {record_id}\r\n"
        head += f"WARC-Date: {_warc_date(time.time())}\r\n"
        if filename:
            head += f"WARC-Filename: {_clean(filename)}\r\n"
        return record_id, self._record(head, "application/warc-fields", _fields_block(fields))

    def exchange(
        self,
        *,
        url: str,
        result: FetchResult,
        request_headers: Mapping[str, str] | None,
        method: str,
        truncated: str | None,
        ip: str | None,
        protocol: str | None,
        metadata: Mapping[str, object] | None,
        date: float | None,
        revisit_of: RevisitOf | None = None,
        record_id: str | None = None,
    ) -> tuple[Stored, Parts]:
        """One fetch: response (or revisit), request, optional metadata, as
        ``WarcWriter.write_capture`` describes them (``truncated`` already
        checked by ``truncation``). Returns the response's (or revisit's)
        record id and WARC date, and the bytes of all its records."""
        protocol = protocol or "HTTP/1.1"
        warc_date = _warc_date(time.time() - result.elapsed if date is None else date)
        body = result.body if result.network_body is None else result.network_body
        status = result.status
        if revisit_of is not None and revisit_of.profile == "server-not-modified":
            http_head = b""  # the 304's head goes to the metadata record
            metadata = {
                **(metadata or {}),
                **not_modified_fields(protocol, status, result.headers),
            }
        else:
            http_head = _http_head(
                protocol, status, stored_response_headers(result.headers, len(body))
            )
        payload_digest = _sha1(body)
        response_id = record_id or _record_id()
        common = f"WARC-Record-ID: {response_id}\r\nWARC-Date: {warc_date}\r\n"
        common += f"WARC-Target-URI: {_clean(url)}\r\n"
        if self.warcinfo_id is not None:
            common += f"WARC-Warcinfo-ID: {self.warcinfo_id}\r\n"
        if ip:
            common += f"WARC-IP-Address: {_clean(ip)}\r\n"

        if revisit_of is not None:
            check_revisit(revisit_of, result)
            _check_digest(revisit_of, payload_digest, truncated)
            head = "WARC-Type: revisit\r\n" + common + revisit_of.fields()
            response = self._record(head, "application/http;msgtype=response", http_head)
            self.revisits += 1
            self._remember(revisit_of)
        elif first := self._first_capture(
            payload_digest, url, warc_date, response_id, body, truncated
        ):
            head = "WARC-Type: revisit\r\n" + common
            head += (
                f"WARC-Profile: {REVISIT_PROFILE}\r\n"
                f"WARC-Refers-To: {first.record_id}\r\n"
                f"WARC-Refers-To-Target-URI: {_clean(first.uri)}\r\n"
                f"WARC-Refers-To-Date: {first.date}\r\n"
                f"WARC-Payload-Digest: {payload_digest}\r\n"
            )
            response = self._record(head, "application/http;msgtype=response", http_head)
            self.revisits += 1
        else:
            head = "WARC-Type: response\r\n" + common
            if truncated is not None:
                head += f"WARC-Truncated: {truncated}\r\n"
            head += f"WARC-Payload-Digest: {payload_digest}\r\n"
            response = self._record(head, "application/http;msgtype=response", http_head, body)

        target, host = _target_and_host(url)
        request_block = (
            f"{method} {target} {protocol}\r\nHost: {host}\r\n"
            + self._default_request_headers
            + (_header_lines(request_headers) if request_headers else "")
            + "\r\n"
        ).encode("utf-8")
        head = (
            f"WARC-Type: request\r\nWARC-Record-ID: {_record_id()}\r\n"
            f"WARC-Date: {warc_date}\r\nWARC-Target-URI: {_clean(url)}\r\n"
            f"WARC-Concurrent-To: {response_id}\r\n"
        )
        parts = response + self._record(head, "application/http;msgtype=request", request_block)
        if metadata:
            parts += self.metadata(url, metadata, warc_date=warc_date, concurrent_to=response_id)[
                1
            ]
        return Stored(response_id, warc_date), parts

    def metadata(
        self,
        url: str,
        fields: Mapping[str, object],
        *,
        warc_date: str | None = None,
        concurrent_to: str | None = None,
    ) -> tuple[str, Parts]:
        """A ``metadata`` record about ``url`` (dated now unless ``warc_date``).
        Returns its WARC-Record-ID and its bytes."""
        record_id = _record_id()
        warc_date = warc_date or _warc_date(time.time())
        head = f"WARC-Type: metadata\r\nWARC-Record-ID: {record_id}\r\n"
        head += f"WARC-Date: {warc_date}\r\nWARC-Target-URI: {_clean(url)}\r\n"
        if concurrent_to:
            head += f"WARC-Concurrent-To: {concurrent_to}\r\n"
        return record_id, self._record(head, "application/warc-fields", _fields_block(fields))

    def _first_capture(
        self,
        digest: str,
        url: str,
        warc_date: str,
        record_id: str,
        body: bytes,
        truncated: str | None,
    ) -> _Capture | None:
        """With dedup: the earlier capture of an identical body, else None (and
        remember this one)."""
        if self._dedup is None or truncated is not None or len(body) < DEDUP_MIN_BYTES:
            return None
        first = self._dedup.get(digest)
        if first is None:
            self._dedup[digest] = _Capture(url, warc_date, record_id)
        return first

    def _remember(self, revisit_of: RevisitOf) -> None:
        """With dedup: a body this crawl stores as a revisit of an earlier
        crawl's capture; later copies in this crawl refer to that capture."""
        if self._dedup is not None and revisit_of.record_id is not None:
            self._dedup.setdefault(
                revisit_of.payload_digest,
                _Capture(revisit_of.target_uri, revisit_of.warc_date, revisit_of.record_id),
            )

    def _record(self, head: str, content_type: str, block: bytes, payload: bytes = b"") -> Parts:
        """One record as a gzip member: ``head`` holds its named fields (CRLF
        after each), and ``block`` followed by ``payload`` is its content block."""
        warc_head = (
            f"{WARC_VERSION}\r\n{head}Content-Type: {content_type}\r\n"
            f"WARC-Block-Digest: {_sha1(block, payload)}\r\n"
            f"Content-Length: {len(block) + len(payload)}\r\n\r\n"
        ).encode()
        data = b"".join((warc_head, block, payload, b"\r\n\r\n"))
        self.raw_bytes += len(data)
        self.records += 1
        member = self._gzip(data)
        length = GZ_HEADER.size + len(member) - PLAIN_GZ_HEADER_SIZE
        # XFL=4 ("fastest"), OS=255 ("unknown"); then our subfield with the length.
        header = GZ_HEADER.pack(GZ_MAGIC, 0, 4, 255, 12, GZ_SUBFIELD, 8, length)
        return [header, memoryview(member)[PLAIN_GZ_HEADER_SIZE:]]
