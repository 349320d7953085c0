"""Numbers as people write them on a command line: sizes (``10M``,
``1.5G``), durations (``90s``, ``2m``, ``1h``) and counts (``1e3``).

Pure: text in, a number out, or ``ValueError`` with a one-line message that
quotes the text. The command line's option types are built on these
(``cli/options.py``); the library takes plain numbers.

Rules
-----
1. A number is what Python's ``float()`` reads (``3``, ``2.5``, ``1e3``,
   ``.5``), without ``nan`` or ``inf``, written before its unit with no
   space and no sign other than ``-`` (a negative value is returned, for
   the caller to refuse with its own message).
2. Sizes are bytes, with binary multiples as wget and curl use them:
   ``K`` = 1024, ``M`` = 1024², ``G`` = 1024³, ``T`` = 1024⁴; case-insensitive,
   optionally followed by ``B`` or ``iB`` (``10MB``, ``10MiB``); a plain
   number is bytes. The result is rounded to a whole byte.
3. Durations are seconds: ``ms``, ``s``, ``m`` (minutes), ``h``, ``d``;
   case-insensitive; a plain number is seconds.
4. Counts are whole numbers, written as integers or as a number whose value
   is whole (``1e3``, ``2.0``); ``1.5`` is refused.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: a crawl without a size to parse never needs it
    from fractions import Fraction

SIZE_UNITS: dict[str, int] = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
DURATION_UNITS: dict[str, float] = {
    "": 1.0,
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}

_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
_SIZE = re.compile(rf"({_NUMBER})([kmgt]?)(?:i?b)?", re.IGNORECASE)
_DURATION = re.compile(rf"({_NUMBER})(ms|s|m|h|d)?", re.IGNORECASE)
_PLAIN = re.compile(_NUMBER, re.IGNORECASE)


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise ValueError(f"number too large: {text!r}")
    return value


def _exact(text: str, whole: str) -> Fraction:
    """``text`` (a number, rule 1) exactly, so that ``8388608T`` is not
    rounded through a float; refused when a float would overflow."""
    from fractions import Fraction  # ~2-5 ms to import, for sizes and counts like 1e3

    if abs(float(text)) >= 2.0**63:
        raise ValueError(f"{whole} too large: {text!r}")
    return Fraction(text)


def parse_number(text: str) -> float:
    """A plain number (rule 1): ``2``, ``0.5``, ``1e3``."""
    if not _PLAIN.fullmatch(text.strip()):
        raise ValueError(f"not a number: {text!r}")
    return _number(text.strip())


def parse_size(text: str) -> int:
    """Bytes from ``512``, ``10K``, ``10M``, ``1.5G``, ``2GiB``, ``1e6`` (rule 2)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a size: {text!r} (a number of bytes, or with K, M, G or T)")
    value = _exact(match[1], "size") * SIZE_UNITS[match[2].lower()]
    if abs(value) >= 2**63:
        raise ValueError(f"size too large: {text!r}")
    return round(value)


def parse_duration(text: str) -> float:
    """Seconds from ``30``, ``1.5``, ``90s``, ``2m``, ``1h``, ``500ms``, ``1e3`` (rule 3)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (seconds, or a number with ms, s, m, h or d)")
    value = _number(match[1]) * DURATION_UNITS[(match[2] or "").lower()]
    if not math.isfinite(value):  # pragma: no cover - 1e308d
        raise ValueError(f"duration too long: {text!r}")
    return value


def parse_count(text: str) -> int:
    """A whole number from ``16``, ``1e3``, ``2.0`` (rule 4)."""
    stripped = text.strip()
    if re.fullmatch(r"-?\d+", stripped):
        return int(stripped)
    if not _PLAIN.fullmatch(stripped):
        raise ValueError(f"not a whole number: {text!r}")
    value = _exact(stripped, "number")
    if value.denominator != 1:
        raise ValueError(f"not a whole number: {text!r}")
    return int(value)
