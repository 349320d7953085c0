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
from typing import Any

from ..core.models import CrawlRecord, DepthUpdate
from ..errors import OutputError
from .record_line import record_line


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
        output = cls(path, fd, created=created, owned=True)
        if output._regular:
            try:  # a file that looks regular and cannot be written at its end
                os.lseek(fd, 0, os.SEEK_END)  # (/proc/version: EINVAL): refused now
            except OSError:
                output.discard()
                raise
        return output

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

    @property
    def rewritable(self) -> bool:
        """``rewrite()`` can replace what was written (a regular file, or held lines)."""
        return self._held is not None or (self._regular and not self.is_stdout)

    def written_so_far(self) -> bytes:
        """What this output holds of the crawl's writing (the held lines, or the
        file up to the last complete line). Only for a ``rewritable`` output."""
        if self._held is not None:
            self._held.seek(0)
            data = self._held.read()
            self._held.seek(0, os.SEEK_END)
            return data
        with open(self.path, "rb") as file:
            return file.read(self._end)

    def rewrite(self, data: bytes) -> bool:
        """Replace everything written so far with ``data`` (whole lines).

        A regular file is replaced by a new one renamed over it, and this
        output's descriptor moves to the new file: a crawl killed meanwhile
        leaves the old content or the new, never a mix. False (and ``error``)
        if that fails; only for a ``rewritable`` output."""
        if self.failed:
            return False
        if self._held is not None:
            self._held.seek(0)
            self._held.truncate()
            return self.write(data)
        directory, name = os.path.split(os.path.abspath(self.path))
        try:
            fd, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
            try:
                os.fchmod(fd, stat.S_IMODE(os.fstat(self._fd).st_mode))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.replace(temporary, self.path)
                os.dup2(fd, self._fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            finally:
                os.close(fd)
        except OSError as exc:
            self.error = OutputError(self.path, exc)
            return False
        self._end = os.lseek(self._fd, 0, os.SEEK_END)
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
    """Items as CSV, every field kept.

    The columns are the items' keys in the order they first appear (with
    ``--append``, the existing file's header comes first). An item with a
    key the header lacks widens it: what was written so far is rewritten at
    once under the wider header, earlier rows with empty cells
    (``OutputFile.rewrite``, a new file renamed over the old). A pipe or the
    terminal cannot be rewritten: there such an item fails the output with a
    one-line error that names the new fields, which stops the crawl (its
    records, and the rows already written, stay). Items are never cut to fit.
    """

    def __init__(self, output: OutputFile) -> None:
        self.output = output
        self.written = 0
        self._columns: list[str] | None = None

    def write(self, item: object) -> None:
        row = item_as_dict(item)
        if self._columns is None:
            self._columns = self._existing_header() or []
            if not self._columns:
                self._columns = list(row)
                if not self.output.write(_csv_lines([self._columns])):
                    return
        new = [key for key in row if key not in self._columns]
        if new and not self._widen(new):
            return
        if self.output.write(_csv_lines([[row.get(key, "") for key in self._columns]])):
            self.written += 1

    def _existing_header(self) -> list[str]:
        """The header of a file appended to (``--append``), if it has one."""
        if not self.output.rewritable:
            return []
        import csv

        head = self.output.written_so_far().decode("utf-8", "replace").splitlines()[:1]
        return next(csv.reader(head), [])

    def _widen(self, new: list[str]) -> bool:
        assert self._columns is not None
        if not self.output.rewritable:
            self.output.error = OutputError(
                self.output.path,
                f"an item has fields the CSV header lacks ({', '.join(map(str, new))}), "
                "and CSV on a pipe cannot grow columns: write items to a .csv file, "
                "or as JSON Lines",
            )
            return False
        import csv

        text = self.output.written_so_far().decode("utf-8", "surrogateescape")
        old_rows = list(csv.reader(io.StringIO(text, newline="")))[1:]
        self._columns.extend(new)
        width = len(self._columns)
        padded = [row + [""] * (width - len(row)) for row in old_rows]
        return self.output.rewrite(_csv_lines([self._columns, *padded]))


def _csv_lines(rows: list[list[Any]]) -> bytes:
    """``rows`` as CSV lines (RFC 4180: quoted where needed, CRLF ends)."""
    import csv  # here: only item output as CSV needs it

    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue().encode("utf-8", "backslashreplace")
