"""Child processes in tests: which still run, and waiting for them to end."""

from __future__ import annotations

import os
from pathlib import Path

import trio

__all__ = ["alive", "wait_gone"]


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (a zombie has an empty command line)."""
    found = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            pass
    return found


async def wait_gone(pids: set[int]) -> None:
    """Wait until every process in ``pids`` has exited (pidfds: no polling)."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)
