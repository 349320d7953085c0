"""Issue #36 cleanups: a misspelt library keyword is a ``ConfigError``
naming the nearest option, and a handler that is not async is refused
when the crawl is made (library) or loaded (``--handler``)."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from test_cli import small_site
from test_cli_exits import one_error_line, run_in

import trio_crawl
from trio_crawl import ConfigError, CrawlConfig, Page
from trio_crawl.sites.server import serve_site

URL = "http://127.0.0.1:9/"


def test_a_misspelt_keyword_is_a_config_error_naming_the_option() -> None:
    message = r"^unknown option max_dpeth=; did you mean max_depth=\?$"
    with pytest.raises(ConfigError, match=message) as caught:
        CrawlConfig.from_options(URL, max_dpeth=2)  # type: ignore[call-arg]
    assert isinstance(caught.value, TypeError)  # what Python says for a bad keyword, too
    with pytest.raises(ConfigError, match=message):
        trio.run(functools.partial(trio_crawl.run_crawl, URL, max_dpeth=2))  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^unknown option fail_fats=; did you mean fail_fast="):
        CrawlConfig.from_options(URL).with_options(fail_fats=True)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^unknown option zzz=$"):
        CrawlConfig.from_options(URL, zzz=1)  # type: ignore[call-arg]


def plain(page: Page) -> list[object]:
    return [page.url]


async def yielding(page: Page, extra: int = 0) -> AsyncIterator[object]:
    yield page.url


async def returning(page: Page) -> list[object]:
    return [page.url]


class Callable_:
    async def __call__(self, page: Page) -> None:
        return None


def test_the_library_refuses_a_handler_that_is_not_async() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^handler= must be an async function \(async def\) yielding or returning "
        r"items and Requests; plain is not, and every page would fail$",
    ):
        CrawlConfig.from_options(URL, handler=plain)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^handler= must be an async function"):
        CrawlConfig.from_options(URL, handler=lambda page: iter(()))  # type: ignore[arg-type]
    for good in (yielding, returning, Callable_(), functools.partial(yielding, extra=1)):
        assert CrawlConfig.from_options(URL, handler=good).handler is good


@pytest.mark.parametrize("fail_fast", [False, True])
def test_the_command_line_refuses_a_handler_that_is_not_async(
    tmp_path: Path, fail_fast: bool
) -> None:
    (tmp_path / "sync_handler.py").write_text("def parse(page):\n    return [page.url]\n")
    (tmp_path / "good_handler.py").write_text(
        "async def parse(page):\n    yield {'url': page.url}\n"
    )
    more = ["--fail-fast"] if fail_fast else []
    with serve_site(small_site(2)) as server:
        start = server.base_url + "/"
        bad = run_in(tmp_path, start, "--handler", "sync_handler:parse", "--items", "i", *more)
        assert server.targets() == []
        good = run_in(
            tmp_path, start, "--handler", "good_handler:parse", "--items", "items.jsonl",
            "-o", "out.jsonl", "-q", *more,
        )  # fmt: skip
    assert bad.returncode == 2
    assert one_error_line(bad) == (
        "trio-crawl: error: --handler sync_handler:parse: parse is not an async function "
        "(async def, yielding or returning items and Requests)"
    )
    assert good.returncode == 0, good.stderr
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert items == [{"url": start}]
