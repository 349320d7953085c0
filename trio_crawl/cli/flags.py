"""The library's arguments as the command line spells them.

Library errors (``ConfigError``) name library arguments (``workers=``,
``page_requisites=True``, ``state=``) and list them in ``arguments``; the
command line says the same sentence with its flags (``--workers``,
``--page-requisites``, ``--state``), from this one mapping, so every check
is written once, in the library.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError

#: Arguments whose flag is not ``--`` plus the name with dashes (None: no flag).
_SPELLED_OTHERWISE: dict[str, str | None] = {
    "backend": "--fetcher",
    "headers": "--header",
    "auth": "--user and --password",
    "allow_domains": "--allow-domain",
    "html_only": None,  # --all-bodies says the opposite
    "connect_timeout": None,
    "thread_parse_bytes": None,
    "start_urls": None,
}
#: Arguments that are not ``name=`` (the Redis frontier is named by a function).
_OTHER_ARGUMENTS = {"open_redis_frontier()": "--redis", "frontier=redis_frontier()": "--redis"}


def flag_for(argument: str) -> str | None:
    """``--max-depth`` for ``max_depth=``, ``--page-requisites`` for
    ``page_requisites=True``; None for an argument without a flag."""
    if argument in _OTHER_ARGUMENTS:
        return _OTHER_ARGUMENTS[argument]
    name, equals, value = argument.partition("=")
    if not equals or not name.isidentifier() or value not in ("", "True"):
        return None
    if name in _SPELLED_OTHERWISE:
        return _SPELLED_OTHERWISE[name]
    return "--" + name.replace("_", "-")


def in_flags(error: ConfigError, overrides: Mapping[str, str] | None = None) -> str:
    """``error``'s message with flags for the library's arguments
    (``overrides`` first: the flag this command line actually used)."""
    extra = overrides or {}
    return error.worded(lambda argument: extra.get(argument) or flag_for(argument))
