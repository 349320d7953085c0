"""``--mirror``'s disk side: write a file under the mirror directory, never
outside it, never through a symlink. Blocking; the trio side
(``mirror/output.py``) calls it in a worker thread, one call at a time.

Every path comes from ``MirrorLayout.path`` (no separators, no ``..``), and is
walked one directory at a time with ``openat``-style calls relative to the
parent's descriptor, each opened with ``O_NOFOLLOW | O_DIRECTORY``: a symlink
already inside the mirror (planted there, or left by a user) is never
followed, it is an obstacle and that one file is skipped with a reason. The
file itself is written to a temporary name in its directory and renamed over
the final name (``rename`` replaces a symlink, never writes through it), so a
crash or a full disk never leaves half a page under the real name.

A file and a directory wanting one name (layout rule 8): when a directory is
needed where a file is, the file moves to ``<name>/index.html``; a file whose
name is already a directory is written as ``<name>/index.html``.

Errors: ``MirrorSkip`` (this one file cannot be saved: a symlink or other
obstacle, a name the file system refuses) lets the crawl go on;
``OSError`` with ``errno`` in ``FATAL_ERRNOS`` (disk full, read-only, I/O
error) means the output failed, as a full disk does for ``--warc``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Final

from .layout import INDEX

#: Errors that mean the mirror as a whole cannot be written any more.
FATAL_ERRNOS: Final = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EMFILE, errno.ENFILE}
)
#: The directory of what the mirror keeps for itself (``mirror/visits.py``):
#: no host name starts with a dot, so no saved URL is ever under it.
KEPT_DIR: Final = ".trio-crawl"
#: Prefix of the temporary files (skipped by the link converter's walk).
TEMP_PREFIX: Final = ".trio-crawl-tmp-"
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Directory descriptors kept open between calls.
_OPEN_DIRS: Final = 16
_NEW_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class MirrorSkip(Exception):
    """This one file cannot be saved (the reason is the message); the crawl goes on."""


def is_fatal(error: OSError) -> bool:
    return error.errno in FATAL_ERRNOS


class MirrorFiles:
    """The mirror directory, opened once; ``save`` and ``read`` relative to it.

    Not thread-safe: one call at a time (the trio side holds a limiter of 1).
    """

    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(root, exist_ok=True)
        self._root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        #: The directories last opened (a few: pages of one directory tend to
        #: come together), so a save or a read opens its file, not its path.
        self._open_dirs: OrderedDict[tuple[str, ...], int] = OrderedDict()

    def close(self) -> None:
        for fd in self._open_dirs.values():
            os.close(fd)
        self._open_dirs.clear()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def _parent(self, where: tuple[str, ...], create: bool) -> int:
        """The descriptor of directory ``where`` (walked without following
        symlinks; created with ``create``), from the small cache if there."""
        if not where:
            return self._root_fd
        fd = self._open_dirs.get(where)
        if fd is not None:
            self._open_dirs.move_to_end(where)
            return fd
        parent = self._parent(where[:-1], create)
        if create:
            fd = self._directory(parent, where[-1], where)
        else:
            fd = os.open(where[-1], _DIR_FLAGS, dir_fd=parent)
        self._open_dirs[where] = fd
        while len(self._open_dirs) > _OPEN_DIRS:
            os.close(self._open_dirs.popitem(last=False)[1])
        return fd

    def case_insensitive(self) -> bool:
        """Whether the directory's file system folds case (one probe file)."""
        name = f"{TEMP_PREFIX}case-{secrets.token_hex(4)}"
        fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=self._root_fd)
        os.close(fd)
        try:
            os.stat(name.upper(), dir_fd=self._root_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        finally:
            os.unlink(name, dir_fd=self._root_fd)
        return True

    # -- writing -------------------------------------------------------------

    def save(self, parts: Sequence[str], body: bytes) -> tuple[str, ...]:
        """Write ``body`` as the file ``parts`` (from ``MirrorLayout.path``);
        return where it went (``parts``, or ``(*parts, "index.html")`` when
        the name is a directory). Raises ``MirrorSkip`` or ``OSError``."""
        try:
            saved = tuple(parts)
            parent = self._parent(saved[:-1], create=True)
            name = saved[-1]
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISDIR(info.st_mode):
                parent = self._parent(saved, create=True)
                name = INDEX
                saved = (*saved, INDEX)
            self._write(parent, name, body)
            return saved
        except OSError as exc:
            if is_fatal(exc):
                raise
            raise MirrorSkip(f"{'/'.join(parts)}: {exc.strerror or exc}") from None

    def rewrite(self, parts: Sequence[str], body: bytes) -> None:
        """Replace a saved file just read (the link converter): its
        directories exist, so they are only opened, never created. The new
        file keeps the old one's times: a converted page's mtime still says
        when the server last changed it (a recrawl never reads it; a user,
        or a later ``wget -N``, may)."""
        try:
            parent = self._parent(tuple(parts[:-1]), create=False)
            old = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            self._write(parent, parts[-1], body)
            times = (old.st_atime_ns, old.st_mtime_ns)
            os.utime(parts[-1], ns=times, dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            if is_fatal(exc):
                raise
            raise MirrorSkip(f"{'/'.join(parts)}: {exc.strerror or exc}") from None

    def _directory(self, parent: int, name: str, where: Sequence[str]) -> int:
        """Open directory ``name`` under ``parent`` without following a
        symlink, creating it, or moving a file in its way to ``name/index.html``."""
        for _ in range(3):  # a concurrent change of the tree: try again, then give up
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=parent)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                raise MirrorSkip(f"{'/'.join(where)} is a symlink: not followed")
            if not stat.S_ISREG(info.st_mode):
                raise MirrorSkip(f"{'/'.join(where)} is neither a file nor a directory")
            temporary = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
            os.rename(name, temporary, src_dir_fd=parent, dst_dir_fd=parent)
            os.mkdir(name, 0o755, dir_fd=parent)
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            os.rename(temporary, INDEX, src_dir_fd=parent, dst_dir_fd=fd)
            return fd
        raise MirrorSkip(f"{'/'.join(where)}: the directory keeps changing")

    @staticmethod
    def _write(parent: int, name: str, body: bytes) -> None:
        temporary = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
        fd = os.open(temporary, _NEW_FILE_FLAGS, 0o644, dir_fd=parent)
        try:
            try:
                view = memoryview(body)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            finally:
                os.close(fd)
            os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise

    def set_time(self, saved: Sequence[str], when: float) -> None:
        """Set a saved file's modification (and access) time: the server's
        Last-Modified, as wget sets it. Never through a symlink."""
        try:
            parent = self._parent(tuple(saved[:-1]), create=False)
            os.utime(saved[-1], (when, when), dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            if is_fatal(exc):
                raise
            raise MirrorSkip(f"{'/'.join(saved)}: {exc.strerror or exc}") from None

    def saved_as(self, parts: Sequence[str]) -> tuple[str, ...] | None:
        """Where ``save(parts, ...)`` put its file, if it is there."""
        for candidate in (tuple(parts), (*parts, INDEX)):
            if self.is_file(candidate):
                return candidate
        return None

    def remove(self, parts: Sequence[str]) -> bool:
        """Delete the saved file of ``parts`` (``--mirror-delete-gone``), and
        the directories this leaves empty (``_prune``); False: there was none."""
        saved = self.saved_as(parts)
        if saved is None:
            return False
        try:
            os.unlink(saved[-1], dir_fd=self._parent(saved[:-1], create=False))
        except FileNotFoundError:
            return False
        except OSError as exc:
            if is_fatal(exc):
                raise
            raise MirrorSkip(f"{'/'.join(saved)}: {exc.strerror or exc}") from None
        self._prune(saved[:-1])
        return True

    def _prune(self, where: tuple[str, ...]) -> None:
        """Remove directory ``where`` and those above it while each is empty,
        up to the mirror's root (never removed). Each held what was just
        removed, so the crawl emptied it: a directory a user made and left
        empty is never on this path, and one with anything in it (a user's
        file or empty folder too) stays, as ``rmdir`` refuses it."""
        while where:
            cached = self._open_dirs.pop(where, None)
            if cached is not None:
                os.close(cached)
            try:
                os.rmdir(where[-1], dir_fd=self._parent(where[:-1], create=False))
            except OSError:  # not empty (or not a directory any more): it stays
                return
            where = where[:-1]

    # -- reading (the link converter) -----------------------------------------

    def is_file(self, parts: Sequence[str]) -> bool:
        """Whether ``parts`` is a saved regular file (a symlink is not)."""
        try:
            info = os.stat(os.path.join(*parts), dir_fd=self._root_fd, follow_symlinks=False)
        except (OSError, ValueError):
            return False
        return stat.S_ISREG(info.st_mode)

    def read(self, parts: Sequence[str]) -> bytes:
        """The content of a saved file, opened without following a symlink."""
        parent = self._parent(tuple(parts[:-1]), create=False)
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        with os.fdopen(fd, "rb") as file:
            return file.read()

    def walk(self) -> Iterator[tuple[str, ...]]:
        """Every regular file under the directory, depth first, streamed
        (one ``scandir`` per level open at a time; symlinks not followed,
        temporary files and what the mirror keeps for itself left out)."""
        for parts in self._walk(()):
            if parts[0] != KEPT_DIR:
                yield parts

    def _walk(self, where: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        path = os.path.join(self.root, *where)
        subdirectories: list[str] = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.name.startswith(TEMP_PREFIX):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        subdirectories.append(entry.name)
                    elif entry.is_file(follow_symlinks=False):
                        yield (*where, entry.name)
        except OSError:
            return
        for name in subdirectories:
            yield from self._walk((*where, name))
