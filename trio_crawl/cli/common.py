"""What every part of the command line shares: exit codes, the usage error,
and the one-line messages on stderr (``trio-crawl: error: ...``), with any
credentials in them masked.

Exit codes (the table in docs/manual/command-line.md):

====  ==================================================================
0     the crawl completed, even if some pages failed
1     a handler raised under ``--fail-fast`` (``handler error at URL: ...``)
2     bad arguments or input, found before anything is written or fetched
3     an output could not be written (disk full, I/O error): the crawl
      stopped; what was written is complete lines
4     no start URL could be connected to (wget exits 4 for this too)
70    an internal error: a bug (``--debug`` shows the traceback)
75    the ``--state`` file is in use by another crawl (try again later), or
      a ``--redis`` crawl cannot go on (Redis lost, refused, or the crawl
      gone; a ``--processes`` worker killed by a signal)
130   stopped by SIGINT (143: SIGTERM); the output holds complete lines
====  ==================================================================
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ..core.url import mask_credentials

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK = 0


EXIT_HANDLER = 1


EXIT_USAGE = 2


EXIT_OUTPUT = 3


EXIT_UNREACHABLE = 4


EXIT_SOFTWARE = 70


EXIT_STATE_BUSY = 75
#: Redis went away mid-crawl (EX_TEMPFAIL, like a busy state file): the same
#: command resumes it.
EXIT_REDIS_LOST = 75


SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit 2."""


class UsageParser(argparse.ArgumentParser):
    """An argument parser whose errors are ``UsageError`` (one line, exit 2),
    not argparse's usage dump and exit.

    A word that starts with ``-`` and a digit (``-5s``, ``-1K``, ``-.5``) is
    a value, never an option: argparse alone takes only ``-5`` and ``-1.5``
    for numbers, so ``--timeout -5s`` said "expected one argument" instead
    of the option's own check ("--timeout must be > 0"). No option of ours
    is spelled like a number, which is what argparse's rule guards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # argparse's own rule, widened to numbers with units (sizes, durations);
        # every argparse since 3.2 reads this attribute, on the parser alone.
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def fail(message: str, code: int) -> int:
    """Say ``trio-crawl: error: MESSAGE`` on stderr; return ``code``."""
    say(f"error: {message}")
    return code


def say(message: str) -> None:
    """``trio-crawl: MESSAGE`` on stderr (``tell``): errors, warnings, news."""
    tell(f"trio-crawl: {message}")


# -- the one writer ----------------------------------------------------------
# Every line the command line writes to a terminal stream goes through the
# functions below (tests/test_cli_output.py fails on a cli/ module that writes
# any other way). Each writes a whole text at once and flushes: the workers of
# ``--processes`` share stderr, and ``print()`` writes the newline apart, so
# their lines would interleave. Credentials are masked in every line.


def tell(text: str) -> None:
    """``text`` and a newline on stderr, credentials masked, in one write."""
    sys.stderr.write(f"{mask_credentials(text)}\n")
    sys.stderr.flush()


def answer(text: str) -> None:
    """``text`` and a newline on stdout: what the command was asked for
    (``--status``), not news about it. Credentials masked, one write."""
    sys.stdout.write(f"{mask_credentials(text)}\n")
    sys.stdout.flush()


def answer_bytes(data: bytes) -> None:
    """``data`` as it is on stdout (a file written to ``-o -``)."""
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def stderr_console(stream: TextIO | None = None, **options: Any) -> Console:
    """A rich console on stderr (or ``stream``): for the live progress display
    and the summary table, which rich lays out for the terminal's width."""
    from rich.console import Console  # not for every command: rich takes a while to import

    return Console(file=sys.stderr if stream is None else stream, **options)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` agreeing in number: "1 URL", "2 URLs", "1,000 URLs"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
