"""What the docs claim, held to the code (issue #25, item 6): every command
line option is in the manual (docs/manual/, moved there from the README by
issue #35), every library option and keyword in the API reference,
``protocol`` can be ``"HTTP/1.0"``, ``items()`` keeps what came before it
and ``records()`` does not, and the unread-items warning's delay is the one
the docs give."""

from __future__ import annotations

import inspect
import re
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_crawl
from trio_crawl import CrawlOptions
from trio_crawl.cli.parser import build_parser
from trio_crawl.engine import api

from cli_helpers import records_in, run_cli
from fakes import FakeFetcher, FakePage
from hostile_server import serve_hostile

ROOT = Path(__file__).resolve().parent.parent
MANUAL_DIR = ROOT / "docs" / "manual"
#: the whole manual: an option may be documented on the page of its subject
MANUAL = "\n".join(p.read_text() for p in sorted(MANUAL_DIR.glob("*.md")))
LIBRARY = (MANUAL_DIR / "library.md").read_text()
OUTPUT = (MANUAL_DIR / "output.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()
TUTORIAL = (ROOT / "docs" / "tutorial" / "first-scraper.md").read_text()


def test_every_option_of_the_crawl_is_in_the_manual() -> None:
    flags = [
        flag
        for action in build_parser()._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag not in ("--help", "--version")
    ]
    missing = [flag for flag in flags if not re.search(re.escape(flag) + r"\b", MANUAL)]
    assert not missing


def test_every_library_option_is_in_the_reference_table() -> None:
    fields = ["start_urls", *CrawlOptions.__optional_keys__]
    missing = [name for name in fields if f"| `{name}` |" not in REFERENCE]
    assert not missing


@pytest.mark.parametrize("function", [api.open_crawler, api.run_crawl])
def test_every_keyword_of_the_crawl_functions_is_in_the_reference(function: object) -> None:
    keywords = [
        name
        for name, p in inspect.signature(function).parameters.items()  # type: ignore[arg-type]
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert "on_item" in keywords and "on_depth_update" in keywords
    assert [k for k in keywords if f"`{k}=`" not in REFERENCE] == []


def test_the_unread_items_delay_is_the_documented_one() -> None:
    seconds = f"{api.UNREAD_ITEMS_WARNING:g}"
    assert "after 10 s more without a reader" in LIBRARY and seconds == "10"
    assert f"{seconds} seconds later" in REFERENCE and f"{seconds} seconds later" in TUTORIAL


def http10_answer(sock: socket.socket, stop: threading.Event) -> bool:
    body = b"<html><body>old server</body></html>"
    head = f"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode() + body)
    return False


@pytest.mark.parametrize("fetcher", ["curl", "httpx"])
def test_protocol_can_be_http_1_0(fetcher: str) -> None:
    with serve_hostile({"/": http10_answer}) as server:
        result = run_cli(server.url("/"), "-o", "-", "-q", "--ignore-robots", "--fetcher", fetcher)
    assert result.returncode == 0, result.stderr
    (record,) = records_in(result.stdout)
    assert record["status"] == 200 and record["protocol"] == "HTTP/1.0"
    assert '`"HTTP/1.0"`' in OUTPUT


async def url_item(page: trio_crawl.Page) -> AsyncIterator[object]:
    yield {"url": page.url}
    if page.url == "http://a.test/":
        for path in ("/a", "/b", "/slow"):
            yield trio_crawl.Request("http://a.test" + path)


async def test_items_are_kept_from_the_start_and_records_are_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The manual (library.md) and the tutorial: a late ``items()`` gets every item, a late
    ``records()`` only the records made after it (with a warning). Three
    pages are done at once; /slow takes 100 s of virtual time."""
    pages = {
        "http://a.test/": FakePage(),
        "http://a.test/a": FakePage(),
        "http://a.test/b": FakePage(),
        "http://a.test/slow": FakePage(delay=100),
    }
    async with trio_crawl.open_crawler(
        "http://a.test/", fetcher=FakeFetcher(pages), handler=url_item, ignore_robots=True
    ) as crawl:
        await trio.sleep(5)  # the crawl runs; nobody reads
        assert crawl.statistics().records == 3
        with pytest.warns(RuntimeWarning, match=r"^3 records were made before records\(\)"):
            records = crawl.records()
        late_records: list[str] = []

        async def read_records() -> None:
            late_records.extend([r.url async for r in records])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_records)
            got = [item async for item in crawl.items()]
    assert late_records == ["http://a.test/slow"]
    assert sorted(i["url"] for i in got) == sorted(pages)  # type: ignore[index]


def test_the_tutorial_lists_every_error_kind_and_no_other() -> None:
    from trio_crawl.core.models import ERROR_KINDS

    text = (ROOT / "docs" / "tutorial" / "first-crawl.md").read_text()
    listed = text.split("The error kinds are short and stable", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_0-9]+)`", listed)) - {"render_error"}  # a field, not a kind
    assert named == ERROR_KINDS


def test_the_tutorial_does_not_give_the_old_fixed_worker_default() -> None:
    for name in ("first-crawl.md", "politeness.md"):
        text = (ROOT / "docs" / "tutorial" / name).read_text()
        assert "default 16)" not in text, name
