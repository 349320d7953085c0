"""trio_crawl.testing: the public way to serve a local site, as documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trio_crawl.testing

ROOT = Path(__file__).parents[1]


def test_the_module_docstring_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    doc = trio_crawl.testing.__doc__
    assert doc is not None
    code = re.search(r"```python\n(.*?)```", doc, re.S)
    assert code is not None
    exec(compile(code[1], "trio_crawl.testing example", "exec"), {})  # runs trio.run itself
    assert capsys.readouterr().out == "3 ['/', '/a', '/b', '/robots.txt']\n"


def test_every_exported_name_exists() -> None:
    for name in trio_crawl.testing.__all__:
        assert getattr(trio_crawl.testing, name) is not None, name


def test_examples_and_docs_import_no_private_module() -> None:
    sources = [*ROOT.glob("examples/*.py"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md"]
    private = re.compile(
        r"\btrio_crawl\.(_\w+|core|engine|fetch|frontiers|cli|sites)\b|from trio_crawl import _\w+"
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line)
    ]
    assert not found, found
