"""Running ``trio-crawl`` as a user would: a real subprocess, no stdin, a timeout."""

from __future__ import annotations

import subprocess
import sys

TIMEOUT = 60


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``python -m trio_crawl ARGS``, with its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "trio_crawl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
