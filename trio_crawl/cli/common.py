"""What every part of the command line shares: exit codes, the usage error,
and the one-line messages on stderr (``trio-crawl: error: ...``), with any
credentials in them masked.

Exit codes (the README's table):

====  ==================================================================
0     the crawl completed, even if some pages failed
1     a handler raised under ``--fail-fast`` (``handler error at URL: ...``)
2     bad arguments or input, found before anything is written or fetched
3     an output could not be written (disk full, I/O error): the crawl
      stopped; what was written is complete lines
4     no start URL could be connected to (wget exits 4 for this too)
70    an internal error: a bug (``--debug`` shows the traceback)
75    the ``--state`` file is in use by another crawl (try again later), or
      a ``--redis`` crawl cannot go on (Redis lost, refused, or the crawl gone)
130   stopped by SIGINT (143: SIGTERM); the output holds complete lines
====  ==================================================================
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import NoReturn

from ..core.url import mask_credentials

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
    not argparse's usage dump and exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def fail(message: str, code: int) -> int:
    """Say ``trio-crawl: error: MESSAGE`` on stderr; return ``code``."""
    say(f"error: {message}")
    return code


def say(message: str) -> None:
    """``trio-crawl: MESSAGE`` on stderr, credentials masked, in one write:
    the workers of ``--processes`` share stderr, and ``print()`` writes the
    newline apart, so their lines would interleave."""
    sys.stderr.write(f"trio-crawl: {mask_credentials(message)}\n")
    sys.stderr.flush()
