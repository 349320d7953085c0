"""``outputs.record_line``: a record's JSON line is exactly the generic encoder's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.core.models import CrawlRecord, DepthUpdate, ErrorInfo
from trio_crawl.outputs.record_line import record_line


def generic(record: CrawlRecord | DepthUpdate) -> str:
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))


# Any text: quotes, backslashes, control characters, non-ASCII, lone surrogates.
text = st.text(st.characters(codec=None), max_size=30)
maybe_text = st.none() | text
numbers = st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True)
scalars = st.none() | st.booleans() | numbers | text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
errors = st.none() | st.builds(ErrorInfo, text, text, maybe_text)
#: Extra keys: new names, and the names of fields (which ``to_json`` replaces).
extra_keys = text | st.sampled_from(["url", "status", "protocol", "t", "refetched", "error"])

records = st.builds(
    CrawlRecord,
    url=text,
    status=st.none() | st.integers(0, 999) | st.booleans(),
    depth=st.integers(0, 10**6) | numbers,
    error=errors,
    redirect=maybe_text,
    referrer=maybe_text,
    content_type=maybe_text,
    elapsed_ms=st.none() | numbers,
    links=st.integers(0, 10**9),
    attempts=st.integers(1, 10),
    t=st.none() | numbers,
    size=st.none() | st.integers(0, 2**40),
    extra=st.dictionaries(extra_keys, values, max_size=3),
    protocol=maybe_text,
)
updates = st.builds(
    DepthUpdate,
    url=text,
    depth=st.integers(0, 10**6),
    referrer=maybe_text,
    previous_depth=st.integers(0, 10**6),
    t=st.none() | numbers,
)


@given(records | updates)
def test_a_line_is_the_generic_encoders(record: CrawlRecord | DepthUpdate) -> None:
    assert record_line(record) == generic(record)


def test_a_usual_record() -> None:
    record = CrawlRecord(
        url='http://h/é"q',
        status=200,
        depth=2,
        referrer="http://h/",
        content_type="text/html",
        elapsed_ms=1.25,
        links=30,
        t=0.5,
        size=1000,
        extra={"refetched": True},
        protocol="HTTP/1.1",
    )
    line = record_line(record)
    assert line == generic(record)
    assert json.loads(line)["url"] == 'http://h/é"q'
    assert line.endswith(',"protocol":"HTTP/1.1","refetched":true}')


@pytest.mark.parametrize(
    "extra",
    [{1: "x"}, {None: 1}, {"status": 404}, {"x": float("nan")}],
)
def test_odd_extras_take_the_generic_path(extra: dict[Any, Any]) -> None:
    record = CrawlRecord(url="http://h/", status=200, depth=0, extra=extra)
    assert record_line(record) == generic(record)


def test_an_unencodable_extra_raises_as_before() -> None:
    record = CrawlRecord(url="http://h/", status=200, depth=0, extra={"x": object()})
    with pytest.raises(TypeError):
        generic(record)
    with pytest.raises(TypeError):
        record_line(record)
