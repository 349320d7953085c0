"""The vocabulary of the option table (``cli/option_table.py``): a
``Flag`` (one option: its spelling, its help, the library option it sets)
and the value types and actions its options parse with."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .units import parse_count, parse_duration, parse_number, parse_size

T = TypeVar("T")

__all__ = [
    "COUNT",
    "DURATION",
    "LIBRARY",
    "NUMBER",
    "SIZE",
    "Flag",
    "RecrawlOption",
    "RenderOption",
]


def _unit_type(parse: Callable[[str], T], name: str) -> Callable[[str], T]:
    """An argparse type from a ``core.units`` parser: its one-line
    ``ValueError`` message becomes argparse's (``argument --timeout: ...``)."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


#: Option types: counts (``16``, ``1e3``), plain numbers, sizes (``10M``,
#: ``1.5G``) and durations (``90s``, ``2m``); see ``cli/units.py``.
COUNT = _unit_type(parse_count, "count")
NUMBER = _unit_type(parse_number, "number")
SIZE = _unit_type(parse_size, "size")
DURATION = _unit_type(parse_duration, "duration")


class RenderOption(argparse.Action):
    """``--render`` (True) or ``--render auto``. argparse gives an optional
    value the next word whatever it is, so a start URL right after
    ``--render`` is handed back to the start URLs (``render_urls``; the
    name is historical: ``--recrawl`` hands one back there too)."""

    #: The one word the option takes.
    word = "auto"

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if values == self.word:
            setattr(namespace, self.dest, self.word)
            return
        setattr(namespace, self.dest, True)
        if isinstance(values, str):
            namespace.render_urls = [*getattr(namespace, "render_urls", []), values]


class RecrawlOption(RenderOption):
    """``--recrawl`` (True) or ``--recrawl due``; a URL after it is a start URL."""

    word = "due"


class _Library:
    """The default of a ``Flag``: the library's default for the option it sets."""

    def __repr__(self) -> str:
        return "LIBRARY"


LIBRARY: Any = _Library()


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line option. ``sets`` names the library option it gives
    (a ``CrawlOptions`` key), None for one of the command line's own
    (``--output``); ``by_hand`` when its value reaches the config through
    code of its own (``--header`` is parsed, ``-w`` clamped) rather than as
    it was parsed. ``parse`` is ``add_argument``'s ``type``; the other
    fields are its own."""

    flags: tuple[str, ...]
    help: str
    sets: str | None = None
    by_hand: bool = False
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None
    action: str | type[argparse.Action] | None = None
    default: Any = LIBRARY
    choices: Sequence[str] | None = None
    nargs: str | None = None

    @property
    def dest(self) -> str:
        """The attribute argparse stores it in (from its first long flag)."""
        long = next((f for f in self.flags if f.startswith("--")), self.flags[0])
        return long.lstrip("-").replace("-", "_")

    @property
    def long_flag(self) -> str:
        return next((f for f in self.flags if f.startswith("--")), self.flags[0])
