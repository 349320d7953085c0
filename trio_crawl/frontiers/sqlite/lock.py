"""The state file's lock: one crawl per file.

One crawl per file
------------------
``CrawlState.open`` (with ``lock=True``, the default) takes an exclusive advisory
lock, ``flock(LOCK_EX | LOCK_NB)`` on ``PATH.lock`` beside the file (beside the
file a symlink names, if ``PATH`` is one), and holds it until ``close``; it
writes its pid into that file for the message of the next opener, which fails at
once with ``StateInUseError``. flock locks belong to an open file, not a process,
so a second ``open`` in the same process is refused too. The kernel drops the
lock when the process dies, however it dies (``kill -9`` included), so a lock is
never stale; ``close`` removes ``PATH.lock`` while still holding it, and an
opener that locked a file removed under it tries again. Readers (``--status``)
open with ``lock=False`` and take no lock: WAL lets them read while the crawl
writes. Needs ``fcntl`` (Linux, macOS, the BSDs) and a local file system; on
Windows nothing is locked.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

from ...errors import StateInUseError

if sys.platform != "win32":
    import fcntl


class StateLock:
    """An exclusive ``flock`` on ``PATH.lock`` (see "One crawl per file")."""

    def __init__(self, file: io.FileIO, path: Path) -> None:
        self._file: io.FileIO | None = file
        self.path = path

    @classmethod
    def acquire(cls, db: Path) -> StateLock | None:
        """Lock ``db`` for this object, or raise StateInUseError (ValueError if the
        lock file cannot be made). None where there is no ``fcntl``."""
        if sys.platform == "win32":
            return None
        real = Path(os.path.realpath(db))  # one lock, whatever symlink names the file
        path = real.with_name(real.name + ".lock")
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise ValueError(f"{db}: cannot lock the state file ({exc})") from None
            file = io.FileIO(fd, "r+", closefd=True)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _read_pid(fd)
                file.close()
                raise StateInUseError(db, pid) from None
            except OSError as exc:
                file.close()
                raise ValueError(f"{db}: cannot lock the state file ({exc})") from None
            if _is_at(fd, path):
                break
            # The holder we waited for removed the file after we opened it: nobody
            # else will open this one, so this lock means nothing. Again.
            file.close()
        data = f"{os.getpid()}\n".encode()
        try:
            os.pwrite(fd, data, 0)  # over the pid of a killed holder, then cut to size
            os.ftruncate(fd, len(data))
        except OSError as exc:
            file.close()
            raise ValueError(f"{db}: cannot lock the state file ({exc})") from None
        return cls(file, path)

    def release(self) -> None:
        """Remove the lock file, then unlock (idempotent)."""
        file, self._file = self._file, None
        if file is None:
            return
        if _is_at(file.fileno(), self.path):
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        file.close()


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).split(b"\n", 1)[0]
    return int(text) if text.isdigit() else None


def _is_at(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the open file ``fd``."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
