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
    """The records of a JSON Lines output (``-o``), which holds records only:
    a later, shorter path's ``depth_update`` lines go to ``--depth-updates``
    (docs/manual/output.md), never there (issue #25 item 3)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    inline = [line for line in lines if "depth_update" in line]
    assert not inline, f"depth_update lines in the main output: {inline[:3]}"
    return lines


def fold_depth_updates(
    records: list[dict[str, Any]], updates: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Each URL's record with its final depth and referrer: the lowest depth
    any ``depth_update`` line gives it (in any order: --redis workers write
    theirs to separate files). Every update must follow a record of its URL."""
    final = {record["url"]: dict(record) for record in records}
    for update in updates:
        assert update["depth_update"] is True, update
        record = final[update["url"]]  # a correction of a record that exists
        assert update["previous_depth"] > update["depth"], update
        if update["depth"] < record["depth"]:
            record.update(depth=update["depth"], referrer=update["referrer"])
    return final
