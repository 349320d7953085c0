"""A job that is not a crawl, on ``trio_crawl.WorkPool``: walk a directory tree.

Like a crawler, each worker both consumes work (a directory to list) and
produces it (the subdirectories it finds), so "when is it done?" is the same
question, and WorkPool answers it the same way: ``run()`` returns the moment
the last directory has been listed, with no polling and nothing missed.

Run it: ``python examples/directory_walk.py [DIR] [--workers N]``; it prints
the number of directories and files and the total size, which match
``du --apparent-size -b`` and ``find`` for the same tree.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import trio

from trio_crawl import WorkPool


@dataclass
class Totals:
    directories: int = 0
    files: int = 0
    bytes: int = 0


# --8<-- [start:walk]
async def walk(root: str, workers: int = 8) -> Totals:
    """Count the directories, regular files and file bytes under ``root``
    (symbolic links are not followed; unreadable directories are skipped)."""
    totals = Totals()
    pool = WorkPool[str](workers)

    def scan(path: str) -> tuple[list[str], list[int]]:
        """List one directory (blocking: runs in a worker thread)."""
        subdirs: list[str] = []
        sizes: list[int] = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        sizes.append(entry.stat(follow_symlinks=False).st_size)
        except OSError:
            pass  # unreadable: counted as a directory, with nothing in it
        return subdirs, sizes

    async def visit(path: str) -> None:
        subdirs, sizes = await trio.to_thread.run_sync(scan, path)
        totals.directories += 1
        totals.files += len(sizes)
        totals.bytes += sum(sizes)
        for subdir in subdirs:
            pool.publish(subdir)  # more work, published before our token goes back

    pool.publish(root)
    await pool.run(visit)
    return totals


# --8<-- [end:walk]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".")
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    totals = trio.run(walk, args.root, args.workers)
    print(f"{totals.directories} directories, {totals.files} files, {totals.bytes} bytes")


if __name__ == "__main__":
    main()
