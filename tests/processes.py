"""Child processes in tests: running a Python snippet, which still run, and
waiting for them to end."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import trio

__all__ = ["alive", "run_python", "wait_gone"]

#: Seconds a snippet run by ``run_python`` may take.
TIMEOUT = 60


def run_python(
    code: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -c code args...`` in this interpreter, its output captured,
    no standard input, at most ``TIMEOUT`` seconds."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )


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
