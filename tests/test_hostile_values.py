"""Every option, given a hostile value, gets a clear answer (issue #36 item 2).

Generated from the option table (``cli/option_table.py``), so a new option is
tried the day it is added: each flag that takes a value is given values a
user might type by mistake or on purpose (empty, negative, astronomically
large, a directory, a special file, a very long word...). Whatever the value,
the command ends with a documented exit code and at most one error line,
never an internal error (exit 70) or a traceback. The crawl's only start URL
refuses connections (port 1 on 127.0.0.1), so nothing is fetched anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trio_crawl.cli import handlers
from trio_crawl.cli.main import run_cli
from trio_crawl.cli.option_kinds import Flag
from trio_crawl.cli.option_table import sections

#: Values a user might give any option by mistake.
HOSTILE = ["", "-1", "1e400", "/", "/proc/version", "x" * 3000, "::"]

#: Exit codes the command line documents (docs/manual/command-line.md).
DOCUMENTED = {0, 1, 2, 3, 4, 75}

#: Options that start something else than a crawl of the start URL: tried
#: below all the same, except these, which would wait for a server or spawn
#: workers (their values are checked by their own tests).
NOT_HERE = {"--processes"}


def _takes_a_value(flag: Flag) -> bool:
    return flag.action in (None, "append") or flag.nargs == "?"


FLAGS = [
    flag.long_flag
    for _, flags in sections()
    for flag in flags
    if _takes_a_value(flag) and flag.long_flag not in NOT_HERE
]


def test_the_table_gives_options_to_try() -> None:
    assert len(FLAGS) > 40 and "--max-depth" in FLAGS and "--allow-domain" in FLAGS


@pytest.mark.parametrize("option", FLAGS)
def test_a_hostile_value_is_a_clear_answer(
    option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # files an option may create stay here
    # --handler modules imported here must not count for later tests in this
    # process (the entry's fast exit waits for none it finds listed).
    monkeypatch.setattr(handlers, "LOADED_HANDLERS", [])
    monkeypatch.delenv("TRIO_CRAWL_REDIS_PASSWORD", raising=False)
    for value in HOSTILE:
        argv = ["http://127.0.0.1:1/", "-q", "-o", os.devnull, "--timeout", "2s", option, value]
        if option == "--output":
            argv = ["http://127.0.0.1:1/", "-q", "--timeout", "2s", option, value]
        try:
            code = run_cli(argv)
        except SystemExit as exc:  # argparse's own exit for a usage error
            code = exc.code if isinstance(exc.code, int) else 2
        _out, err = capfd.readouterr()
        said = f"{option} {value[:40]!r}: exit {code}, stderr {err[-500:]!r}"
        assert code in DOCUMENTED, said
        assert "internal error" not in err and "Traceback" not in err, said
        errors = [line for line in err.splitlines() if line.startswith("trio-crawl: error:")]
        assert len(errors) <= 1, said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--allow-domain", "http://example.org/x"],
            "--allow-domain takes host names like example.com, got 'http://example.org/x'",
        ),
        (["--allow-domain", ""], "--allow-domain takes host names like example.com, got ''"),
        (
            ["--allow-domain", "127.0.0.1:8500"],
            "--allow-domain takes host names like example.com, got '127.0.0.1:8500'",
        ),
        (["--cookies", "binary.txt"], "--cookies binary.txt: not a Netscape cookie file"),
        (
            ["--handler", "raises_on_import:f", "--items", os.devnull],
            "--handler raises_on_import:f: importing 'raises_on_import' raised "
            "ZeroDivisionError: division by zero",
        ),
        (["-o", "/proc/version"], "cannot write output file '/proc/version': Invalid argument"),
        (["--user-agent", "/1.0"], "--user-agent must begin with a product name"),
    ],
)
def test_the_new_users_mistakes_are_one_line_and_exit_2(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The mistakes a new user made, each once reported as an internal error
    (exit 70, "a bug; please report it")."""
    if not Path("/proc/version").exists() and "/proc/version" in args:
        pytest.skip("no /proc/version here")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(handlers, "LOADED_HANDLERS", [])
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\xff\xfe cookie?")
    (tmp_path / "raises_on_import.py").write_text("x = 1 / 0\n")
    argv = ["http://127.0.0.1:1/", "-q", *(["-o", os.devnull] if "-o" not in args else []), *args]
    code = run_cli(argv)
    _out, err = capfd.readouterr()
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("trio-crawl: error: "), err
    assert message in err, err
