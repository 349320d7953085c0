"""No two outputs on one file: the options that name a file the crawl
writes, and the check that they name different files.

Two outputs on one path destroy data with exit 0 (the cookie file replaces
the records, items interleave with records, WARC gzip members mix with
JSON), so a clash is a usage error (one line, exit 2), found before anything
is opened. Paths are compared as the files they name, not as text:

* a path that exists compares by device and inode, so a hard link, a
  symlink or ``./x`` against ``x`` is the same file;
* a path that does not exist yet compares by its resolved path
  (``os.path.realpath``: symlinked folders and ``..`` resolved), so two
  spellings of one new file clash too;
* ``-`` (stdout) and the null device never clash: nothing is kept there
  (``--items -`` beside ``-o -`` is refused elsewhere, with its own reason).

Adding a path option is one line in ``OUTPUT_OPTIONS``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: ``(argparse dest, flag as the user writes it)`` of every option that names
#: a file or folder the crawl writes. An option the parser lacks is skipped.
OUTPUT_OPTIONS: tuple[tuple[str, str], ...] = (
    ("output", "-o"),
    ("items", "--items"),
    ("warc", "--warc"),
    ("save_cookies", "--save-cookies"),
    ("state", "--state"),
    ("mirror", "--mirror"),
    ("depth_updates", "--depth-updates"),
)

#: The key of a path: ``("inode", dev, ino)`` or ``("path", resolved)``.
FileKey = tuple[str, int, int] | tuple[str, str]


def file_key(path: str) -> FileKey | None:
    """What identifies the file ``path`` names; None for stdout and the null
    device, which may be named any number of times."""
    if path == "-":
        return None
    try:
        st = os.stat(path)  # follows symlinks: a link and its target are one file
    except (OSError, ValueError):  # not there yet (or a name the OS refuses)
        return ("path", os.path.realpath(path))
    try:
        null = os.stat(os.devnull)
    except OSError:  # pragma: no cover - every system has one
        null = None
    if null is not None and (st.st_dev, st.st_ino) == (null.st_dev, null.st_ino):
        return None
    return ("inode", st.st_dev, st.st_ino)


def output_clash(named: Iterable[tuple[str, str | None]]) -> str | None:
    """The first clash among ``(flag, path)`` pairs, as a one-line message;
    None if every path names its own file. Unset paths (None, "") are skipped."""
    seen: dict[FileKey, tuple[str, str]] = {}
    for flag, path in named:
        if not path:
            continue
        key = file_key(path)
        if key is None:
            continue
        first = seen.get(key)
        if first is not None:
            first_flag, first_path = first
            where = repr(path) if path == first_path else f"{first_path!r} and {path!r}"
            return (
                f"{first_flag} and {flag} would write to the same file ({where}): "
                "give each output its own file"
            )
        seen[key] = (flag, path)
    return None


def outputs_of(args: object) -> list[tuple[str, str | None]]:
    """``(flag, path)`` of each output option ``args`` (an argparse namespace) has."""
    return [(flag, getattr(args, dest)) for dest, flag in OUTPUT_OPTIONS if hasattr(args, dest)]


def overwrites_input(
    output: tuple[str, str], inputs: Iterable[tuple[str, str | None]]
) -> str | None:
    """A one-line refusal if the ``(flag, path)`` output names the same file
    as one of the ``inputs`` (compared as ``output_clash`` compares), else
    None: writing it would destroy what the command reads (``trio-crawl
    report crawl.jsonl -o crawl.jsonl``)."""
    flag, path = output
    key = file_key(path)
    if key is None:
        return None
    for input_flag, input_path in inputs:
        if input_path and file_key(input_path) == key:
            return (
                f"{flag} {path!r} is the {input_flag} this command reads: writing it would "
                "destroy it; give the output its own file"
            )
    return None
