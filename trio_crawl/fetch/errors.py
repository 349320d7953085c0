"""The one path a foreign failure takes to become a ``FetchError``.

Every fetcher runs its whole exchange inside ``translated_errors``, with its
own classifier (``error_kind(exc) -> kind | None``) that knows its library's
exceptions and nothing else. This module decides the rest, the same way for
every fetcher:

1. A ``FetchError`` raised inside (our own decision: ``too_large``, a refused
   request header) passes through untouched.
2. ``trio.TooSlowError`` (the total deadline, ``trio.fail_after``) is
   ``timeout``, whatever the fetcher: this is the only place that knows it.
3. Anything the classifier knows becomes ``FetchError(kind, "Type: detail")``
   with the original as ``__cause__`` (a ``ReportedError``, a library's
   error code wrapped by its fetcher, keeps its own message as it is).
4. Anything it does not know (``None``) is a bug in the fetcher and passes
   through unchanged: it ends the crawl loudly rather than hide as a record.

Pure apart from naming ``trio.TooSlowError``: no HTTP client here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import trio

from ..errors import FetchError

__all__ = ["ErrorKind", "ReportedError", "to_fetch_error", "translated_errors"]

#: A fetcher's classifier: the ``FetchError`` kind of a failure of its
#: library, or ``None`` when the exception is not one (a bug).
ErrorKind = Callable[[BaseException], str | None]


class ReportedError(Exception):
    """A failure a library reports as a code and a message rather than an
    exception of its own (libcurl): the fetcher raises it inside
    ``translated_errors`` like any other, and its message is the record's."""


def to_fetch_error(exc: BaseException, error_kind: ErrorKind, total: float) -> FetchError | None:
    """The ``FetchError`` for ``exc`` (rules 2 and 3), or ``None`` for a bug."""
    if isinstance(exc, trio.TooSlowError):
        return FetchError("timeout", f"no complete answer within the {total:g} s total deadline")
    kind = error_kind(exc)
    if kind is None:
        return None
    if isinstance(exc, ReportedError):
        return FetchError(kind, str(exc))
    return FetchError(kind, f"{type(exc).__name__}: {_detail(exc)}")


def _detail(exc: BaseException) -> str:
    """``exc``'s message or, when it has none (httpx's connect errors often
    have none), the first one along its causes, with that cause's type."""
    if str(exc):
        return str(exc)
    seen = {id(exc)}
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        if str(cause):
            return f"{type(cause).__name__}: {cause}"
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return "(no message)"


@contextlib.contextmanager
def translated_errors(error_kind: ErrorKind, total: float) -> Iterator[None]:
    """Re-raise the failures ``error_kind`` classifies as ``FetchError``
    (original as ``__cause__``); let anything else through unchanged.

    ``total`` is the fetcher's total deadline in seconds, for the message of
    a ``trio.TooSlowError``.
    """
    try:
        yield
    except FetchError:
        raise
    except Exception as exc:
        error = to_fetch_error(exc, error_kind, total)
        if error is None:
            raise
        raise error from exc
