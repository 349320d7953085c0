"""recrawl/visit.py: the validators a recrawl sends, and the change kinds."""

from __future__ import annotations

from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.core.digest import sha1_digest
from trio_crawl.recrawl.visit import (
    CHANGE_KINDS,
    Visit,
    after_not_modified,
    capture_time,
    classify,
    conditional_headers,
    http_date,
    validators,
)

NOW = 1_800_000_000.0
PAST = formatdate(NOW - 86_400, usegmt=True)
FUTURE = formatdate(NOW + 86_400, usegmt=True)


def page(**kw: object) -> Visit:
    base: dict[str, object] = dict(
        url="http://a/", status=200, digest="sha1:X", size=10, links=(), fetched_at=NOW
    )
    base.update(kw)
    return Visit(**base)  # type: ignore[arg-type]


def test_weak_etag_is_sent_back_as_it_came() -> None:
    assert conditional_headers(page(etag='W/"v1"')) == {"If-None-Match": 'W/"v1"'}


def test_both_validators_are_sent() -> None:
    headers = conditional_headers(page(etag='"a"', last_modified=PAST))
    assert headers == {"If-None-Match": '"a"', "If-Modified-Since": PAST}


def test_a_last_modified_in_the_future_is_not_sent() -> None:
    assert conditional_headers(page(last_modified=FUTURE)) == {}
    assert conditional_headers(page(etag='"e"', last_modified=FUTURE)) == {"If-None-Match": '"e"'}


def test_nothing_is_invented() -> None:
    assert conditional_headers(page()) == {}
    assert conditional_headers(None) == {}
    assert conditional_headers(page(last_modified="not a date")) == {}


def test_no_revalidation_without_kept_links_or_for_a_non_page() -> None:
    assert conditional_headers(page(etag='"e"', links=None)) == {}
    assert conditional_headers(page(etag='"e"', status=301, redirect="http://b/")) == {}
    assert conditional_headers(page(etag='"e"', status=500)) == {}


def test_vary_star_is_never_revalidated() -> None:
    assert validators({"etag": '"e"', "last-modified": PAST, "vary": "Accept, *"}) == (None, None)
    assert validators({"etag": '"e"', "vary": "Accept-Encoding"}) == ('"e"', None)


def test_a_304_with_new_validators_replaces_the_kept_ones() -> None:
    old = page(etag='"1"', last_modified=PAST, fetched_at=NOW - 10)
    new = after_not_modified(old, {"etag": '"2"'}, NOW)
    assert (new.etag, new.last_modified, new.fetched_at) == ('"2"', PAST, NOW)
    assert (new.digest, new.size, new.links) == (old.digest, old.size, old.links)
    assert after_not_modified(old, {}, NOW).etag == '"1"'
    assert after_not_modified(old, {"vary": "*"}, NOW).etag is None


def test_capture_time_distrusts_a_date_ahead_of_ours() -> None:
    assert capture_time({"date": PAST}, NOW) == NOW - 86_400
    assert capture_time({"date": FUTURE}, NOW) == NOW
    assert capture_time({}, NOW) == NOW


def test_classify_table() -> None:
    d1, d2 = sha1_digest(b"one"), sha1_digest(b"two")
    prev = page(digest=d1)
    assert classify(None, 200, d1, None) == "new"
    assert classify(prev, 304, None, None) == "unchanged"
    assert classify(prev, 200, d1, None) == "unchanged"  # a server that ignores validators
    assert classify(prev, 200, d2, None) == "changed"
    assert classify(prev, 404, None, None) == "gone"
    assert classify(prev, 410, None, None) == "gone"
    assert classify(page(status=404, digest=None), 404, None, None) == "unchanged"
    assert classify(prev, 301, None, "http://b/") == "gone"
    moved = page(status=301, redirect="http://b/", digest=None)
    assert classify(moved, 301, None, "http://b/") == "unchanged"
    assert classify(moved, 301, None, "http://c/") == "gone"
    assert classify(moved, 200, d1, None) == "changed"
    assert classify(prev, None, None, None) == "error"
    assert classify(prev, 503, None, None) == "error"
    # a 304 to a request without validators says nothing: an error
    assert classify(prev, 304, None, None, asked=False) == "error"
    assert classify(None, 304, None, None, asked=False) == "error"


urls = st.text(min_size=1, max_size=20)
maybe_text = st.none() | st.text(max_size=30)
visits = st.builds(
    Visit,
    url=urls,
    status=st.none() | st.integers(100, 599),
    etag=maybe_text,
    last_modified=maybe_text,
    digest=maybe_text,
    size=st.none() | st.integers(0, 2**40),
    links=st.none() | st.lists(urls, max_size=5).map(tuple),
    redirect=maybe_text,
    fetched_at=st.floats(0, 4e9),
    warc_record_id=maybe_text,
    warc_date=maybe_text,
    content_type=maybe_text,
    schedule=st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@given(visits)
def test_a_visit_survives_its_row(visit: Visit) -> None:
    back = Visit.from_row(visit.to_row())
    assert back == visit
    assert back.schedule == visit.schedule


@given(visits, st.none() | st.integers(100, 599), maybe_text, maybe_text, st.booleans())
def test_classify_is_total(
    visit: Visit, status: int | None, digest: str | None, redirect: str | None, asked: bool
) -> None:
    assert classify(visit, status, digest, redirect, asked=asked) in CHANGE_KINDS
    assert classify(None, status, digest, redirect) in ("new", "error")


@given(visits)
def test_only_validators_the_server_sent_are_sent(visit: Visit) -> None:
    headers = conditional_headers(visit)
    assert set(headers) <= {"If-None-Match", "If-Modified-Since"}
    assert headers.get("If-None-Match", visit.etag) == visit.etag
    assert headers.get("If-Modified-Since", visit.last_modified) == visit.last_modified


def test_digest_matches_the_warc_writers() -> None:
    from trio_crawl.outputs.warc import records

    assert records._sha1(b"abc") == sha1_digest(b"abc")
    assert sha1_digest(b"abc") == "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5"


def _by_email_utils(value: str) -> float | None:
    """The reading ``http_date`` had before its direct path: the reference."""
    from datetime import UTC
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


@given(st.integers(min_value=-62_000_000_000, max_value=250_000_000_000))
def test_http_date_reads_every_imf_fixdate_as_email_utils_does(epoch: int) -> None:
    value = formatdate(epoch, usegmt=True)
    assert http_date(value) == _by_email_utils(value)


@given(
    st.from_regex(
        r"\A(Mon|Sun|Xyz), [0-9]{2} (Jan|Feb|Jun|Dec|Foo) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}"
        r" (GMT|UTC|\+0200)\Z"
    )
)
def test_http_date_agrees_with_email_utils_on_odd_dates(value: str) -> None:
    """Day 31 of June, hour 24, second 60, year 0094, other zones: the
    direct path says what email.utils says (a date, or None)."""
    assert http_date(value) == _by_email_utils(value)


def test_http_date_other_forms_and_garbage() -> None:
    for value in ("Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "not a date", ""):
        assert http_date(value) == (_by_email_utils(value) if value else None)
    assert http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777.0
