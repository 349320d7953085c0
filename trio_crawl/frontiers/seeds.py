"""A seeds file (``--seeds``): one URL a line, read lazily.

Read twice by design: once by the command line, which checks the file and
keeps a small one in memory (``cli/options.py``), and again by the SQLite
frontier, which streams a large one into the state file
(``frontiers/sqlite/resume.py``). Outside the SQLite package, so that a
small seeds file crawled in memory imports neither it nor ``sqlite3``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path


def seed_lines(
    path: Path,
    canonical: Callable[[str], str | None],
    on_bad_line: Callable[[int, str], None] | None = None,
) -> Iterable[str]:
    """Canonical URLs from a seeds file, one per line, read lazily. Blank lines
    and ``#`` comments are skipped; lines that are not http(s) URLs too, and
    ``on_bad_line(line_number, text)`` hears of each of those."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            url = canonical(text)
            if url is not None:
                yield url
            elif on_bad_line is not None:
                on_bad_line(number, text)
