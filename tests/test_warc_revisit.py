"""Revisit records that refer to an earlier crawl's capture (issue #33 item 5):
what the writer writes for a 304 and for an equal body, read back with warcio
(digests checked); the record id and date it gives back; refusals; the path
through the writer process. pywb replaying them: tests/test_warc_pywb.py."""

from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.core.models import FetchResult
from trio_crawl.outputs.archive import ArchiveTicket, open_archive_link
from trio_crawl.outputs.warc import (
    DEDUP_MIN_BYTES,
    PROFILES,
    RevisitOf,
    Stored,
    WarcWriter,
    new_record_id,
    read_warc_responses,
    revisit_for,
    warc_date,
)
from trio_crawl.outputs.warc.records import _sha1
from trio_crawl.outputs.warc_process import WarcProcess

warcio_archive = pytest.importorskip("warcio.archiveiterator")
ArchiveIterator = warcio_archive.ArchiveIterator

URL = "http://127.0.0.1:8000/page"
OTHER = "http://127.0.0.1:8000/copy"
BODY = b"<!doctype html><p>" + b"unchanged " * 300 + b"</p>"
D1, D2 = 1_767_225_600.0, 1_769_904_000.5  # 2026-01-01, 2026-02-01 (and a half second)
PAGE = FetchResult(URL, 200, {"content-type": "text/html", "etag": '"v1"'}, BODY, 0.01)
NOT_MODIFIED = FetchResult(
    URL, 304, {"etag": '"v1"', "date": "Sun, 01 Feb 2026 00:00:00 GMT", "x-new": "1"}, b"", 0.01
)


def records(path: Path) -> list[tuple[Any, bytes]]:
    """(warcio record, its content) for every record, digests checked."""
    out = []
    with open(path, "rb") as f:
        for record in ArchiveIterator(f, check_digests=True):
            content = record.content_stream().read()
            assert record.digest_checker.passed is not False, record.digest_checker.problems
            out.append((record, content))
    return out


def first_crawl(tmp_path: Path) -> Stored:
    with WarcWriter.open(tmp_path / "one.warc.gz", append=False) as w:
        return w.write_capture(url=URL, result=PAGE, date=D1)


def of(stored: Stored, profile: str, *, known_id: bool = True) -> RevisitOf:
    record_id = stored.record_id if known_id else None
    return RevisitOf(profile, URL, stored.warc_date, record_id, _sha1(BODY))


def test_a_304_becomes_a_server_not_modified_revisit_of_the_earlier_capture(
    tmp_path: Path,
) -> None:
    earlier = first_crawl(tmp_path)
    assert earlier.warc_date == "2026-01-01T00:00:00.000000Z"
    path = tmp_path / "two.warc.gz"
    with WarcWriter.open(path, append=False) as w:
        stored = w.write_capture(
            url=URL,
            result=NOT_MODIFIED,
            date=D2,
            request_headers={"If-None-Match": '"v1"'},
            revisit_of=of(earlier, "server-not-modified"),
        )
        assert w.revisits == 1
    kinds = [r.rec_type for r, _ in records(path)]
    assert kinds == ["warcinfo", "revisit", "request", "metadata"]
    (revisit, block), (request, _), (meta, fields) = records(path)[1:]
    h = revisit.rec_headers
    assert stored == Stored(h.get_header("WARC-Record-ID"), h.get_header("WARC-Date"))
    assert stored.warc_date == "2026-02-01T00:00:00.500000Z"
    assert h.get_header("WARC-Profile") == (
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    )
    assert h.get_header("WARC-Refers-To") == earlier.record_id
    assert h.get_header("WARC-Refers-To-Target-URI") == URL
    assert h.get_header("WARC-Refers-To-Date") == earlier.warc_date
    assert h.get_header("WARC-Payload-Digest") == _sha1(BODY)  # the earlier body's
    assert h.get_header("WARC-Target-URI") == URL
    # No block: a replay tool serves the capture it refers to (a 304 head
    # would be served as an empty 304); the 304's head is in the metadata.
    assert h.get_header("Content-Length") == "0" and block == b""
    assert revisit.http_headers is None
    assert request.rec_headers.get_header("WARC-Concurrent-To") == stored.record_id
    assert request.http_headers.get_header("If-None-Match") == '"v1"'
    assert meta.rec_headers.get_header("WARC-Concurrent-To") == stored.record_id
    lines = dict(line.split(": ", 1) for line in fields.decode().splitlines())
    assert lines["http-response"] == "HTTP/1.1 304 Not Modified"
    assert json.loads(lines["http-response-headers"]) == [
        [k, v] for k, v in NOT_MODIFIED.headers.items()
    ]


def test_an_equal_body_becomes_an_identical_payload_digest_revisit_with_its_head(
    tmp_path: Path,
) -> None:
    earlier = first_crawl(tmp_path)
    path = tmp_path / "two.warc.gz"
    copy = FetchResult(OTHER, 200, {"content-type": "text/html", "x-v": "2"}, BODY, 0.01)
    with WarcWriter.open(path, append=False) as w:
        stored = w.write_capture(
            url=OTHER, result=copy, date=D2, revisit_of=of(earlier, "identical-payload-digest")
        )
    (revisit, block), (request, _) = records(path)[1:]
    assert [r.rec_type for r, _ in records(path)] == ["warcinfo", "revisit", "request"]
    h = revisit.rec_headers
    assert h.get_header("WARC-Record-ID") == stored.record_id
    assert h.get_header("WARC-Profile") == PROFILES["identical-payload-digest"]
    assert h.get_header("WARC-Profile").startswith("http://netpreserve.org/warc/1.1/")
    assert h.get_header("WARC-Refers-To") == earlier.record_id
    assert h.get_header("WARC-Refers-To-Target-URI") == URL  # the earlier URL, not OTHER
    assert h.get_header("WARC-Refers-To-Date") == earlier.warc_date
    assert h.get_header("WARC-Payload-Digest") == _sha1(BODY)
    assert h.get_header("WARC-Target-URI") == OTHER
    # The answer's own head, no body.
    assert revisit.http_headers.get_statuscode() == "200"
    assert revisit.http_headers.get_header("x-v") == "2"
    assert revisit.http_headers.get_header("content-length") == str(len(BODY))
    assert block == b"" and int(h.get_header("Content-Length")) < 200  # the head alone
    assert request.rec_headers.get_header("WARC-Concurrent-To") == stored.record_id


def test_an_unknown_record_id_leaves_out_refers_to_only(tmp_path: Path) -> None:
    earlier = first_crawl(tmp_path)
    path = tmp_path / "two.warc.gz"
    with WarcWriter.open(path, append=False) as w:
        w.write_capture(
            url=URL,
            result=NOT_MODIFIED,
            revisit_of=of(earlier, "server-not-modified", known_id=False),
        )
    h = records(path)[1][0].rec_headers
    assert h.get_header("WARC-Refers-To") is None
    assert h.get_header("WARC-Refers-To-Target-URI") == URL
    assert h.get_header("WARC-Refers-To-Date") == earlier.warc_date


def test_both_crawls_read_back_as_the_original_page(tmp_path: Path) -> None:
    earlier = first_crawl(tmp_path)
    two = tmp_path / "two.warc.gz"
    copy = FetchResult(OTHER, 200, {"content-type": "text/html"}, BODY, 0.01)
    with WarcWriter.open(two, append=False) as w:
        w.write_capture(
            url=URL, result=NOT_MODIFIED, revisit_of=of(earlier, "server-not-modified")
        )
        w.write_capture(url=OTHER, result=copy, revisit_of=of(earlier, "identical-payload-digest"))
    pages = read_warc_responses(tmp_path / "one.warc.gz", two)
    assert pages[URL].record_type == "revisit"
    assert (pages[URL].status, pages[URL].body) == (200, BODY)  # the capture it stands for
    assert pages[URL].headers["etag"] == '"v1"'
    assert (pages[OTHER].status, pages[OTHER].body) == (200, BODY)
    alone = read_warc_responses(two)  # without the earlier file: no body to give
    assert alone[OTHER].body == b""


def test_the_returned_id_and_date_are_the_records_and_a_given_id_is_used(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.warc.gz"
    chosen = new_record_id()
    with WarcWriter.open(path, append=False) as w:
        made = w.write_capture(url=URL, result=PAGE, date=D1, record_id=chosen)
        default = w.write_capture(url=OTHER, result=PAGE)
        assert w.write_exchange(url=URL, result=PAGE).startswith("<urn:uuid:")
    assert made == Stored(chosen, warc_date(D1))
    responses = [r.rec_headers for r, _ in records(path) if r.rec_type == "response"]
    assert [
        (h.get_header("WARC-Record-ID"), h.get_header("WARC-Date")) for h in responses[:2]
    ] == [
        made,
        default,
    ]


@pytest.mark.parametrize(
    ("profile", "result", "message"),
    [
        ("server-not-modified", PAGE, "is for a 304, not 200"),
        ("identical-payload-digest", NOT_MODIFIED, "body that was read"),
        (
            "identical-payload-digest",
            FetchResult(URL, 200, {}, BODY + b"!", 0.0),
            "needs the whole body of digest",
        ),
        (
            "identical-payload-digest",
            FetchResult(URL, 200, {}, b"", 0.0, body_skipped=True),
            "body that was read",
        ),
    ],
)
def test_a_revisit_that_would_be_false_is_refused_and_nothing_written(
    tmp_path: Path, profile: str, result: FetchResult, message: str
) -> None:
    earlier = first_crawl(tmp_path)
    path = tmp_path / "two.warc.gz"
    with WarcWriter.open(path, append=False) as w:
        size = os.path.getsize(path)
        with pytest.raises(ValueError, match=message):
            w.write_capture(url=URL, result=result, revisit_of=of(earlier, profile))
        assert os.path.getsize(path) == size
        assert w.revisits == 0


def test_a_truncated_body_is_no_identical_payload(tmp_path: Path) -> None:
    earlier = first_crawl(tmp_path)
    with (
        WarcWriter.open(tmp_path / "two.warc.gz", append=False) as w,
        pytest.raises(ValueError, match="truncated: length"),
    ):
        w.write_capture(
            url=URL,
            result=PAGE,
            truncated="length",
            revisit_of=of(earlier, "identical-payload-digest"),
        )


def test_in_crawl_dedup_refers_later_copies_to_the_earlier_crawls_capture(
    tmp_path: Path,
) -> None:
    earlier = first_crawl(tmp_path)
    assert len(BODY) >= DEDUP_MIN_BYTES
    path = tmp_path / "two.warc.gz"
    third = "http://127.0.0.1:8000/third"
    with WarcWriter.open(path, append=False, dedup=True) as w:
        w.write_capture(url=OTHER, result=PAGE, revisit_of=of(earlier, "identical-payload-digest"))
        w.write_capture(url=third, result=PAGE)  # same body again, this crawl
        assert w.revisits == 2
    revisits = [r.rec_headers for r, _ in records(path) if r.rec_type == "revisit"]
    assert revisits[1].get_header("WARC-Target-URI") == third
    assert revisits[1].get_header("WARC-Refers-To") == earlier.record_id
    assert revisits[1].get_header("WARC-Refers-To-Date") == earlier.warc_date


def test_revisits_go_through_the_writer_process_with_the_crawls_record_ids(
    tmp_path: Path,
) -> None:
    earlier = first_crawl(tmp_path)
    path = str(tmp_path / "two.warc.gz")
    process = WarcProcess.start(path, append=False)
    ids = [new_record_id() for _ in range(3)]
    copy = FetchResult(OTHER, 200, {"content-type": "text/html"}, BODY, 0.01)
    changed = FetchResult(OTHER + "2", 200, {}, b"another body", 0.01)
    sent = {"If-None-Match": '"v1"'}
    process.submit(URL, NOT_MODIFIED, date=D2, record_id=ids[0], request_headers=sent,
                   revisit_of=of(earlier, "server-not-modified"))  # fmt: skip
    process.submit(OTHER, copy, date=D2, record_id=ids[1],
                   revisit_of=of(earlier, "identical-payload-digest"))  # fmt: skip
    # The crawl's side cannot hash bodies (that is the child's CPU): a digest
    # that does not match is stored as a plain response, not a false revisit.
    process.submit(changed.url, changed, date=D2, record_id=ids[2],
                   revisit_of=of(earlier, "identical-payload-digest"))  # fmt: skip
    with pytest.raises(ValueError, match="is for a 304"):
        process.submit(URL, PAGE, date=D2, revisit_of=of(earlier, "server-not-modified"))
    deadline = time.monotonic() + 30
    while process.acked < 3:  # woken by the child's acks, bounded
        assert time.monotonic() < deadline, f"acked {process.acked} of 3"
        if select.select([process.ack_fd], [], [], 0.5)[0]:
            assert process.read_acks(), process.error
    process.close()
    assert process.error is None
    got = {r.rec_headers.get_header("WARC-Record-ID"): (r, c) for r, c in records(Path(path))}
    assert got[ids[0]][0].rec_type == "revisit"
    assert got[ids[0]][0].rec_headers.get_header("WARC-Profile") == PROFILES["server-not-modified"]
    assert got[ids[0]][0].rec_headers.get_header("WARC-Date") == warc_date(D2)
    assert got[ids[1]][0].rec_type == "revisit"
    assert got[ids[2]][0].rec_type == "response" and got[ids[2]][1].endswith(b"another body")
    requests = [r for r, _ in records(Path(path)) if r.rec_type == "request"]
    assert requests[0].http_headers.get_header("If-None-Match") == '"v1"'


@given(
    profile=st.sampled_from(sorted(PROFILES)),
    uri=st.text(min_size=1, max_size=30),
    date=st.text(max_size=30),
    record_id=st.none() | st.text(max_size=30),
    digest=st.text(max_size=40),
)
def test_a_revisit_of_never_forges_a_header_line(
    profile: str, uri: str, date: str, record_id: str | None, digest: str
) -> None:
    """Whatever a caller passes (a corrupt state file...): either ValueError,
    or exactly the revisit's field lines, none with a CR or LF inside."""
    try:
        revisit = RevisitOf(profile, uri, date, record_id, digest)
    except ValueError:
        return
    lines = revisit.fields().split("\r\n")
    assert lines[-1] == ""
    names = [line.split(": ", 1)[0] for line in lines[:-1]]
    expected = ["WARC-Profile"] + (["WARC-Refers-To"] if record_id is not None else [])
    assert names == [*expected, "WARC-Refers-To-Target-URI", "WARC-Refers-To-Date",
                     "WARC-Payload-Digest"]  # fmt: skip
    assert not any("\n" in line or "\r" in line for line in lines)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("profile", "uri-agnostic-identical-payload-digest"),
        ("target_uri", "http://a/ b"),
        ("warc_date", "2026-01-01 00:00:00"),
        ("record_id", "urn:uuid:no-brackets"),
        ("payload_digest", "BASE32WITHOUTALGORITHM"),
    ],
)
def test_a_malformed_revisit_of_is_refused(field: str, value: str) -> None:
    good = {
        "profile": "server-not-modified",
        "target_uri": URL,
        "warc_date": "2026-01-01T00:00:00Z",
        "record_id": "<urn:uuid:0>",
        "payload_digest": _sha1(BODY),
    }
    RevisitOf(**good)
    with pytest.raises(ValueError):
        RevisitOf(**{**good, field: value})


def test_a_crawls_archive_ticket_names_the_record_its_page_is_in(tmp_path: Path) -> None:
    """What the crawl keeps for a Visit (warc_record_id, warc_date): known at
    submit, and the very id and date of the revisit written."""
    earlier = first_crawl(tmp_path)
    path = str(tmp_path / "two.warc.gz")
    tickets: list[ArchiveTicket] = []

    async def main() -> None:
        with trio.fail_after(30):
            async with open_archive_link(
                path, info={}, request_headers={}, append=False, on_failure=pytest.fail
            ) as link:
                for result, revisit in [
                    (NOT_MODIFIED, of(earlier, "server-not-modified")),
                    (PAGE, None),
                ]:
                    tickets.append(link.submit(URL, result, revisit_of=revisit))
                for ticket in tickets:
                    await ticket

    trio.run(main)
    written = [
        (
            r.rec_type,
            Stored(
                r.rec_headers.get_header("WARC-Record-ID"), r.rec_headers.get_header("WARC-Date")
            ),
        )
        for r, _ in records(Path(path))
        if r.rec_type in ("revisit", "response")
    ]
    assert written == [("revisit", tickets[0].stored), ("response", tickets[1].stored)]


@given(
    status=st.sampled_from([200, 304, 404, 500]),
    digest=st.none() | st.sampled_from([_sha1(BODY), _sha1(b"other")]),
    previous_digest=st.none() | st.sampled_from([_sha1(BODY), _sha1(b"other")]),
    previous_date=st.none() | st.just("2026-01-01T00:00:00.000000Z"),
    previous_id=st.none() | st.just("<urn:uuid:0>"),
)
def test_revisit_for_writes_a_revisit_only_for_an_unchanged_page_held_in_a_warc(
    status: int,
    digest: str | None,
    previous_digest: str | None,
    previous_date: str | None,
    previous_id: str | None,
) -> None:
    got = revisit_for(
        url=URL,
        status=status,
        digest=digest,
        previous_digest=previous_digest,
        previous_warc_date=previous_date,
        previous_record_id=previous_id,
    )
    held = previous_date is not None and previous_digest is not None
    if not held or (status != 304 and (digest is None or digest != previous_digest)):
        assert got is None
        return
    assert got == RevisitOf(
        "server-not-modified" if status == 304 else "identical-payload-digest",
        URL,
        previous_date,
        previous_id,
        previous_digest,
    )


def test_a_page_unchanged_twice_reads_back_through_a_revisit_of_a_revisit(
    tmp_path: Path,
) -> None:
    """Crawl 3 refers to crawl 2's revisit (a Visit that kept the revisit's
    id): the reader follows it to crawl 1's body, as pywb does."""
    earlier = first_crawl(tmp_path)
    files = [tmp_path / "one.warc.gz"]
    for n, date in ((2, D2), (3, D2 + 86_400)):
        files.append(tmp_path / f"{n}.warc.gz")
        with WarcWriter.open(files[-1], append=False) as w:
            earlier = w.write_capture(
                url=URL,
                result=NOT_MODIFIED,
                date=date,
                revisit_of=of(earlier, "server-not-modified"),
            )
    page = read_warc_responses(*files)[URL]
    assert (page.record_type, page.status, page.body) == ("revisit", 200, BODY)
    assert read_warc_responses(files[0], files[2])[URL].body == b""  # crawl 2 not read
