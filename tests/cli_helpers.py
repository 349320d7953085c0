"""Running ``trio-crawl`` as a user would: a real subprocess, no stdin, a timeout."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

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


def records_in(text: str) -> list[dict[str, Any]]:
    """The records of a JSON Lines output, without its ``depth_update`` lines
    (a later, shorter path found for a page already recorded: README, "Depth")."""
    lines = (json.loads(line) for line in text.splitlines() if line.strip())
    return [line for line in lines if not line.get("depth_update")]
