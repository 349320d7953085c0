"""Running ``trio-crawl`` as a user would: a real subprocess, no stdin, a timeout."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
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


def start_cli(*args: str) -> subprocess.Popen[str]:
    """``python -m trio_crawl ARGS`` started in the background, its output on
    pipes as text, no stdin: for tests that signal or watch it while it runs."""
    return subprocess.Popen(
        [sys.executable, "-m", "trio_crawl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def kill_after_records(args: list[str], output: Path, records: int) -> str:
    """Start ``trio-crawl ARGS``, SIGKILL it once ``output`` holds at least
    ``records`` lines (or after 30 s), and return what it had written: a
    crawl killed mid-run, for the tests that resume one."""
    proc = start_cli(*args)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if output.exists() and output.read_text().count("\n") >= records:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return output.read_text()


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


def run_on_a_terminal(*args: str, cwd: str | None = None, columns: int = 120) -> tuple[int, str]:
    """``python -m trio_crawl ARGS`` with stdout and stderr on a pseudo-terminal
    ``columns`` wide (so the live displays are drawn): its exit code and
    everything it drew."""
    import os
    import pty
    import select
    import time

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_crawl", *args],
            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=cwd,
            env={**os.environ, "COLUMNS": str(columns), "TERM": "xterm"},
        )  # fmt: skip
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child side is closed
                break
            if not data:
                break
            chunks.append(data)
        returncode = proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return returncode, b"".join(chunks).decode(errors="replace")
