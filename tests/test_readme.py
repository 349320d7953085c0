"""README.md is the front door (issue #35 item 7): a newcomer's five minutes,
with the manual in docs/. What it shows has to work as shown, and it has to
stay short, or it grows back into the manual: the house limit is 400 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trio_crawl.testing import Site, page, serve_site

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
#: the host the README's examples crawl; the tests serve a local site instead
EXAMPLE_URL = "http://127.0.0.1:8000/"


def test_the_readme_stays_a_front_door() -> None:
    assert len(README.splitlines()) <= 400


def test_the_readme_gives_the_test_command_ci_runs() -> None:
    """``.ci/run`` runs "the test command README.md gives"."""
    assert "$ pip install nox && nox -s lint typecheck tests\n" in README
    assert "\nrun_nox -s lint typecheck tests\n" in (ROOT / ".ci" / "run").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_the_readme_python_examples_run(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Each block runs as written (it calls ``trio.run`` itself), on a local
    site of three pages in place of the example URL."""
    code = python_blocks()[index]
    assert EXAMPLE_URL in code
    site = Site(routes={"/": page("/a", "/b"), "/a": page("/"), "/b": page()})
    with serve_site(site) as server:
        code = code.replace(EXAMPLE_URL, server.url("/"))
        exec(compile(code, f"README.md python block {index}", "exec"), {})
        urls = sorted(server.url(path) for path in ("/", "/a", "/b"))
    out = capsys.readouterr().out
    assert all(url in out for url in urls), out
