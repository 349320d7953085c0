"""The records file a resumed crawl appends to, made whole first.

A crawl killed mid-write (SIGKILL, a power cut) may leave its JSON Lines
output ending in a torn line; appended to as it is, the next record would be
glued to that fragment and both lost to a reader. Every durable frontier
resumes by running the same command again, appending: the state file's
(``sqlite/resume.py``) and every Redis worker's (``cli/redis_cli.py``),
and the depth corrections beside them (``cli/crawl.py``). So the repair
lives here, beside the frontiers and in neither backend.
"""

from __future__ import annotations

import os


def repair_output(path: str) -> int:
    """Cut a torn last line off a JSON Lines file; return the bytes removed."""
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return 0
            f.seek(max(0, size - 1))
            if f.read(1) == b"\n":
                return 0
            # Find the last newline, reading backwards in blocks.
            pos = size
            while pos > 0:
                start = max(0, pos - 65536)
                f.seek(start)
                block = f.read(pos - start)
                cut = block.rfind(b"\n")
                if cut >= 0:
                    f.truncate(start + cut + 1)
                    return size - (start + cut + 1)
                pos = start
            f.truncate(0)
            return size
    except FileNotFoundError:
        return 0
