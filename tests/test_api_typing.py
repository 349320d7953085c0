"""The library's signatures: options are typed, so mypy catches mistakes."""

from __future__ import annotations

import dataclasses
import http.cookiejar
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

import trio_crawl
from trio_crawl import CrawlConfig
from trio_crawl.core.config import GROUPS
from trio_crawl.engine.api import CrawlOptions

REPO = Path(__file__).resolve().parent.parent


def test_crawl_options_mirror_crawl_config() -> None:
    # CookieJar is imported for type checkers only (start-up cost): name it here
    names = {"CookieJar": http.cookiejar.CookieJar}
    config = typing.get_type_hints(CrawlConfig, localns=names)
    fields = {f.name for f in dataclasses.fields(CrawlConfig)} - {"start_urls", *GROUPS}
    for group in GROUPS.values():  # a group's fields are options too
        fields |= {f.name for f in dataclasses.fields(group)}
        config |= typing.get_type_hints(group, localns=names)
    options = typing.get_type_hints(CrawlOptions, localns=names)
    assert set(options) == fields
    for name, hint in options.items():
        assert hint == config[name], name
    assert not CrawlOptions.__required_keys__  # every option has a default


GOOD = """
import trio_crawl
from trio_crawl import Page, Request


async def handler(page: Page) -> None:
    return None


async def main() -> None:
    async with trio_crawl.open_crawler("http://127.0.0.1:1/", max_depth=2) as crawl:
        async for record in crawl:
            print(record.url)
    print(crawl.summary.records + 1)  # not Optional after the block
    s = await trio_crawl.run_crawl(["http://127.0.0.1:1/", Request("http://127.0.0.1:1/x")],
                                   workers=2, handler=handler, allow_domains=["a.test"])
    print(s.records)
    spec = trio_crawl.redis_frontier("redis://127.0.0.1:1/0", "x", lease=10.0)
    await trio_crawl.run_crawl("http://127.0.0.1:1/", frontier=spec, warc="x.warc.gz")
"""

BAD = """
import trio_crawl


def not_a_handler(x: int) -> int:
    return x


async def main() -> None:
    await trio_crawl.run_crawl("http://127.0.0.1:1/", max_dpeth=2)
    await trio_crawl.run_crawl("http://127.0.0.1:1/", workers="8")
    await trio_crawl.run_crawl("http://127.0.0.1:1/", handler=not_a_handler)
    async with trio_crawl.open_crawler(["http://127.0.0.1:1/"], max_pagse=1):
        pass
    await trio_crawl.run_crawl("http://127.0.0.1:1/", frontier="redis://127.0.0.1:1/0")
"""


@pytest.mark.timeout(600)
def test_mypy_rejects_misspelt_and_mistyped_options(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(REPO / ".mypy_cache"), "good.py", "bad.py"],
        capture_output=True, text=True, timeout=540, cwd=tmp_path,
    )  # fmt: skip
    # mypy ran (it is in the test extra): exit 1 means "found errors".
    assert result.returncode == 1, result.stderr or result.stdout
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith("good.py")], result.stdout
    bad_lines = sorted({int(e.split(":")[1]) for e in errors if e.startswith("bad.py")})
    assert bad_lines == [10, 11, 12, 13, 15], result.stdout
    assert "max_dpeth" in result.stdout and "max_pagse" in result.stdout


def test_the_public_names_are_exported() -> None:
    assert trio_crawl.CrawlOptions is CrawlOptions


async def test_a_running_crawl_is_a_handle_not_the_engine() -> None:
    """``open_crawler``'s ``RunningCrawl`` offers its streams, ``stop``,
    ``statistics`` and the summary; the engine behind it is not public (it
    was ``crawl.crawler``: its internals were reachable through it)."""
    from trio_crawl.testing import Site, page, serve_site

    with serve_site(Site({"/": page("/a"), "/a": page()})) as server:
        async with trio_crawl.open_crawler(server.url("/"), workers=1) as crawl:
            public = {name for name in dir(crawl) if not name.startswith("_")}
            records = [record.url async for record in crawl]
    assert public == {"records", "items", "wait", "stop", "statistics", "ended", "summary"}
    assert crawl.summary.records == len(records) > 0
