"""How a benchmark starts trio-crawl: which command, and from bytecode as an installed
copy starts.

``trio_crawl_command`` is the command a user would type (the console script), unless
a benchmark is told another (an older checkout, a wrapper). Then the bytecode:

``pip install`` writes each module's ``.pyc``; a source checkout run with
``PYTHONDONTWRITEBYTECODE=1`` (this machine's environment sets it) has none,
so every crawl would compile trio_crawl from source first: ~50-80 ms of CPU,
a third of a 1,000-page crawl's start-up, that no user pays. Before timing
anything, ``like_installed`` compiles every trio_crawl tree the benchmark's
commands may import into one cache directory and points the children at it
(``PYTHONPYCACHEPREFIX``), so the first timed run pays no more than the last.
``--source-start`` (where a benchmark offers it) keeps the old behaviour.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

CACHE = Path(tempfile.gettempdir()) / "trio-crawl-bench-pycache"


def trio_crawl_command(override: str | None) -> list[str]:
    """How to start trio-crawl: ``--trio-crawl-cmd``, else the console script installed
    beside this interpreter, else on PATH, else ``python -m trio_crawl``."""
    if override:
        return shlex.split(override)
    beside = Path(sys.executable).parent / "trio-crawl"
    if beside.exists():
        return [str(beside)]
    on_path = shutil.which("trio-crawl")
    if on_path:
        return [on_path]
    return [sys.executable, "-m", "trio_crawl"]


def trees(commands: Iterable[str | Iterable[str]], extra: Iterable[str] = ()) -> set[Path]:
    """trio_crawl package directories: the one this interpreter imports, those of
    ``PYTHONPATH=...`` words in ``commands``, and those under ``extra`` roots."""
    found: set[Path] = set()
    spec = importlib.util.find_spec("trio_crawl")
    if spec is not None and spec.origin:
        found.add(Path(spec.origin).parent)
    roots = list(extra)
    for command in commands:
        words = command.split() if isinstance(command, str) else list(command)
        for word in words:
            if word.startswith("PYTHONPATH="):
                roots += word.split("=", 1)[1].split(os.pathsep)
    for root in roots:
        if (Path(root) / "trio_crawl").is_dir():
            found.add((Path(root) / "trio_crawl").resolve())
    return found


def add_source_start(parser: argparse.ArgumentParser) -> None:
    """The ``--source-start`` flag, the same in every benchmark that starts trio-crawl."""
    parser.add_argument(
        "--source-start",
        action="store_true",
        help="start trio-crawl from source, compiling it each run"
        " (default: from a bytecode cache, as an installed copy starts)",
    )


def like_installed(commands: Iterable[str | Iterable[str]], extra: Iterable[str] = ()) -> None:
    """Compile the trees into ``CACHE`` and make children read it."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(CACHE)
    previous = sys.pycache_prefix
    sys.pycache_prefix = str(CACHE)
    try:
        for tree in sorted(trees(commands, extra)):
            compileall.compile_dir(str(tree), quiet=1)
    finally:
        sys.pycache_prefix = previous
