"""The parse co-process's side: ``extract_links`` on pages the crawl sends.

This module runs in a child interpreter (``engine/parse_process.py`` starts
it and explains why). It is kept to the standard library and
``core.parse``, and the child imports the very package directory the
crawl runs from (``BOOTSTRAP``: whatever ``sys.path`` says, even with
``-P``) without the package's ``__init__``. That took 0.07-0.08 s of CPU
and 30 MB against 0.25-0.27 s and 41 MB through an ``__init__`` that
imported the whole library; now that it imports lazily, the two cost the
same (0.06 s), and the stand-in is kept for the first reason. It never
imports trio.

Protocol (one stream socket, both ways)
---------------------------------------
* Every frame is an 8-byte little-endian length, then that many bytes of
  ``marshal`` (both ends are the same interpreter).
* child -> crawl, once at the start: ``(0, "ready")``.
* crawl -> child: ``(id, url, content_type, body)``, ids from 1.
* child -> crawl: ``(id, links)``, the list ``extract_links(body, url,
  content_type)`` returned, or ``(id, "ExcType: message")`` if it raised.
  Answers come in the order of the requests; those to requests that came
  in together are written together (one write, one wake-up of the crawl).

The child ends at end-of-file on the socket: the crawl closed its end, or
died (the kernel closes it then, even after SIGKILL). It ignores SIGINT:
a terminal's Ctrl-C is the crawl's to handle, and it runs in its own
session besides.
"""

from __future__ import annotations

import marshal
import signal
import socket
import struct
import sys
from typing import Final

from ..core.parse import extract_links

#: The length before each frame.
HEAD: Final = struct.Struct("<Q")
#: The first frame the child sends.
READY: Final = (0, "ready")
#: Bytes read at once.
_READ_SIZE: Final = 1 << 20
#: Answers written together at most (so the first of a long batch waits
#: for a few parses, not for all of them).
_BATCH: Final = 8

#: ``python -c BOOTSTRAP PACKAGE_DIR FD``: ignore SIGINT first thing, then
#: import this module with a bare stand-in for the ``trio_crawl`` package
#: (its ``__init__`` imports the whole library), so only ``core.parse`` and
#: what it needs are loaded.
BOOTSTRAP: Final = (
    "import signal, sys, types\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "package = types.ModuleType('trio_crawl')\n"
    "package.__path__ = [sys.argv[1]]\n"
    "sys.modules['trio_crawl'] = package\n"
    "from trio_crawl.engine.parse_child import main\n"
    "sys.exit(main(int(sys.argv[2])))\n"
)


#: What goes over the socket: a request, or an answer (``READY`` too).
Message = tuple[int, str, str | None, bytes] | tuple[int, list[str] | str]


def frame(message: Message) -> bytes:
    """One frame: the length, then ``marshal`` of ``message``."""
    data = marshal.dumps(message)
    return HEAD.pack(len(data)) + data


def answer(request: tuple[int, str, str | None, bytes]) -> tuple[int, list[str] | str]:
    """The answer to one request: its links, or what went wrong."""
    number, url, content_type, body = request
    try:
        return number, extract_links(body, url, content_type)
    except Exception as exc:  # the crawl parses the page again itself
        return number, f"{type(exc).__name__}: {exc}"


def serve(sock: socket.socket) -> None:
    """Answer requests until end-of-file."""
    sock.sendall(frame(READY))
    buffer = b""
    while True:
        chunk = sock.recv(_READ_SIZE)
        if not chunk:
            return
        buffer = buffer + chunk if buffer else chunk
        start = 0
        out: list[bytes] = []
        while len(buffer) - start >= HEAD.size:
            (length,) = HEAD.unpack_from(buffer, start)
            end = start + HEAD.size + length
            if end > len(buffer):
                break
            out.append(frame(answer(marshal.loads(buffer[start + HEAD.size : end]))))
            start = end
            if len(out) >= _BATCH:
                sock.sendall(b"".join(out))
                out.clear()
        if out:
            sock.sendall(b"".join(out))
        buffer = buffer[start:]


def main(fd: int) -> int:
    """The child's entry point (``BOOTSTRAP``): serve on descriptor ``fd``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    try:
        serve(sock)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the crawl is gone
    finally:
        sock.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - the crawl uses BOOTSTRAP
    sys.exit(main(int(sys.argv[1])))
