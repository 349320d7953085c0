"""``--help`` (issue #25, item 5): grouped with argparse argument groups,
every default said, what an unset limit means, and the other commands in
the usage line."""

from __future__ import annotations

import argparse

from trio_crawl.cli.parser import build_parser

from cli_helpers import run_cli

GROUPS = [
    "scope and filters",
    "politeness",
    "identity",
    "output",
    "state and scale-out",
    "fetcher",
]


def test_options_are_grouped() -> None:
    parser = build_parser()
    titles = [group.title for group in parser._action_groups]
    assert [t for t in titles if t in GROUPS] == GROUPS
    grouped = {
        action.dest: group.title
        for group in parser._action_groups
        for action in group._group_actions
    }
    for dest, title in {
        "max_time": "scope and filters",
        "accept": "scope and filters",
        "random_wait": "politeness",
        "rate": "politeness",
        "header": "identity",
        "user_agent": "identity",
        "warc": "output",
        "state": "state and scale-out",
        "redis": "state and scale-out",
        "timeout": "fetcher",
        "max_bytes": "fetcher",
    }.items():
        assert grouped[dest] == title, dest


def test_every_default_is_said() -> None:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._StoreAction) and action.default not in (None, []):
            assert action.help is not None and "default" in action.help, action.dest
    unset = {"rate": "no limit", "per_host_concurrency": "no limit", "max_depth": "no limit"}
    for action in parser._actions:
        if action.dest in unset:
            assert action.help is not None and unset[action.dest] in action.help


def test_help_shows_units_defaults_and_the_other_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    text = result.stdout
    assert text.startswith("usage: trio-crawl [options] URL [URL ...]\n")
    assert "trio-crawl demo [options]" in text and "trio-crawl report FILE" in text
    for said in ("(default 30s)", "(default 2)", "(default 10M)", "(default 10s)", "1e3"):
        assert said in text, said


def test_units_reach_the_config() -> None:
    from trio_crawl.cli.options import build_config

    args = build_parser().parse_args(
        ["http://h/", "--max-bytes", "1.5G", "--timeout", "2m", "--max-time", "1h",
         "-w", "1e2", "--grace", "500ms", "--rate", "1e-1"]
    )  # fmt: skip
    config = build_config(args, args.urls)
    assert config.fetch.max_bytes == 1536 * 1024 * 1024
    assert (config.fetch.timeout, config.budgets.max_time, config.pool.grace) == (
        120.0,
        3600.0,
        0.5,
    )
    assert (config.pool.workers, config.politeness.rate) == (100, 0.1)
