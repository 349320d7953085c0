"""The library's arguments as the command line spells them.

Library errors (``ConfigError``) name library arguments (``workers=``,
``page_requisites=True``, ``state=``) and list them in ``arguments``; the
command line says the same sentence with its flags (``--workers``,
``--page-requisites``, ``--state``), read off the option table
(``cli/option_table.py``), so every check is written once, in the library.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..core.config import CrawlOptions
from ..errors import ConfigError
from .option_table import library_flags

#: Arguments the table cannot spell: one set by two flags, and those that
#: are not ``name=`` (the Redis frontier is opened by a function).
_SPELLED_OTHERWISE: dict[str, str | None] = {
    "auth": "--user and --password",
    "start_urls": None,
    "open_redis_frontier()": "--redis",
    "frontier=redis_frontier()": "--redis",
}


@functools.cache
def _flags() -> dict[str, str | None]:
    """Each library option's flag; None for an option the command line lacks
    (``connect_timeout``; ``html_only``, which ``--all-bodies`` says the
    opposite of)."""
    spelled: dict[str, str | None] = dict.fromkeys(CrawlOptions.__optional_keys__)
    spelled.update({flag.sets: flag.long_flag for flag in library_flags() if flag.sets})
    spelled.update(_SPELLED_OTHERWISE)
    return spelled


def flag_for(argument: str) -> str | None:
    """``--max-depth`` for ``max_depth=``, ``--page-requisites`` for
    ``page_requisites=True``; None for an argument without a flag."""
    if argument in _SPELLED_OTHERWISE:
        return _SPELLED_OTHERWISE[argument]
    name, equals, value = argument.partition("=")
    if not equals or not name.isidentifier() or value not in ("", "True"):
        return None
    if name in _flags():
        return _flags()[name]
    return "--" + name.replace("_", "-")


def in_flags(error: ConfigError, overrides: Mapping[str, str] | None = None) -> str:
    """``error``'s message with flags for the library's arguments
    (``overrides`` first: the flag this command line actually used)."""
    extra = overrides or {}
    return error.worded(lambda argument: extra.get(argument) or flag_for(argument))
