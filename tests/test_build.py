"""One crawl builder, one backend contract (issue #24 items 2-3, #25 item 6).

* Library and CLI build a crawl in one place (``engine/build.py``): nothing
  else constructs a ``Crawler`` or opens a crawl's archive.
* Depth corrections reach the engine through ``attach(..., correct)``, from
  any backend, not only the memory frontier.
* A backend serves what its class has: a small core (``FrontierBackend``)
  and optional protocols (issue #35 item 3). A crawl that needs what its
  backend lacks is refused in one place, with a ``ConfigError`` naming
  library arguments when it is opened, before any fetch (no request
  reaches the server, no state file is made).
* Library errors name library arguments (``workers=``); the command line
  says the same sentence with its flags (``--workers``), from one mapping.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import random
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from test_depth import chain_site, final, url

from trio_crawl import CrawlConfig, CrawlOptions, DepthUpdate, run_crawl
from trio_crawl.cli.flags import flag_for, in_flags
from trio_crawl.cli.parser import build_parser
from trio_crawl.core.frontier import DepthCorrection
from trio_crawl.engine.build import CrawlPlan, open_crawl
from trio_crawl.errors import ConfigError
from trio_crawl.frontiers.base import (
    REDIS_LIMITS,
    STATE_LIMITS,
    Correct,
    FrontierBackend,
    Need,
    unserved,
)
from trio_crawl.frontiers.memory import MemoryFrontier
from trio_crawl.frontiers.redis import RedisFrontier, unsupported
from trio_crawl.frontiers.specs import redis_frontier
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


async def no_items(page: object) -> None:
    """A handler that gives nothing (a crawl refuses one that is not async)."""
    return None


#: A crawl that needs everything a backend may be asked.
NEEDY = {
    "page_requisites": True,
    "handler": no_items,
    "random_wait": True,
    "rate": 1.0,
    "max_pages_per_host": 5,
    "sitemaps": True,
}


def test_each_backend_serves_what_its_class_has() -> None:
    config = CrawlConfig.from_options(start_urls=["http://a.test/"], **NEEDY)  # type: ignore[arg-type]
    assert unserved(config, MemoryFrontier) == []
    assert set(unserved(config, SqliteFrontier)) == {Need.PAGE_REQUISITES, Need.HANDLERS}
    # Host budgets are counted in Redis (``SharedHostBudgets``).
    assert set(unserved(config, RedisFrontier)) == {Need.PAGE_REQUISITES, Need.RANDOM_WAIT}
    # The refusals' words are for needs the backend lacks, and only those.
    assert set(STATE_LIMITS) == set(unserved(config, SqliteFrontier))
    assert set(REDIS_LIMITS) == set(unserved(config, RedisFrontier))
    config = CrawlConfig.from_options(start_urls=["http://a.test/"], page_requisites=True)
    assert (
        unsupported(config)
        == "page_requisites=True cannot be combined with open_redis_frontier() yet"
    )
    with pytest.raises(ConfigError) as refused:
        trio.run(
            lambda: run_crawl(
                "http://a.test/",
                frontier=redis_frontier("redis://127.0.0.1:1/0", "x"),
                page_requisites=True,
            )
        )
    assert (
        str(refused.value)
        == "page_requisites=True cannot be combined with frontier=redis_frontier() yet"
    )
    assert in_flags(refused.value) == "--page-requisites cannot be combined with --redis yet"


def test_the_frontier_interface_is_small() -> None:
    """At most 12 members on the core face; a backend refuses nothing at run
    time: what it cannot serve, it does not have."""
    declared = [
        node
        for node in ast.parse((PACKAGE / "frontiers" / "base.py").read_text()).body
        if isinstance(node, ast.ClassDef) and node.name == "FrontierBackend"
    ]
    (face,) = declared
    members = [
        node
        for node in face.body
        if not (isinstance(node, ast.Expr))  # docstrings
    ]
    assert len(members) <= 12, [getattr(m, "name", None) for m in members]
    assert not hasattr(SqliteFrontier, "admit_requisites")
    assert not hasattr(SqliteFrontier, "admit_request")
    assert not hasattr(RedisFrontier, "admit_requisites")
    for path in (PACKAGE / "frontiers").rglob("*.py"):
        text = path.read_text()
        assert "unreachable: refused" not in text, path
        assert "cannot: ClassVar" not in text, path


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
            {"handler": no_items},
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


class NoHandlers:
    """A backend that keeps no Python objects: it has no ``admit_request``
    (the rest is a memory frontier's)."""

    def __init__(self, inner: MemoryFrontier) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "admit_request":
            raise AttributeError(name)
        return getattr(self._inner, name)


@dataclasses.dataclass(frozen=True)
class NoHandlersSpec:
    """How a user would name that backend: ``frontier=NoHandlersSpec()``."""

    opened: list[NoHandlers] = dataclasses.field(default_factory=list)
    chosen_by: str = "frontier=NoHandlers"
    limits: Mapping[Need, str] = dataclasses.field(
        default_factory=lambda: {Need.HANDLERS: " (it keeps no Python objects)"}
    )

    def backend(self) -> type:
        return NoHandlers

    @contextlib.asynccontextmanager
    async def open(self, config: CrawlConfig) -> AsyncIterator[FrontierBackend]:
        frontier = NoHandlers(MemoryFrontier(config.start_urls, scope=config.scope()))
        self.opened.append(frontier)
        yield frontier  # type: ignore[misc]


def test_a_crawl_is_refused_for_its_backend_in_one_place() -> None:
    """The builder refuses (before it opens anything); besides it only the
    two that open a backend themselves: ``open_redis_frontier`` before it
    connects, and the command line before it opens a state file. No backend
    and no part of the engine refuses on its own."""
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if _calls_of(path, {"refuse_unservable"})
    )
    assert callers == ["cli/crawl.py", "engine/build.py", "frontiers/redis/support.py"]
    assert len(_calls_of(PACKAGE / "cli" / "crawl.py", {"refuse_unservable"})) == 1
    assert len(_calls_of(PACKAGE / "engine" / "build.py", {"_refuse_unservable"})) == 1


def test_a_limit_of_any_backend_is_refused_when_opened() -> None:
    config = CrawlConfig.from_options(start_urls=["http://a.test/"], handler=no_items)
    spec = NoHandlersSpec()
    fetcher = FakeFetcher({})
    plan = CrawlPlan(config=config, fetcher=fetcher, frontier=spec)

    async def main(plan: CrawlPlan) -> None:
        async with open_crawl(plan):
            raise AssertionError("opened")

    refusal = r"^handler= cannot be combined with frontier=NoHandlers \(it keeps"
    with pytest.raises(ConfigError, match=refusal):
        trio.run(main, plan)
    assert fetcher.calls == [] and fetcher.robots_calls == []
    assert spec.opened == []  # refused before it was opened
    # An open one handed to the builder (as the command line does): refused too.
    frontier = NoHandlers(MemoryFrontier(config.start_urls, scope=config.scope()))
    opened = CrawlPlan(config=config, fetcher=fetcher, frontier=frontier)  # type: ignore[arg-type]
    with pytest.raises(
        ConfigError, match=r"^handler= cannot be combined with frontier=NoHandlers$"
    ):
        trio.run(main, opened)
    assert fetcher.calls == []


def test_a_frontier_and_a_state_file_are_refused_together(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    spec = redis_frontier("redis://127.0.0.1:1/0", "x")
    with pytest.raises(ConfigError) as refused:
        trio.run(lambda: run_crawl("http://127.0.0.1:1/", frontier=spec, state=str(db)))
    assert str(refused.value) == "state= and frontier= cannot be combined"
    assert "\n" not in str(refused.value)
    assert not db.exists()


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
        "http://127.0.0.1:1/", "-q", "-o", str(out), "--handler", "asyncio:sleep",
        "--items", str(tmp_path / "items.jsonl"), "--max-queue", "5",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "trio-crawl: error: --handler cannot be combined with --max-queue: "
        "handlers and their requests carry Python functions\n"
    )
    assert not out.exists() or out.read_text() == ""
