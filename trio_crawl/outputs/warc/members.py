"""The gzip members of a ``.warc.gz`` file: their format, the writer's lock, and repair.

Every record ``WarcWriter`` writes is one gzip member that names its own
compressed length in an ``FEXTRA`` subfield (id ``TC``, RFC 1952 §2.3.1.1,
which every gzip reader skips; ``GZ_HEADER``). That is what lets
``repair_warc`` cut a torn tail (a kill mid-write) by hopping from member to
member without inflating them: only the last member, and members written by
other tools, are inflated. ``lock_warc`` takes the exclusive ``flock`` that
keeps two writers from interleaving. ``iter_members`` lists the complete
members (tests, tools). Plain synchronous file I/O; no trio.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import time
import zlib
from collections.abc import Iterator
from typing import BinaryIO, Final

#: Seconds ``WarcWriter.open`` waits for another writer of the file to finish,
#: and how often it looks.
LOCK_TIMEOUT: Final = 10.0
LOCK_POLL: Final = 0.05
#: The header of every gzip member written here (RFC 1952): magic, CM=deflate,
#: FLG=FEXTRA, MTIME=0, XFL, OS=unknown, XLEN=12, subfield "TC", LEN=8, and the
#: whole member's length as a little-endian uint64.
GZ_HEADER: Final = struct.Struct("<4sIBBH2sHQ")
GZ_MAGIC: Final = b"\x1f\x8b\x08\x04"
GZ_SUBFIELD: Final = b"TC"
#: A plain gzip header (what zlib and isal write), replaced by ours.
PLAIN_GZ_HEADER_SIZE: Final = 10


class WarcFileBusy(OSError):
    """Another writer holds the WARC file (a second crawl, or the writer
    process of one that was killed and has not finished)."""


def lock_warc(fd: int, path: str | os.PathLike[str], timeout: float) -> None:
    """Take the exclusive ``flock`` on an open WARC file, waiting at most
    ``timeout`` seconds; ``WarcFileBusy`` if another writer keeps it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise WarcFileBusy(errno.EBUSY, "in use by another crawl") from None
            time.sleep(LOCK_POLL)


def repair_warc(path: str | os.PathLike[str]) -> int:
    """Cut a torn tail off a ``.warc.gz`` so that appending to it is safe.

    Walks the gzip members from the start. A member written here names its own
    length, so the walk hops over it without reading it. Members from other
    writers, and the last member, are inflated to check them. At the first
    member that is incomplete or corrupt, or at bytes that are not gzip, the
    file is truncated. A kill mid-write leaves exactly such a tail. Returns the
    number of bytes cut (0 for an intact file).

    Raises ``ValueError`` if the file does not start with a gzip member, so that
    a file that is not a WARC is never truncated to nothing.
    """
    size = os.path.getsize(path)
    if size == 0:
        return 0
    with open(path, "r+b") as f:
        good = _intact_prefix(f, size)
        if good == 0:
            f.seek(0)
            if f.read(2) != b"\x1f\x8b":
                raise ValueError(f"{os.fspath(path)} is not a gzipped WARC file")
        if good < size:
            f.truncate(good)
    return size - good


def _intact_prefix(f: BinaryIO, size: int) -> int:
    """The length of the file's longest prefix made of complete gzip members."""
    offset = 0
    while offset < size:
        f.seek(offset)
        length = _own_member_length(f.read(GZ_HEADER.size))
        if length is not None and offset + length < size:
            offset += length  # ours, not the last: trust the length it names
            continue
        end = _inflate_member(f, offset)
        if end is None:
            return offset
        offset = end
    return offset


def _own_member_length(head: bytes) -> int | None:
    if len(head) < GZ_HEADER.size or not head.startswith(GZ_MAGIC):
        return None
    _, _, _, _, xlen, sub, sublen, length = GZ_HEADER.unpack(head)
    if xlen != 12 or sub != GZ_SUBFIELD or sublen != 8 or length <= GZ_HEADER.size:
        return None
    return int(length)


def _inflate_member(f: BinaryIO, offset: int, chunk: int = 1 << 20) -> int | None:
    """The end offset of the complete gzip member at ``offset``, or None. The
    output is thrown away as it comes, at most ``chunk`` bytes at a time."""
    f.seek(offset)
    data = f.read(chunk)
    if not data.startswith(b"\x1f\x8b"):
        return None
    d = zlib.decompressobj(31)
    fed = offset  # file offset of ``data``
    try:
        while data:
            pending = data
            while pending:
                d.decompress(pending, chunk)
                if d.eof:  # what follows the member is in unused_data
                    return fed + len(data) - len(d.unused_data)
                pending = d.unconsumed_tail
            fed += len(data)
            data = f.read(chunk)
    except zlib.error:
        return None
    return None


def iter_members(path: str | os.PathLike[str]) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` of each complete gzip member, inflating each one
    (for tests and tools)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            end = _inflate_member(f, offset)
            if end is None:
                return
            yield offset, end - offset
            offset = end
