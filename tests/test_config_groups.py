"""``CrawlConfig`` in groups (issue #35, item 2): flat options routed to
their group by name, pure validation (making a config reads no file and
no PATH; the resources are checked when the crawl's fetcher is opened),
and one option table behind the command line's flags."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

import trio_crawl
from trio_crawl.cli.flags import flag_for
from trio_crawl.cli.option_table import library_flags
from trio_crawl.cli.options import build_config
from trio_crawl.cli.parser import build_parser
from trio_crawl.core.config import (
    GROUPS,
    TOP_LEVEL,
    CrawlConfig,
    CrawlOptions,
    option_default,
    option_group,
)
from trio_crawl.core.settings import Budgets, Follow, Politeness
from trio_crawl.engine.resources import check_resources
from trio_crawl.errors import ConfigError

#: Library options the command line has no flag for (``--all-bodies`` says
#: the opposite of ``html_only``; ``--user``/``--password`` give ``auth``).
WITHOUT_A_FLAG = {"connect_timeout", "thread_parse_bytes", "html_only", "auth"}


def test_flat_options_reach_their_groups() -> None:
    config = CrawlConfig.from_options(
        ["http://a.test/"], max_depth=2, rate=5, span_hosts=True, workers=3, debug=True
    )
    assert config.budgets == Budgets(max_depth=2)
    assert config.politeness == Politeness(rate=5)
    assert config.follow == Follow(span_hosts=True)
    assert (config.pool.workers, config.debug) == (3, True)
    assert config == CrawlConfig(
        start_urls=["http://a.test/"],
        budgets=Budgets(max_depth=2),
        politeness=Politeness(rate=5),
        follow=Follow(span_hosts=True),
        pool=trio_crawl.Pool(workers=3),
        debug=True,
    )
    assert CrawlConfig.from_options("http://a.test/") == CrawlConfig(start_urls=["http://a.test/"])
    changed = config.with_options(max_depth=4, fail_fast=True)
    assert (changed.budgets.max_depth, changed.politeness.rate, changed.fail_fast) == (4, 5, True)


def test_an_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="max_dept"):
        CrawlConfig.from_options(["http://a.test/"], max_dept=2)  # type: ignore[call-arg]


def test_a_group_checks_its_fields_when_it_is_made() -> None:
    with pytest.raises(ConfigError, match=r"^max_depth= must be >= 0 \(got -1\)$"):
        Budgets(max_depth=-1)
    with pytest.raises(ConfigError, match=r"^random_wait=True needs rate="):
        Politeness(random_wait=True)


def test_making_a_config_does_no_io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing CA bundle, netrc file or browser is fine in a config (no
    file or PATH is read); opening the crawl's fetcher refuses each, with
    the message the config used to give."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no browser on it
    monkeypatch.delenv("TRIO_CRAWL_BROWSER", raising=False)
    start = ["http://a.test/"]
    cases = [
        ({"ca_bundle": str(tmp_path / "no.pem")}, r"^ca_bundle=: no such file or directory"),
        ({"netrc_file": str(tmp_path / "no.netrc")}, r"netrc"),
        ({"render": True}, r"^render=True needs Chromium"),
        ({"render": True, "browser": "no-such-browser"}, r"^browser=: not an executable"),
    ]
    for options, refusal in cases:
        config = CrawlConfig.from_options(start, **options)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=refusal):
            check_resources(config)


async def test_the_crawl_refuses_a_missing_ca_bundle_when_it_opens(tmp_path: Path) -> None:
    missing = str(tmp_path / "no.pem")
    with pytest.raises(ConfigError, match=r"^ca_bundle=: no such file or directory"):
        await trio_crawl.run_crawl("http://127.0.0.1:1/", ca_bundle=missing)


def test_crawl_options_are_the_groups_fields() -> None:
    names = set(TOP_LEVEL)
    for cls in GROUPS.values():
        fields = {f.name for f in dataclasses.fields(cls)}
        assert not fields & names, fields & names  # a name routes to one group only
        names |= fields
    assert set(typing.get_type_hints(CrawlOptions, localns={"CookieJar": object})) == names


def test_every_library_option_has_a_flag_or_says_why_not() -> None:
    flagged = {flag.sets for flag in library_flags()}
    assert flagged <= set(CrawlOptions.__optional_keys__)
    assert set(CrawlOptions.__optional_keys__) - flagged == WITHOUT_A_FLAG
    for flag in library_flags():
        assert flag.sets is not None
        if flag.sets != "auth":
            assert flag_for(f"{flag.sets}=") == flag.long_flag


def test_unset_flags_keep_the_library_defaults() -> None:
    args = build_parser().parse_args(["http://a.test/"])
    config = build_config(args, args.urls)
    for flag in library_flags():
        assert flag.sets is not None
        group = option_group(flag.sets)
        holder = config if group is None else getattr(config, group)
        assert getattr(holder, flag.sets) == option_default(flag.sets), flag.sets


@pytest.mark.parametrize(
    ("argv", "group", "option", "value"),
    [
        (["--max-depth", "3"], "budgets", "max_depth", 3),
        (["--span-hosts"], "follow", "span_hosts", True),
        (["-A", "pdf", "-A", "jpg"], "follow", "accept", ("pdf", "jpg")),
        (["--fetcher", "httpx"], "fetch", "backend", "httpx"),
        (["--random-wait", "--rate", "2"], "politeness", "random_wait", True),
        (["--no-parse-process"], "pool", "parse_process", False),
        (["--render", "auto", "--render-wait", "2s"], "rendering", "render_wait", 2.0),
        (["--mirror", "site", "-k"], "output", "convert_links", True),
        (["--mirror", "site"], "fetch", "html_only", False),
        (["--debug"], None, "debug", True),
    ],
)
def test_a_flag_reaches_its_group(
    argv: list[str], group: str | None, option: str, value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIO_CRAWL_BROWSER", "sh")  # any executable: --render is not run here
    args = build_parser().parse_args(["http://a.test/", *argv])
    config = build_config(args, args.urls)
    holder = config if group is None else getattr(config, group)
    assert getattr(holder, option) == value
