"""Every line the command line writes goes through one writer (``cli/common.py``).

``say`` / ``tell`` (stderr), ``answer`` / ``answer_bytes`` (stdout) and
``stderr_console`` (rich's progress display and summary table) are the only
ways a ``cli/`` module reaches a terminal stream: each line is one write,
flushed, with credentials masked, so the workers of ``--processes`` never
interleave their lines and no password is printed. The check reads every
``cli/`` module's syntax tree; a test shows that it catches each way around.
"""

from __future__ import annotations

import ast
import io
import sys
from pathlib import Path

import pytest

from trio_crawl.cli import common

CLI = Path(__file__).parents[1] / "trio_crawl" / "cli"
WRITER = CLI / "common.py"
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
#: what a module may ask a stream without writing to it
HARMLESS = {"isatty", "fileno", "flush"}


def writes_around_the_writer(source: str) -> list[str]:
    """``line: what`` for each way ``source`` writes to stdout/stderr itself."""
    found: list[str] = []
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("print", "Console"):
                found.append(f"{node.lineno}: {node.func.id}()")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in STREAMS
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            parent = parents.get(node)
            if not (isinstance(parent, ast.Attribute) and parent.attr in HARMLESS):
                found.append(f"{node.lineno}: sys.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("sys", "rich"):
            names = {alias.name for alias in node.names}
            if names & (STREAMS | {"print"}):
                found.append(f"{node.lineno}: from {node.module} import {', '.join(names)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "write"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "os"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in (1, 2)
        ):
            found.append(f"{node.lineno}: os.write({node.args[0].value}, ...)")
    return sorted(found, key=lambda line: (int(line.split(":")[0]), line))


@pytest.mark.parametrize(
    "path", sorted(p for p in CLI.glob("*.py") if p != WRITER), ids=lambda p: p.name
)
def test_cli_modules_write_only_through_the_writer(path: Path) -> None:
    assert writes_around_the_writer(path.read_text()) == []


def test_the_check_finds_each_way_around_the_writer() -> None:
    source = """
import os
import sys
from sys import stderr
from rich import print
from rich.console import Console

print("hello")
print("oops", file=sys.stderr)
sys.stderr.write("x\\n")
sys.stdout.buffer.write(b"x")
Console(file=sys.stderr)
stream = sys.__stderr__
os.write(2, b"x")
if sys.stdout.isatty() and sys.stderr.fileno() == 2:
    sys.stderr.flush()
"""
    assert writes_around_the_writer(source) == [
        "4: from sys import stderr",
        "5: from rich import print",
        "8: print()",
        "9: print()",
        "9: sys.stderr",
        "10: sys.stderr",
        "11: sys.stdout",
        "12: Console()",
        "12: sys.stderr",
        "13: sys.__stderr__",
        "14: os.write(2, ...)",
    ]


class CountingStream(io.StringIO):
    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_a_line_is_one_write_with_credentials_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    err, out = CountingStream(), CountingStream()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    common.say("cannot reach http://user:secret@127.0.0.1:1/")
    common.tell("status\nof redis://:secret@127.0.0.1:6379/0")
    common.answer("queued 3\nin redis://u:secret@127.0.0.1:6379/0")
    assert err.writes == 2 and out.writes == 1
    assert "secret" not in err.getvalue() + out.getvalue()
    assert err.getvalue().startswith("trio-crawl: cannot reach http://")
    assert err.getvalue().endswith("6379/0\n") and out.getvalue().endswith("6379/0\n")
