"""One crawl builder, one backend contract (issue #24 items 2-3, #25 item 6).

* Library and CLI build a crawl in one place (``engine/build.py``): nothing
  else constructs a ``Crawler`` or opens a crawl's archive.
* Depth corrections reach the engine through ``attach(..., correct)``, from
  any backend, not only the memory frontier.
* A backend declares what it cannot serve (``cannot``); the crawl is refused
  with a ``ConfigError`` naming library arguments when it is opened, before
  any fetch (no request reaches the server, no state file is made).
* Library errors name library arguments (``workers=``); the command line
  says the same sentence with its flags (``--workers``), from one mapping.
"""

from __future__ import annotations

import ast
import dataclasses
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import trio
from test_depth import chain_site, final, url

from trio_crawl import CrawlConfig, Crawler, CrawlOptions, DepthUpdate, run_crawl
from trio_crawl.cli.flags import flag_for, in_flags
from trio_crawl.cli.parser import build_parser
from trio_crawl.core.frontier import DepthCorrection
from trio_crawl.engine.build import CrawlPlan, open_crawl
from trio_crawl.errors import ConfigError
from trio_crawl.frontiers.base import Correct, Need, refuse_unservable
from trio_crawl.frontiers.memory import MemoryFrontier
from trio_crawl.frontiers.redis import RedisFrontier
from trio_crawl.frontiers.sqlite import SqliteFrontier
from trio_crawl.testing import Site, page, serve_site

from cli_helpers import run_cli
from fakes import FakeFetcher

PACKAGE = Path(__file__).parents[1] / "trio_crawl"


# -- one builder --------------------------------------------------------------


def _calls_of(path: Path, names: set[str]) -> list[int]:
    """Lines of ``path`` that call one of ``names`` (a plain or attribute call)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called in names:
                lines.append(node.lineno)
    return lines


def test_only_the_builder_makes_a_crawler_or_opens_its_archive() -> None:
    makers = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if "Crawler" in (text := path.read_text()) or "open_crawl_archive" in text
        for lines in [_calls_of(path, {"Crawler", "open_crawl_archive"})]
        if lines
    }
    assert list(makers) == ["engine/build.py"], makers


def test_the_crawler_is_under_250_lines() -> None:
    assert len((PACKAGE / "engine" / "crawler.py").read_text().splitlines()) < 250


def test_a_plan_is_keyword_only_and_frozen() -> None:
    config = CrawlConfig.from_options(start_urls=["http://a.test/"])
    with pytest.raises(TypeError):
        CrawlPlan(config)  # type: ignore[misc]
    plan = CrawlPlan(config=config)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.warc = "x.warc.gz"  # type: ignore[misc]


async def test_the_builder_wires_every_hook_once(autojump_clock: object) -> None:
    fetcher = FakeFetcher(chain_site(hang=5.0, length=8))
    records: list[object] = []
    updates: list[DepthUpdate] = []
    responses: list[str] = []
    config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True)
    plan = CrawlPlan(
        config=config,
        fetcher=fetcher,
        on_record=(records.append,),
        on_depth_update=(updates.append,),
        on_response=(lambda u, result: responses.append(u),),
        rng=random.Random(0),
    )
    async with open_crawl(plan) as built:
        summary = await built.crawler.run()
    assert built.failure is None
    assert summary.records == len(records) == len(responses) == 11  # 0, hang, c0..c8 (404)
    assert sorted(responses) == sorted(r.url for r in records)  # type: ignore[attr-defined]
    assert [u.url for u in updates] == [url(f"c{i}") for i in range(3, 9)]


# -- depth corrections through the backend's face -----------------------------


class RelayedFrontier:
    """A backend that is not a ``MemoryFrontier`` (it wraps one): its
    corrections reach the engine only through ``attach``'s ``correct``."""

    cannot: ClassVar[dict[Need, str]] = {}
    chosen_by = "frontier="

    def __init__(self, inner: MemoryFrontier) -> None:
        self._inner = inner
        self.relayed: list[DepthCorrection] = []

    def attach(
        self,
        publish: Callable[[Any], None],
        check_idle: Callable[[], None],
        queued: Callable[[], int],
        correct: Correct,
    ) -> None:
        def relay(correction: DepthCorrection) -> None:
            self.relayed.append(correction)
            correct(correction)

        self._inner.attach(publish, check_idle, queued, relay)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_any_backend_hands_its_corrections_to_the_engine(autojump_clock: object) -> None:
    fetcher = FakeFetcher(chain_site(hang=5.0, length=8))
    config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True)
    scope = config.scope()
    frontier = RelayedFrontier(MemoryFrontier(config.start_urls, scope=scope))
    records: list[Any] = []
    updates: list[DepthUpdate] = []
    plan = CrawlPlan(
        config=config,
        fetcher=fetcher,
        frontier=frontier,  # type: ignore[arg-type]
        on_record=(records.append,),
        on_depth_update=(updates.append,),
        rng=random.Random(0),
    )
    async with open_crawl(plan) as built:
        await built.crawler.run()
    assert [c.url for c in frontier.relayed] == [u.url for u in updates] != []
    assert final(records, updates)[url("c7")] == (6, url("c6"))  # 0 -> hang -> c3 ... c7


def test_the_memory_frontier_calls_correct_after_the_record() -> None:
    config = CrawlConfig.from_options(start_urls=["http://a.test/"])
    frontier = MemoryFrontier(config.start_urls, scope=config.scope())
    published: list[Any] = []
    corrections: list[DepthCorrection] = []
    frontier.attach(published.append, lambda: None, lambda: 0, corrections.append)
    trio.run(frontier.admit_start_urls)
    (root,) = published
    assert frontier.start(root)
    trio.run(frontier.admit_links, root, ["http://a.test/a", "http://a.test/b"])
    trio.run(frontier.finish, root, None)
    a = published[1]
    assert frontier.start(a)
    trio.run(frontier.finish, a, ["http://a.test/deep"])
    deep = published[3]
    assert frontier.start(deep)
    trio.run(frontier.finish, deep, None)
    deep.written = True  # its record (depth 2) is out
    assert corrections == []
    assert frontier.admit_request(root, "http://a.test/deep", None)  # a shorter path
    assert [(c.url, c.previous_depth, c.depth) for c in corrections] == [
        ("http://a.test/deep", 2, 1)
    ]


# -- capabilities, refused when the crawl is opened ---------------------------


def test_each_backend_declares_what_it_cannot_serve() -> None:
    assert MemoryFrontier.cannot == {}
    assert set(SqliteFrontier.cannot) == {Need.PAGE_REQUISITES, Need.HANDLERS}
    assert set(RedisFrontier.cannot) == {
        Need.PAGE_REQUISITES,
        Need.RANDOM_WAIT,
        Need.HOST_BUDGETS,
    }
    config = CrawlConfig.from_options(start_urls=["http://a.test/"], page_requisites=True)
    with pytest.raises(ConfigError) as refused:
        refuse_unservable(config, RedisFrontier.cannot, RedisFrontier.chosen_by)
    assert (
        str(refused.value)
        == "page_requisites=True cannot be combined with open_redis_frontier() yet"
    )
    assert in_flags(refused.value) == "--page-requisites cannot be combined with --redis yet"


def _quiet_site() -> Site:
    return Site(routes={"/": page("/a"), "/a": page()})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"page_requisites": True},
            "page_requisites=True cannot be combined with state= yet: "
            "the file does not record which URLs are requisites",
        ),
        (
            {"handler": lambda page: iter(())},
            "handler= cannot be combined with state=: "
            "handlers and their requests carry Python functions",
        ),
    ],
)
def test_the_library_refuses_a_state_file_before_any_fetch(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    db = tmp_path / "crawl.db"
    with serve_site(_quiet_site()) as server:
        with pytest.raises(ConfigError) as refused:
            trio.run(lambda: run_crawl(server.url("/"), state=str(db), **options))
        assert server.log == []
    assert str(refused.value) == message
    assert not db.exists()


def test_a_declared_limit_of_any_backend_is_refused_when_opened() -> None:
    class NoHandlers(MemoryFrontier):
        cannot: ClassVar[dict[Need, str]] = {Need.HANDLERS: " (it keeps no Python objects)"}
        chosen_by = "frontier=NoHandlers"

    config = CrawlConfig.from_options(start_urls=["http://a.test/"], handler=lambda page: iter(()))
    frontier = NoHandlers(config.start_urls, scope=config.scope())
    fetcher = FakeFetcher({})
    plan = CrawlPlan(config=config, fetcher=fetcher, frontier=frontier)

    async def main() -> None:
        async with open_crawl(plan):
            raise AssertionError("opened")

    refusal = r"^handler= cannot be combined with frontier=NoHandlers \(it keeps"
    with pytest.raises(ConfigError, match=refusal):
        trio.run(main)
    assert fetcher.calls == [] and fetcher.robots_calls == []
    with pytest.raises(ConfigError, match=refusal):  # built directly: refused too
        Crawler(config, fetcher, frontier=frontier)


# -- library errors name library arguments ------------------------------------


@pytest.mark.parametrize(
    ("options", "library", "cli"),
    [
        (
            {"workers": 0},
            "workers= must be at least 1 (got 0)",
            "--workers must be at least 1 (got 0)",
        ),
        (
            {"max_depth": -1},
            "max_depth= must be >= 0 (got -1)",
            "--max-depth must be >= 0 (got -1)",
        ),
        (
            {"per_host_concurrency": 0},
            "per_host_concurrency= must be >= 1 (got 0)",
            "--per-host-concurrency must be >= 1 (got 0)",
        ),
        (
            {"backend": "x"},
            "backend= must be one of curl, httpx, asks",
            "--fetcher must be one of curl, httpx, asks",
        ),
        ({"user_agent": " "}, "user_agent= must not be empty", "--user-agent must not be empty"),
        (
            {"connect_timeout": 0},
            "connect_timeout= must be > 0 (got 0)",
            "connect_timeout= must be > 0 (got 0)",
        ),
        (
            {"proxy": "ftp://p:1"},
            "proxy= must be an http:// or https:// URL with a host",
            "--proxy must be an http:// or https:// URL with a host",
        ),
        (
            {"headers": [("bad name", "v")]},
            "headers=: invalid header name 'bad name'",
            "--header: invalid header name 'bad name'",
        ),
    ],
)
def test_a_library_error_names_library_arguments(
    options: dict[str, Any], library: str, cli: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        CrawlConfig.from_options(start_urls=["http://a.test/"], **options)
    assert str(refused.value) == library
    assert in_flags(refused.value) == cli


def test_a_start_url_with_a_password_names_the_arguments_to_use() -> None:
    with pytest.raises(ConfigError) as refused:
        CrawlConfig.from_options(start_urls=["http://ann:pw@a.test/"])
    assert str(refused.value).endswith("never sent; give them with auth=")
    assert in_flags(refused.value).endswith("never sent; give them with --user and --password")


def test_every_flag_the_mapping_names_exists() -> None:
    options = {option for action in build_parser()._actions for option in action.option_strings}
    for name in ("start_urls", *CrawlOptions.__optional_keys__):
        for argument in (f"{name}=", f"{name}=True"):
            flag = flag_for(argument)
            if flag is not None:
                named = [word for word in flag.split() if word.startswith("-")]
                assert named and set(named) <= options, (argument, flag)


def test_the_cli_names_the_flag_that_chose_the_state_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run_cli(
        "http://127.0.0.1:1/", "-q", "-o", str(out), "--handler", "json:dumps",
        "--items", str(tmp_path / "items.jsonl"), "--max-queue", "5",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "trio-crawl: error: --handler cannot be combined with --max-queue: "
        "handlers and their requests carry Python functions\n"
    )
    assert not out.exists() or out.read_text() == ""
