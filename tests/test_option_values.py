"""Issue #36 cleanups: ``--help`` names exactly the units ``cli/units.py``
accepts, ``--lease`` takes a DURATION like every other duration, and a
negative value (``--timeout -5s``) reaches the option's own check instead
of "expected one argument". One line, exit 2, naming the option."""

from __future__ import annotations

import pytest
from test_cli_exits import one_error_line

from trio_crawl.cli.option_kinds import COUNT, DURATION, NUMBER, SIZE
from trio_crawl.cli.option_table import sections
from trio_crawl.cli.parser import build_parser
from trio_crawl.cli.units import DURATION_UNITS, SIZE_UNITS, parse_duration, parse_size

from cli_helpers import run_cli

URL = "http://127.0.0.1:9/"


def test_help_names_every_unit_the_parsers_accept() -> None:
    help_text = " ".join(run_cli("--help").stdout.split())  # argparse wraps lines
    for unit in DURATION_UNITS:
        if unit:
            assert parse_duration(f"2{unit}") > 0
    for unit in SIZE_UNITS:
        if unit:
            assert parse_size(f"2{unit}") > 0
    assert "durations ms, s, m, h, d (500ms, 90s, 2m, 1d;" in help_text
    assert "Sizes take K, M, G, T (10M, 1.5G;" in help_text


def test_lease_is_a_duration_like_every_other() -> None:
    help_text = run_cli("--help").stdout
    assert "--lease DURATION" in help_text and "SECONDS" not in help_text
    parser = build_parser()
    assert parser.parse_args([URL, "--lease", "2m"]).lease == 120.0
    assert parser.parse_args([URL, "--lease", "45"]).lease == 45.0  # a plain number still
    assert parser.parse_args([URL, "--lease", "1500ms"]).lease == 1.5


def _numeric_flags() -> list[tuple[str, str]]:
    """Every option taking a number, and a negative value for it."""
    suffix = {COUNT: "", NUMBER: "", SIZE: "K", DURATION: "s"}
    return [
        (flag.flags[0], f"-5{suffix[flag.parse]}")
        for _, flags in sections()
        for flag in flags
        if flag.parse in suffix
    ]


def test_every_numeric_option_takes_a_negative_value_to_its_own_check() -> None:
    flags = _numeric_flags()
    assert len(flags) >= 15, flags
    parser = build_parser()
    for flag, value in flags:
        parsed = parser.parse_args([flag, value, URL])
        dest = next(a.dest for a in parser._actions if flag in a.option_strings)
        assert getattr(parsed, dest) < 0, (flag, value)
        assert parsed.urls == [URL]
    assert parser.parse_args(["--timeout", "-.5", URL]).timeout == -0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--timeout", "-5s"], "--timeout must be > 0 (got -5.0)"),
        (["--max-bytes", "-1K"], "--max-bytes must be > 0 (got -1024)"),
        (["-w", "-3"], "--workers must be at least 1 (got -3)"),
        (["--max-depth", "-1"], "--max-depth must be >= 0 (got -1)"),
    ],
)
def test_a_negative_value_is_refused_by_its_option(args: list[str], message: str) -> None:
    result = run_cli(URL, *args, "-o", "-")
    assert result.returncode == 2
    assert one_error_line(result) == f"trio-crawl: error: {message}"
