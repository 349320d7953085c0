"""Every error trio-crawl raises on purpose, in one tree.

``except trio_crawl.CrawlError`` catches them all; anything else out of a
crawl is a bug (ours, or a handler's). The tree::

    CrawlError
     ├── ConfigError (also ValueError)   a setting that cannot work; one line
     ├── FetchError                      one URL gave no usable answer (kind,
     │                                   message): the site's fault, it
     │                                   becomes a record, never ends a crawl
     ├── OutputError                     a file the crawl writes cannot be
     │    │                              written (disk full, no permission,
     │    │                              another crawl holds it): ``path``
     │    └── StateWriteError            the ``--state`` SQLite file cannot
     │                                   be written (sqlite3's "database or
     │                                   disk is full", "disk I/O error")
     ├── StateUsageError                 the state file belongs to another
     │    │                              crawl, or cannot be read as one
     │    └── StateLockedError           another crawl is using the file
     ├── StateInUseError                 the same, from the storage layer
     ├── SitemapError (also ValueError)  a sitemap that cannot be read (the
     │                                   crawl notes it and goes on)
     ├── ReportInputError                ``trio-crawl report`` cannot read
     │                                   its input
     └── RedisFrontierError              a ``--redis`` crawl cannot go on
          ├── RedisUnavailable           Redis cannot be reached or used at
          │                              the start: nothing was crawled
          ├── RedisLost                  Redis went away mid-crawl (``remedy``
          │    │                         says what to do: run it again)
          │    ├── RedisRefused          an error reply (OOM, read-only...)
          │    └── CrawlGone             the crawl's keys are gone: no resume
          └── CrawlMismatch              the crawl id names other settings

Foreign errors are translated where they arise, once, with the original as
``__cause__``: libcurl's and httpx's in ``fetch/errors.py`` (to
``FetchError``), sqlite3's in ``frontiers/sqlite/connection.py`` (to
``StateWriteError``), OS errors of outputs in ``outputs/`` (to
``OutputError``), and coredis's in four places of ``frontiers/redis/``, each
for one kind of use:

* ``calls.py``: every call of a running crawl (``Calls``: an error reply is
  ``RedisRefused``, a lost connection ``RedisLost``);
* ``client.py``: connecting (``open_client``: ``RedisUnavailable``; its
  ``eviction_policy`` reads an error reply to ``INFO`` as "unknown");
* ``liveness.py``: the wake-up listener's blocking ``XREAD`` (through
  ``Calls.refused`` and ``Calls.lost_error``);
* ``admin.py``: ``--status``, ``--delete-crawl`` and the consistency check,
  which need no worker (``RedisRefused``, ``RedisLost``).

The command line maps this tree to exit codes and one-line messages (the exit
codes of docs/manual/command-line.md); every ``str()`` here is such a line.

This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "ConfigError",
    "CrawlError",
    "CrawlGone",
    "CrawlMismatch",
    "FetchError",
    "OutputError",
    "RedisFrontierError",
    "RedisLost",
    "RedisRefused",
    "RedisUnavailable",
    "ReportInputError",
    "SitemapError",
    "StateInUseError",
    "StateLockedError",
    "StateUsageError",
    "StateWriteError",
]


class CrawlError(Exception):
    """The root of every error trio-crawl raises on purpose."""


class ConfigError(CrawlError, ValueError):
    """A bad setting; the message is one line meant for the user.

    The message names library arguments as a caller writes them
    (``workers=``, ``page_requisites=True``); ``arguments`` lists those it
    names, so a front end can say its own spelling instead (the command line
    says ``--workers``: ``worded``)."""

    def __init__(self, message: str, *arguments: str) -> None:
        super().__init__(message)
        self.arguments = arguments

    def worded(self, spelling: Callable[[str], str | None]) -> str:
        """The message with each argument it names as ``spelling`` says
        (None: keep the library's)."""
        text = str(self)
        for argument in self.arguments:
            other = spelling(argument)
            if other is not None:
                text = text.replace(argument, other)
        return text


class FetchError(CrawlError):
    """A fetch that produced no usable response; ``kind`` is one of ERROR_KINDS.

    This is the site's (or the network's) fault, never ours: the engine turns it
    into a record (or a retry), it never ends the crawl.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class OutputError(CrawlError):
    """An output that cannot be written; ``str()`` is one line for the user:
    ``cannot write to PATH: REASON``."""

    def __init__(self, path: str, error: OSError | str) -> None:
        reason = error if isinstance(error, str) else (error.strerror or str(error))
        super().__init__(f"cannot write to {path}: {reason}")
        self.path = path
        self.reason = reason
        self.errno = None if isinstance(error, str) else error.errno


class StateWriteError(OutputError):
    """The state file (SQLite) cannot be written: the disk is full, or fails."""


class StateUsageError(CrawlError):
    """A one-line message for the user (exit 2)."""


class StateLockedError(StateUsageError):
    """The state file is in use by another crawl (its lock is held): a one-line
    message naming the file and, when known, the other crawl's pid."""


class StateInUseError(CrawlError):
    """The state file is open for crawling by another ``CrawlState`` (in another
    process, or this one). The message is one line; ``pid`` is the holder's, when
    it could be read."""

    def __init__(self, path: object, pid: int | None) -> None:
        holder = "" if pid is None else f" (pid {pid})"
        super().__init__(
            f"{path} is in use by another trio-crawl{holder}; wait for it to end,"
            " or use another --state file"
        )
        self.path = path
        self.pid = pid


class SitemapError(CrawlError, ValueError):
    """A sitemap that cannot be used (too big, not XML, not a sitemap)."""


class ReportInputError(CrawlError):
    """``trio-crawl report`` cannot read its input; the message is one line."""


class RedisFrontierError(CrawlError):
    """A Redis crawl problem, with a one-line message for the user."""


class RedisUnavailable(RedisFrontierError):
    """Redis cannot be reached (or used) at the start: nothing was crawled."""


class RedisLost(RedisFrontierError):
    """Redis went away (or refused a call) mid-crawl: this worker stops.
    ``remedy`` says what to do; for this class, re-running resumes."""

    remedy = (
        "Run the same command again to resume once Redis is back with the crawl "
        "(--status shows it); if Redis restarted without its data, a rerun starts "
        "the crawl anew and fetches every page again"
    )


class RedisRefused(RedisLost):
    """Redis answered a call with an error (out of memory, read-only replica...)."""


class CrawlGone(RedisLost):
    """The crawl's keys are gone from Redis (deleted, FLUSHALL, evicted):
    what it knew is lost, and taking an empty crawl for a finished one
    would end every worker with the site half crawled."""

    remedy = "It cannot be resumed: start it again (with its URLs) to crawl anew"


class CrawlMismatch(RedisFrontierError):
    """The crawl id names a crawl with other settings."""
