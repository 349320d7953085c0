"""The crawl's argument parser, built from the option table
(``cli/option_table.py``): the groups ``--help`` shows, every default said
in its help, sizes and durations with units."""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..core.config import option_default
from .common import UsageParser
from .option_kinds import LIBRARY, Flag
from .option_table import sections
from .units import DURATION_UNITS, SIZE_UNITS

__all__ = ["USAGE", "build_parser"]

#: The usage line: the crawl, and the two other commands.
USAGE = """%(prog)s [options] URL [URL ...]
       %(prog)s [options] --seeds FILE | --state FILE
       %(prog)s demo [options]
       %(prog)s report FILE [-o report.html]"""


def _add(container: argparse._ActionsContainer, flag: Flag) -> None:
    """Add ``flag``; its default, unless it says one: the library's for the
    option it sets, else argparse's own (an empty list for a repeatable one)."""
    keywords: dict[str, Any] = {"help": flag.help}
    if flag.default is not LIBRARY:
        keywords["default"] = flag.default
    elif flag.action == "append":
        keywords["default"] = []
    elif flag.sets is not None:
        keywords["default"] = option_default(flag.sets)
    if flag.parse is not None:
        keywords["type"] = flag.parse
    for name in ("metavar", "action", "choices", "nargs"):
        value = getattr(flag, name)
        if value is not None:
            keywords[name] = value
    container.add_argument(*flag.flags, **keywords)


def units_note() -> str:
    """The units the values take, read off ``cli/units.py``'s tables, so
    that ``--help`` says exactly what is accepted."""
    sizes = ", ".join(unit.upper() for unit in SIZE_UNITS if unit)
    durations = ", ".join(unit for unit in DURATION_UNITS if unit)
    return (
        f"Sizes take {sizes} (10M, 1.5G; 1024-based); durations {durations} "
        "(500ms, 90s, 2m, 1d; a plain number is seconds); counts 1e3."
    )


def build_parser(
    prog: str = "trio-crawl", *, with_urls: bool = True, default_output: str | None = None
) -> argparse.ArgumentParser:
    """The crawl's options, in the groups ``--help`` shows
    (docs/manual/command-line.md). Every default is said in its help; sizes
    and durations take units."""
    p = UsageParser(
        prog=prog,
        usage=USAGE if with_urls else "%(prog)s [options]",
        description="Crawl web sites and write one JSON line per URL tried. " + units_note(),
        epilog="Run `trio-crawl demo` to crawl a built-in local site, and "
        "`trio-crawl report FILE -o report.html` for an HTML report on a crawl.",
    )
    if with_urls:
        p.add_argument(
            "urls", nargs="*", metavar="URL", help="start URL(s); scope is their host:port"
        )
    for title, flags in sections(default_output=default_output, with_urls=with_urls):
        container: argparse._ActionsContainer = p if title is None else p.add_argument_group(title)
        for flag in flags:
            _add(container, flag)
    p.add_argument("--version", action="version", version=f"trio-crawl {__version__}")
    return p
