"""Sizes, durations and counts as the command line takes them (issue #25, item 5):
``cli/units.py`` on its own, examples and hypothesis properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from trio_crawl.cli.units import (
    DURATION_UNITS,
    SIZE_UNITS,
    parse_count,
    parse_duration,
    parse_number,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512", 512),
        ("10K", 10 * 1024),
        ("10k", 10 * 1024),
        ("10M", 10 * 1024**2),
        ("10MB", 10 * 1024**2),
        ("10MiB", 10 * 1024**2),
        ("1.5G", 1536 * 1024**2),
        ("1T", 1024**4),
        ("1e3", 1000),
        ("2.5e1K", 25 * 1024),
        (" 7 ", 7),
    ],
)
def test_sizes(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("30", 30.0),
        ("1.5", 1.5),
        ("90s", 90.0),
        ("2m", 120.0),
        ("1.5h", 5400.0),
        ("1d", 86400.0),
        ("500ms", 0.5),
        ("1e3", 1000.0),
        ("2M", 120.0),
    ],
)
def test_durations(text: str, value: float) -> None:
    assert parse_duration(text) == pytest.approx(value)


@pytest.mark.parametrize(("text", "value"), [("16", 16), ("1e3", 1000), ("2.0", 2), ("-1", -1)])
def test_counts(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_size, "10X", "not a size: '10X'"),
        (parse_size, "M", "not a size: 'M'"),
        (parse_size, "nan", "not a size: 'nan'"),
        (parse_size, "1e400", "size too large: '1e400'"),
        (parse_duration, "2 minutes", "not a duration: '2 minutes'"),
        (parse_duration, "1e400", "number too large: '1e400'"),
        (parse_count, "1e30", "number too large: '1e30'"),
        (parse_duration, "inf", "not a duration: 'inf'"),
        (parse_duration, "", "not a duration: ''"),
        (parse_count, "1.5", "not a whole number: '1.5'"),
        (parse_count, "lots", "not a whole number: 'lots'"),
        (parse_number, "1,5", "not a number: '1,5'"),
    ],
)
def test_refused(parse: object, text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        parse(text)  # type: ignore[operator]


finite = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@given(st.integers(min_value=0, max_value=2**62), st.sampled_from(sorted(SIZE_UNITS)))
def test_a_whole_size_with_any_unit_multiplies(n: int, unit: str) -> None:
    assume(n * SIZE_UNITS[unit] < 2**62)
    for spelling in (
        unit,
        unit.upper(),
        unit + "B" if unit else unit,
        unit + "iB" if unit else "",
    ):
        assert parse_size(f"{n}{spelling}") == n * SIZE_UNITS[unit]


@given(finite, st.sampled_from(sorted(DURATION_UNITS)))
def test_a_duration_is_its_number_times_its_unit(x: float, unit: str) -> None:
    assert math.isclose(parse_duration(f"{x!r}{unit}"), x * DURATION_UNITS[unit], rel_tol=1e-12)


@given(finite)
def test_a_plain_number_reads_as_float_does(x: float) -> None:
    assert parse_number(repr(x)) == x
    assert parse_duration(repr(x)) == x
    assert parse_size(repr(x)) == round(x)


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_a_count_reads_integers_and_their_float_spelling(n: int) -> None:
    assert parse_count(str(n)) == n
    if abs(n) < 2**53:
        assert parse_count(f"{float(n)!r}") == n


@given(st.text(max_size=12))
def test_no_text_raises_anything_but_value_error(text: str) -> None:
    for parse in (parse_size, parse_duration, parse_count, parse_number):
        try:
            value = parse(text)
        except ValueError:
            continue
        assert math.isfinite(value)
