"""Undoing ``Content-Encoding`` in bounded steps, for every fetcher (httpx
and asks read raw bodies; curl is asked for them undecoded, because
libcurl's decoders accept a stream cut short).

Rules:

1. No step yields more than ``STEP`` (64 KiB) decoded bytes, so a caller
   that counts them can stop a decompression bomb at its cap, having
   inflated at most one step too many.
2. ``gzip``/``x-gzip`` and ``deflate`` (zlib-wrapped per RFC 9110, or raw, as
   some servers send it: the first two bytes tell) always; ``br`` only with
   brotli >= 1.2, whose decompressor can cap one call's output. Older brotli
   is neither advertised (``ACCEPT_ENCODING``) nor decoded.
3. ``identity`` and unknown codings pass through undecoded, as browsers do.
   Corrupt data raises ``zlib.error`` / ``brotli.error``: each fetcher's
   ``error_kind`` makes that ``decode``.
4. A body that ends before its compressed stream does (a gzip member without
   its trailer, a deflate or brotli stream without its last block) is
   corrupt too, raised by ``finish``: a truncated page is never a complete
   one. An empty body (a 304, a HEAD answer) is not a stream and passes.
5. Nothing is cut silently at the end of a stream either. A gzip body may
   hold several members, one after the other (RFC 1952, 2.2): every one is
   read, as gzip(1) and Python's ``gzip`` do (zlib alone stops after the
   first, and the links of the rest were lost). Bytes after the end that do
   not begin a member, or after the end of a deflate stream, are corrupt.

Pure: no trio, no HTTP client.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

try:
    import brotli as _brotli
except ImportError:  # pragma: no cover - brotli is an optional extra
    _brotli = None

__all__ = ["ACCEPT_ENCODING", "STEP", "BodyDecoder", "is_decode_error"]

STEP = 64 * 1024  # most decoded bytes produced per decompressor call


def _brotli_is_bounded() -> bool:
    """brotli >= 1.2 can cap the output of one call; older versions cannot,
    so we neither advertise nor decode ``br`` with them. Another package that
    installs a module named ``brotli`` (brotlipy, which pywb pulls in) has no
    ``process`` at all: the same answer, not an import error."""
    if _brotli is None:
        return False
    try:
        _brotli.Decompressor().process(b"", output_buffer_limit=1)
    except (TypeError, AttributeError):
        return False
    return True


_BROTLI = _brotli_is_bounded()
ACCEPT_ENCODING = "gzip, deflate, br" if _BROTLI else "gzip, deflate"


class _Zlib:
    """gzip or deflate. Deflate is zlib-wrapped per RFC 9110, but some servers
    send raw deflate: the first two bytes tell which, so deflate holds back
    input until it has two."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding == "gzip"
        self._d: Any = zlib.decompressobj(zlib.MAX_WBITS | 16) if self._gzip else None
        self._pending = b""
        self._fed = False  # any input at all (rule 4)

    def _choose(self) -> bytes:
        data, self._pending = self._pending, b""
        head = data[:2]
        wrapped = len(head) == 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        self._d = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._fed = self._fed or bool(data)
        if self._d is None:
            self._pending += data
            if len(self._pending) < 2:
                return
            data = self._choose()
        while data:
            out = self._d.decompress(data, STEP)
            while out:
                yield out
                if self._d.eof:  # what is left is in unused_data (unconsumed_tail too)
                    break
                out = self._d.decompress(self._d.unconsumed_tail, STEP)
            data = self._after_end()

    def _after_end(self) -> bytes:
        """What follows the end of the stream in what was fed (rule 5): a
        gzip stream starts its next member on it; b"" when nothing does."""
        if not self._d.eof or not self._d.unused_data:
            return b""
        if not self._gzip:
            raise zlib.error("data after the end of the deflate stream")
        data: bytes = self._d.unused_data
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)  # the next member
        return data  # not a member: zlib says "incorrect header check"

    def finish(self) -> Iterator[bytes]:
        if self._d is None:
            if not self._pending:
                return
            yield from self.feed(self._choose())
        yield self._d.flush()
        if self._fed and not self._d.eof:
            raise zlib.error("the body ends before its compressed stream does (truncated)")


class _Brotli:
    def __init__(self) -> None:
        assert _brotli is not None
        self._d = _brotli.Decompressor()
        self._fed = False  # any input at all (rule 4)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not data:
            return
        self._fed = True
        out = self._d.process(data, output_buffer_limit=STEP)
        while True:
            if out:
                yield out
            # brotli wants empty input until it has emitted what it holds
            if self._d.can_accept_more_data() or self._d.is_finished():
                return
            out = self._d.process(b"", output_buffer_limit=STEP)

    def finish(self) -> Iterator[bytes]:
        if self._fed and not self._d.is_finished():
            assert _brotli is not None
            raise _brotli.error("the body ends before its compressed stream does (truncated)")
        yield from ()


class BodyDecoder:
    """Undo ``Content-Encoding`` incrementally, never producing more than
    64 KiB per step, so the caller can stop as soon as its cap is passed.

    ``feed(chunk)`` and ``finish()`` yield decoded pieces. Codings are undone
    in reverse order of application; ``identity`` and unknown codings pass
    through. Raises ``zlib.error`` / ``brotli.error`` on corrupt data, and
    from ``finish`` on a stream cut short.
    """

    def __init__(self, content_encoding: str | None) -> None:
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        self._stages: list[_Zlib | _Brotli] = []
        for coding in reversed(codings):
            if coding in ("gzip", "x-gzip"):
                self._stages.append(_Zlib("gzip"))
            elif coding == "deflate":
                self._stages.append(_Zlib("deflate"))
            elif coding == "br" and _BROTLI:
                self._stages.append(_Brotli())

    @property
    def passes_through(self) -> bool:
        """Whether no coding is undone (none, ``identity``, or only unknown ones)."""
        return not self._stages

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through(0, iter((data,)))

    def finish(self) -> Iterator[bytes]:
        return self._finish_from(0)

    def _through(self, index: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
        if index == len(self._stages):
            yield from pieces
            return
        stage = self._stages[index]
        for piece in pieces:
            yield from self._through(index + 1, stage.feed(piece))

    def _finish_from(self, index: int) -> Iterator[bytes]:
        if index == len(self._stages):
            return
        yield from self._through(index + 1, self._stages[index].finish())
        yield from self._finish_from(index + 1)


def is_decode_error(exc: BaseException) -> bool:
    """Whether ``exc`` is corrupt compressed data (zlib or brotli)."""
    return isinstance(exc, zlib.error) or (_brotli is not None and isinstance(exc, _brotli.error))
