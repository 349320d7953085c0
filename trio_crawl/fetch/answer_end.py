"""Where an HTTP/1.1 answer ends on the wire, and whether bytes came after it. Pure.

Why: a server may write an answer and, in the same write, more bytes (a
second answer nobody asked for, the rest of a body longer than its
Content-Length). httpcore reads them with the answer, keeps them in h11's
buffer, and reads them as the answer to the next request on that kept-alive
connection: the next URL was recorded with the stray answer. RFC 9112, 6.3:
a client must not take such bytes for a separate answer. Rule: a connection
with bytes left over after an answer is not used again (``spare``).

``AnswerEnd`` is fed what a connection reads after one request, as it
arrives, and follows only the framing: the head up to its blank line (its
status, ``Content-Length`` and ``Transfer-Encoding``; interim 1xx heads
skipped), then a sized body by counting, a chunked one by its size lines.
Body bytes are counted, never copied. It is conservative: when it cannot
follow (a body delimited by the close, an upgrade, a head it cannot read: h11
refuses those, or the connection closes anyway) it stops and says nothing.
"""

from __future__ import annotations

import re

__all__ = ["AnswerEnd"]

_BLANK_LINE = re.compile(rb"\n\r?\n")  # the end of a head, as h11 finds it
_MAX_LINE = 64 * 1024  # a head or chunk line longer than this: h11 refuses it

# States.
_HEAD, _SIZED, _CHUNK_LINE, _CHUNK_DATA, _TRAILERS, _DONE, _OFF = range(7)


class AnswerEnd:
    """The framing of one answer, fed the bytes read after its request.

    ``feed(data)`` takes each read; ``done`` says the answer is complete,
    ``spare`` that bytes came after its end (the connection must not be
    used again). ``head_request``: the request was a HEAD (no body follows).
    """

    __slots__ = ("_left", "_line", "_state", "done", "head_request", "spare")

    def __init__(self, *, head_request: bool = False) -> None:
        self.head_request = head_request
        self.done = False
        self.spare = False
        self._state = _HEAD
        self._line = bytearray()  # a head, or a chunk-size or trailer line, in pieces
        self._left = 0  # body bytes still to come (sized body, or chunk data and its CRLF)

    def feed(self, data: bytes) -> None:
        at = 0
        end = len(data)
        while at < end:
            state = self._state
            if state in (_SIZED, _CHUNK_DATA):
                step = min(self._left, end - at)
                at += step
                self._left -= step
                if self._left == 0:
                    self._state = _CHUNK_LINE if state == _CHUNK_DATA else self._finish()
            elif state == _HEAD:
                at = self._read_head(data, at)
            elif state in (_CHUNK_LINE, _TRAILERS):
                at = self._read_line(data, at)
            else:
                if state == _DONE:
                    self.spare = True
                return

    def _finish(self) -> int:
        self.done = True
        return _DONE

    def _read_head(self, data: bytes, at: int) -> int:
        if not self._line:  # the usual case: the whole head is in this read
            found = _BLANK_LINE.search(data, at)
            if found is not None:
                self._state = self._after_head(data[at : found.end()])
                return found.end()
        start = max(0, len(self._line) - 2)  # a blank line may straddle two reads
        self._line += data[at:]
        found = _BLANK_LINE.search(self._line, start)
        if found is None:
            if len(self._line) > _MAX_LINE:
                self._state = _OFF
            return len(data)
        head = bytes(self._line[: found.end()])
        rest = len(self._line) - found.end()  # bytes of data after the head
        self._line.clear()
        self._state = self._after_head(head)
        return len(data) - rest

    def _after_head(self, head: bytes) -> int:
        lines = head.split(b"\n")
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or len(parts[1]) != 3 or not parts[1].isdigit():
            return _OFF
        status = int(parts[1])
        if status == 101:
            return _OFF  # another protocol follows
        if status < 200:
            return _HEAD  # an interim answer: the real head follows
        length: int | None = None
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit() or len(value) > 18:
                    return _OFF
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.strip().lower().endswith(b"chunked")
        if self.head_request or status in (204, 304):
            return self._finish()
        if chunked:
            return _CHUNK_LINE
        if length is None:
            return _OFF  # delimited by the close: no connection to reuse
        if length == 0:
            return self._finish()
        self._left = length
        return _SIZED

    def _read_line(self, data: bytes, at: int) -> int:
        newline = data.find(b"\n", at)
        if newline < 0:
            self._line += data[at:]
            if len(self._line) > _MAX_LINE:
                self._state = _OFF
            return len(data)
        self._line += data[at:newline]
        line = bytes(self._line).strip()
        self._line.clear()
        if self._state == _TRAILERS:
            if not line:
                self._state = self._finish()
            return newline + 1
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            self._state = _OFF
            return len(data)
        if size == 0:
            self._state = _TRAILERS
        else:
            self._left = size + 2  # the data and its CRLF
            self._state = _CHUNK_DATA
        return newline + 1
