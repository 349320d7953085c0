"""The house limits on size, read from the tree.

* No module in ``trio_crawl/`` over 600 lines.
* No class in ``trio_crawl/engine/`` over 250 lines (``end_lineno - lineno
  + 1`` of its ``ast.ClassDef``).
* No module imports trio's private modules (``trio._...``): they change
  without notice between trio releases.
* README.md at most 400 lines (the manual, ``docs/manual/``, has the rest).
* ``CrawlConfig`` at most 16 dataclass fields (options live in its groups).

Checked elsewhere, not repeated here: the core face of a frontier backend
(``FrontierBackend``, at most 12 members) in
``test_build.py::test_the_frontier_interface_is_small``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from trio_crawl.core.config import CrawlConfig

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "trio_crawl"

MODULE_LINES = 600
ENGINE_CLASS_LINES = 250
README_LINES = 400
CONFIG_FIELDS = 16

PRIVATE_TRIO = re.compile(r"^\s*(from|import)\s+trio\._")


def _python_files() -> list[Path]:
    """The project's own Python files: the package, tests, examples,
    benchmarks, docs and the top-level scripts."""
    dirs = ("trio_crawl", "tests", "examples", "benchmarks", "docs")
    return [
        *(path for name in dirs for path in sorted((ROOT / name).rglob("*.py"))),
        *sorted(ROOT.glob("*.py")),
    ]


def test_no_module_of_the_package_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_no_class_of_the_engine_is_over_250_lines() -> None:
    long = {
        f"{path.relative_to(ROOT)}:{node.name}": size
        for path in sorted((PACKAGE / "engine").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and node.end_lineno is not None
        and (size := node.end_lineno - node.lineno + 1) > ENGINE_CLASS_LINES
    }
    assert long == {}


def test_no_module_imports_trio_privately() -> None:
    files = _python_files()
    assert PACKAGE / "engine" / "schedule.py" in files  # the scan sees the tree
    private = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_TRIO.match(line)
    ]
    assert private == []


def test_private_trio_imports_are_recognised() -> None:
    assert PRIVATE_TRIO.match("from trio._core import RunVar")
    assert PRIVATE_TRIO.match("    import trio._util")
    assert not PRIVATE_TRIO.match("from trio.lowlevel import RunVar")
    assert not PRIVATE_TRIO.match("import trio")


def test_the_readme_is_at_most_400_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_LINES


def test_the_config_has_at_most_16_fields() -> None:
    names = [f.name for f in dataclasses.fields(CrawlConfig)]
    assert len(names) <= CONFIG_FIELDS, names
