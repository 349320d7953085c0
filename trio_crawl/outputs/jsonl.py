"""Where records and items go: JSON Lines (or CSV) files, or stdout.

An output is opened in two steps, so that a command that fails before its
crawl starts leaves an existing file exactly as it was:

1. ``OutputFile.open(path)`` checks that the file can be written, and
   opens it *without* truncating it (a new file is created, and removed
   again by ``discard()`` if the crawl never starts);
2. ``begin(append=...)`` empties it (unless appending), when the crawl starts.
   With ``hold=True`` a file that has content is not emptied yet: what is
   written waits in a spooled buffer until ``commit()`` (the crawl reached a
   start URL: the caller decides). Without it, ``close()`` (or
   ``drop_held()``) leaves the file as it was: a crawl that reached nothing
   does not replace the last crawl's output (issue #18 item 9).

Each record is written with ``os.write`` as one complete line, at once: a
crawl killed at any moment leaves only complete lines behind. A write that
fails (disk full, I/O error, file size limit) is cut back to the end of the
last complete line when the output is a regular file, and the output stops:
``error`` says why, and the caller stops the crawl. Nothing here raises
during a crawl.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.models import CrawlRecord, DepthUpdate
from ..errors import OutputError
from .record_line import record_line

if TYPE_CHECKING:
    import csv


class OutputFile:
    """A file (or stdout, ``-``) that takes whole lines."""

    def __init__(self, path: str, fd: int, *, created: bool, owned: bool) -> None:
        self.path = path
        self._fd = fd
        self._created = created
        self._owned = owned
        self._regular = stat.S_ISREG(os.fstat(fd).st_mode)
        self._end = 0  # offset just after the last complete line
        self.begun = False
        #: Set when a write failed; the output takes nothing more after that.
        self.error: OutputError | None = None
        #: The reader of a pipe went away (``-o - | head``): not an error.
        self.broken_pipe = False
        #: Lines written while the file's old content is kept (``begin(hold=True)``).
        self._held: tempfile.SpooledTemporaryFile[bytes] | None = None
        #: ``drop_held()`` left the file's old content in place.
        self.kept_old = False

    @classmethod
    def open(cls, path: str) -> OutputFile:
        """Open ``path`` for writing without truncating it. Raises ``OSError``."""
        if path == "-":
            return cls("<stdout>", sys.stdout.fileno(), created=False, owned=False)
        flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
            created = False
        except FileNotFoundError:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
            created = True
        return cls(path, fd, created=created, owned=True)

    @classmethod
    def create_new(cls, path: str) -> OutputFile:
        """Create ``path``, which must not exist yet. Raises ``OSError``."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0))
        return cls(path, fd, created=True, owned=True)

    @property
    def is_stdout(self) -> bool:
        return not self._owned

    @property
    def failed(self) -> bool:
        return self.error is not None or self.broken_pipe

    def begin(self, *, append: bool, hold: bool = False) -> None:
        """The crawl starts: empty the file unless ``append``; write at its end.
        ``hold``: a regular file with content is emptied only by ``commit()``;
        until then, writes wait in memory (spilling to a temporary file)."""
        if self.is_stdout:
            sys.stdout.flush()
        elif self._regular:
            if hold and not append and os.fstat(self._fd).st_size > 0:
                # Closed by commit() or drop_held(), not by a with block.
                self._held = tempfile.SpooledTemporaryFile(max_size=1 << 20)  # noqa: SIM115
            else:
                self._empty(append)
        self.begun = True

    def _empty(self, append: bool) -> None:
        if not append:
            os.ftruncate(self._fd, 0)
        self._end = os.lseek(self._fd, 0, os.SEEK_END)

    @property
    def holding(self) -> bool:
        """Writes wait for ``commit()``; the file still holds its old content."""
        return self._held is not None

    def commit(self) -> None:
        """Empty the file and write what was held (a no-op unless holding)."""
        held, self._held = self._held, None
        if held is None:
            return
        with held:
            try:
                self._empty(append=False)
            except OSError as exc:
                self.error = OutputError(self.path, exc)
                return
            held.seek(0)
            for line in held:
                if not self.write(line):
                    break

    def drop_held(self) -> None:
        """Forget what was held: the file keeps its old content."""
        held, self._held = self._held, None
        if held is not None:
            held.close()
            self.kept_old = True

    def write(self, data: bytes) -> bool:
        """Write ``data`` (whole lines) at once; False if the output has failed."""
        if self.failed:
            return False
        if self._held is not None:
            try:
                self._held.write(data)
            except OSError as exc:  # spilled to a full temporary directory
                self.error = OutputError(self.path, exc)
                return False
            return True
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except BrokenPipeError:
            self.broken_pipe = True
            return False
        except OSError as exc:
            self.error = OutputError(self.path, exc)
            self._cut_torn_line()
            return False
        self._end += len(data)
        return True

    def _cut_torn_line(self) -> None:
        """After a failed write: drop what reached the file of the failed line."""
        if not self._regular:
            return  # a pipe or a device: what was written is gone
        with contextlib.suppress(OSError):  # a disk in a bad way: keep what is there
            os.ftruncate(self._fd, self._end)

    def discard(self) -> None:
        """The crawl never started: close, and remove the file if we made it."""
        self.close()
        if self._created and not self.begun:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def close(self) -> None:
        """Close; what is still held (never committed) is dropped."""
        self.drop_held()
        if self._owned and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


def _encode(line: str) -> bytes:
    # Lone surrogates (from odd pages or handlers) stay valid JSON escapes.
    return (line + "\n").encode("utf-8", "backslashreplace")


class JsonLinesWriter:
    """Each record as one JSON line, written at once (``OutputFile.write``)."""

    def __init__(self, output: OutputFile) -> None:
        self.output = output
        self.written = 0

    @property
    def broken(self) -> bool:
        """Stdout's reader went away (``trio-crawl URL -o - | head``)."""
        return self.output.broken_pipe

    @property
    def error(self) -> OutputError | None:
        return self.output.error

    def write(self, record: CrawlRecord | DepthUpdate) -> None:
        """One line: a record, or a correction of an earlier one's depth."""
        if self.output.write(_encode(record_line(record))):
            self.written += 1


def item_as_dict(item: object) -> dict[str, Any]:
    """A handler's item as a flat-ish dict: mappings and dataclasses as they
    are, anything else as ``{"value": item}``."""
    if isinstance(item, Mapping):
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    return {"value": item}


class ItemJsonLinesWriter:
    """Items as JSON Lines, one write per item; non-JSON values become strings."""

    def __init__(self, output: OutputFile) -> None:
        self.output = output
        self.written = 0

    def write(self, item: object) -> None:
        line = json.dumps(item_as_dict(item), ensure_ascii=False, default=str)
        if self.output.write(_encode(line)):
            self.written += 1


class ItemCsvWriter:
    """Items as CSV. The columns are the keys of the first item; keys that
    later items add are dropped (CSV cannot grow columns), missing ones are
    left empty. Use JSON Lines for items of varying shape."""

    def __init__(self, output: OutputFile) -> None:
        self.output = output
        self._buffer = io.StringIO()
        self._writer: csv.DictWriter[str] | None = None
        self.written = 0

    def write(self, item: object) -> None:
        row = item_as_dict(item)
        if self._writer is None:
            import csv  # here: only item output as CSV needs it

            self._writer = csv.DictWriter(
                self._buffer, fieldnames=list(row), extrasaction="ignore"
            )
            self._writer.writeheader()
        self._writer.writerow(row)
        data = self._buffer.getvalue().encode("utf-8", "backslashreplace")
        self._buffer.seek(0)
        self._buffer.truncate()
        if self.output.write(data):
            self.written += 1
