"""WARC output: records read back with warcio, digests checked, torn tails repaired."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.core.models import FetchResult
from trio_crawl.outputs.warc import (
    REVISIT_PROFILE,
    WarcWriter,
    iter_members,
    read_warc_responses,
    repair_warc,
    stored_response_headers,
)

warcio_archive = pytest.importorskip("warcio.archiveiterator")
ArchiveIterator = warcio_archive.ArchiveIterator

UA = {"User-Agent": "trio-crawl-test/1.0", "Accept-Encoding": "gzip, deflate"}
HTML = ("<!doctype html><title>café</title>" + "<p>hello world</p>" * 200).encode()

PAGES = [
    FetchResult(
        "http://127.0.0.1:8000/",
        200,
        {
            "content-type": "text/html; charset=utf-8",
            "content-encoding": "gzip",
            "content-length": "321",
            "server": "test",
        },
        HTML,
        0.01,
    ),
    FetchResult(
        "http://127.0.0.1:8000/missing?q=1&r=2",
        404,
        {"content-type": "text/html", "content-length": "9"},
        b"not found",
        0.002,
    ),
    FetchResult(
        "http://127.0.0.1:8000/old",
        301,
        {"location": "http://127.0.0.1:8000/new", "content-length": "0"},
        b"",
        0.001,
    ),
    FetchResult(
        "http://127.0.0.1:8000/big.bin",
        200,
        {"content-type": "application/octet-stream", "content-length": "123456"},
        b"",
        0.003,
        body_skipped=True,
    ),
    FetchResult(
        "http://127.0.0.1:8000/odd",
        200,
        {
            "content-type": "text/html",
            "x-title": "Grüße ☕ naïve",  # non-ASCII, as a fetcher decodes it
            "set-cookie": "a=1; Path=/, b=2; Path=/",  # repeated, joined by the fetcher
            "transfer-encoding": "chunked",
        },
        "<p>ünïcödé body</p>".encode(),
        0.004,
    ),
    FetchResult(
        "http://127.0.0.1:8000/teapot",
        599,  # no reason phrase known
        {"content-type": "text/plain"},
        bytes(range(256)),
        0.004,
    ),
]


def records(path: Path) -> Iterator[tuple[Any, bytes]]:
    """(warcio record, its content) for every record, digests checked."""
    with open(path, "rb") as f:
        for record in ArchiveIterator(f, check_digests=True):
            content = record.content_stream().read()
            assert record.digest_checker.passed is not False, record.digest_checker.problems
            yield record, content


def write_pages(path: Path, pages: list[FetchResult] = PAGES, **kwargs: Any) -> list[str]:
    ids = []
    with WarcWriter.open(path, info={"start_urls": ["http://127.0.0.1:8000/"]}, **kwargs) as w:
        for page in pages:
            ids.append(w.write_exchange(url=page.url, result=page, request_headers=UA))
    return ids


def test_every_page_is_stored_with_its_headers_and_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    ids = write_pages(path)
    recs = list(records(path))

    types = [r.rec_type for r, _ in recs]
    assert types == ["warcinfo"] + ["response", "request"] * len(PAGES)
    info_id = recs[0][0].rec_headers.get_header("WARC-Record-ID")
    assert b"software: trio-crawl/" in recs[0][1]
    assert b'start_urls: ["http://127.0.0.1:8000/"]' in recs[0][1]

    for i, page in enumerate(PAGES):
        response, body = recs[1 + 2 * i]
        request, request_block = recs[2 + 2 * i]
        h = response.rec_headers
        assert h.get_header("WARC-Target-URI") == page.url
        assert h.get_header("WARC-Record-ID") == ids[i]
        assert h.get_header("WARC-Warcinfo-ID") == info_id
        assert h.get_header("WARC-Payload-Digest").startswith("sha1:")
        assert h.get_header("WARC-Block-Digest").startswith("sha1:")
        assert response.digest_checker.passed is True
        assert h.get_header("Content-Type") == "application/http;msgtype=response"
        assert response.http_headers.get_statuscode() == str(page.status)
        assert response.http_headers.protocol == "HTTP/1.1"
        assert response.http_headers.headers == stored_response_headers(page.headers, len(body))
        assert body == page.body
        expected_truncated = "unspecified" if page.body_skipped else None
        assert h.get_header("WARC-Truncated") == expected_truncated

        r = request.rec_headers
        assert r.get_header("WARC-Concurrent-To") == ids[i]
        assert r.get_header("WARC-Target-URI") == page.url
        assert r.get_header("WARC-Date") == h.get_header("WARC-Date")
        assert request.http_headers.protocol == "GET"
        path_and_query = page.url.split("8000", 1)[1]
        assert request.http_headers.statusline == f"{path_and_query} HTTP/1.1"
        assert request.http_headers.get_header("Host") == "127.0.0.1:8000"
        assert request.http_headers.get_header("User-Agent") == UA["User-Agent"]
        assert request_block == b""


def test_stored_head_matches_the_decoded_body() -> None:
    headers = {
        "content-type": "text/html",
        "content-encoding": "br",
        "transfer-encoding": "chunked",
        "content-length": "10",
    }
    assert stored_response_headers(headers, 42) == [
        ("content-type", "text/html"),
        ("content-length", "42"),
        ("x-crawler-original-content-encoding", "br"),
        ("x-crawler-original-transfer-encoding", "chunked"),
        ("x-crawler-original-content-length", "10"),
    ]
    # an unchanged length is not repeated; a CR/LF in a value cannot forge a header
    assert stored_response_headers({"content-length": "3", "x": "a\r\nb"}, 3) == [
        ("x", "a b"),
        ("content-length", "3"),
    ]


def test_helper_reads_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    write_pages(path)
    stored = read_warc_responses(path)
    assert set(stored) == {p.url for p in PAGES}
    for page in PAGES:
        got = stored[page.url]
        status, headers, body = got[:3]
        assert (status, body) == (page.status, page.body)
        assert headers["content-length"] == str(len(page.body))
        assert "content-encoding" not in headers
        assert got.truncated == ("unspecified" if page.body_skipped else None)
    assert stored[PAGES[4].url].headers["x-title"] == "Grüße ☕ naïve"
    assert stored[PAGES[4].url].headers["set-cookie"] == "a=1; Path=/, b=2; Path=/"


def test_warcio_check_and_index_accept_the_file(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    write_pages(path)
    check = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("digest pass") == 1 + 2 * len(PAGES)
    index = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "index", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert index.stdout.count('"warc-type": "response"') == len(PAGES)


def test_one_gzip_member_per_record_that_plain_gzip_reads(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    write_pages(path)
    members = list(iter_members(path))
    assert len(members) == 1 + 2 * len(PAGES)
    assert sum(length for _, length in members) == path.stat().st_size
    text = gzip.decompress(path.read_bytes())  # the FEXTRA subfield is skipped
    assert text.count(b"WARC/1.1\r\n") == len(members)


def test_fastwarc_reads_it_and_verifies_digests(tmp_path: Path) -> None:
    fastwarc = pytest.importorskip("fastwarc.warc")
    path = tmp_path / "crawl.warc.gz"
    write_pages(path)
    count = 0
    for record in fastwarc.ArchiveIterator(str(path), parse_http=False):
        assert record.verify_block_digest()
        count += 1
    assert count == 1 + 2 * len(PAGES)


@pytest.mark.parametrize("compressor", ["zlib", "isal"])
def test_compressors(tmp_path: Path, compressor: str) -> None:
    if compressor == "isal":
        pytest.importorskip("isal")
    path = tmp_path / "crawl.warc.gz"
    write_pages(path, compressor=compressor, compresslevel=1)
    assert {u: r.body for u, r in read_warc_responses(path).items()} == {
        p.url: p.body for p in PAGES
    }


def test_metadata_and_explicit_truncation(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    partial = FetchResult("http://h.test/huge", 200, {"content-type": "text/html"}, b"<p>a", 1.0)
    with WarcWriter.open(path) as w:
        rid = w.write_exchange(
            url=partial.url,
            result=partial,
            truncated="length",
            ip="127.0.0.1",
            protocol="HTTP/1.0",
            metadata={"depth": 2, "via": "http://h.test/", "error": None, "outlinks": 3},
        )
        lone = w.write_metadata("http://h.test/down", {"error": {"kind": "timeout"}})
        with pytest.raises(ValueError, match="WARC-Truncated"):
            w.write_exchange(url=partial.url, result=partial, truncated="too big")
    recs = list(records(path))
    assert [r.rec_type for r, _ in recs] == [
        "warcinfo",
        "response",
        "request",
        "metadata",
        "metadata",
    ]
    response = recs[1][0]
    assert response.rec_headers.get_header("WARC-Truncated") == "length"
    assert response.rec_headers.get_header("WARC-IP-Address") == "127.0.0.1"
    assert response.http_headers.protocol == "HTTP/1.0"
    meta, fields = recs[3]
    assert meta.rec_headers.get_header("WARC-Concurrent-To") == rid
    assert fields == b"depth: 2\r\nvia: http://h.test/\r\noutlinks: 3\r\n"
    lone_rec, lone_fields = recs[4]
    assert lone_rec.rec_headers.get_header("WARC-Record-ID") == lone
    assert lone_rec.rec_headers.get_header("WARC-Concurrent-To") is None
    assert lone_fields == b'error: {"kind": "timeout"}\r\n'


def test_record_ids_are_uuid4_urns(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    ids = write_pages(path)
    assert len(set(ids)) == len(ids)
    for rid in ids:
        assert rid.startswith("<urn:uuid:") and rid.endswith(">")
        assert uuid.UUID(rid[10:-1]).version == 4


def test_dedup_writes_revisits_that_read_back_as_the_first_body(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    same = [
        FetchResult(f"http://h.test/{i}", 200, {"content-type": "text/html"}, HTML, 0.0)
        for i in range(3)
    ]
    small = [FetchResult(f"http://h.test/s{i}", 200, {}, b"tiny", 0.0) for i in range(2)]
    with WarcWriter.open(path, dedup=True) as w:
        first = w.write_exchange(url=same[0].url, result=same[0])
        for page in same[1:] + small:
            w.write_exchange(url=page.url, result=page)
        assert w.revisits == 2
    recs = [(r, c) for r, c in records(path) if r.rec_type in ("response", "revisit")]
    kinds = [r.rec_type for r, _ in recs]
    assert kinds == ["response", "revisit", "revisit", "response", "response"]
    revisit, content = recs[1]
    h = revisit.rec_headers
    assert h.get_header("WARC-Profile") == REVISIT_PROFILE
    assert h.get_header("WARC-Refers-To") == first
    assert h.get_header("WARC-Refers-To-Target-URI") == same[0].url
    assert h.get_header("WARC-Refers-To-Date") == recs[0][0].rec_headers.get_header("WARC-Date")
    assert h.get_header("WARC-Payload-Digest") == recs[0][0].rec_headers.get_header(
        "WARC-Payload-Digest"
    )
    assert content == b""  # the HTTP head only
    assert revisit.http_headers.get_statuscode() == "200"
    stored = read_warc_responses(path)
    assert all(stored[p.url].body == p.body for p in same + small)
    assert stored[same[2].url].record_type == "revisit"


def test_writer_on_a_file_object_without_descriptor() -> None:
    buf = io.BytesIO()
    w = WarcWriter(buf)
    w.write_exchange(url=PAGES[0].url, result=PAGES[0])
    data = buf.getvalue()
    assert w.bytes_written == len(data)
    recs = list(ArchiveIterator(io.BytesIO(data), check_digests=True))
    assert [r.rec_type for r in recs] == ["response", "request"]


# -- resume --------------------------------------------------------------------------


def page(i: int) -> FetchResult:
    body = b"<html>" + f"page {i} ".encode() * (i * 37 % 500 + 1) + b"</html>"
    return FetchResult(f"http://h.test/{i}", 200, {"content-type": "text/html"}, body, 0.0)


def response_urls(path: Path) -> list[str]:
    return [
        r.rec_headers.get_header("WARC-Target-URI")
        for r, _ in records(path)
        if r.rec_type == "response"
    ]


@pytest.mark.parametrize("tail", ["half a member", "garbage", "a gzip header only"])
def test_repair_cuts_a_torn_tail_and_appending_continues(tmp_path: Path, tail: str) -> None:
    path = tmp_path / "crawl.warc.gz"
    n = 20
    write_pages(path, [page(i) for i in range(n)])
    size = path.stat().st_size
    if tail == "half a member":
        other = tmp_path / "other.warc.gz"
        write_pages(other, [page(99)])
        last_offset, last_length = list(iter_members(other))[-2]  # the response
        blob = other.read_bytes()[last_offset : last_offset + last_length // 2]
    elif tail == "garbage":
        blob = b"\x00not gzip at all\xff" * 10
    else:
        blob = b"\x1f\x8b\x08\x04\x00\x00"
    with open(path, "ab") as f:
        f.write(blob)

    assert repair_warc(path) == len(blob)
    assert path.stat().st_size == size
    assert response_urls(path) == [f"http://h.test/{i}" for i in range(n)]
    assert repair_warc(path) == 0  # idempotent

    with WarcWriter.open(path) as w:
        assert w.repaired_bytes == 0
        for i in range(n, n + 5):
            w.write_exchange(url=f"http://h.test/{i}", result=page(i))
    assert response_urls(path) == [f"http://h.test/{i}" for i in range(n + 5)]
    infos = [c for r, c in records(path) if r.rec_type == "warcinfo"]
    assert len(infos) == 2 and b"resumed: true" in infos[1]


def test_open_without_append_starts_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    write_pages(path, [page(1), page(2)])
    with WarcWriter.open(path, append=False) as w:
        w.write_exchange(url="http://h.test/3", result=page(3))
    assert response_urls(path) == ["http://h.test/3"]
    infos = [c for r, c in records(path) if r.rec_type == "warcinfo"]
    assert len(infos) == 1 and b"resumed" not in infos[0]


def test_open_repairs_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    write_pages(path, [page(1)])
    with open(path, "ab") as f:
        f.write(b"\x1f\x8b\x08\x04torn")
    with WarcWriter.open(path) as w:
        assert w.repaired_bytes == 8
        w.write_exchange(url="http://h.test/2", result=page(2))
    assert response_urls(path) == ["http://h.test/1", "http://h.test/2"]


def test_a_kill_at_any_byte_leaves_a_repairable_file(tmp_path: Path) -> None:
    """Cut the file at every offset (stride 7) of its last two exchanges: repair
    keeps exactly the complete records before the cut."""
    full = tmp_path / "full.warc.gz"
    write_pages(full, [page(i) for i in range(4)])
    data = full.read_bytes()
    ends = [offset + length for offset, length in iter_members(full)]
    cut_path = tmp_path / "cut.warc.gz"
    for cut in range(ends[-5], len(data) + 1, 7):
        cut_path.write_bytes(data[:cut])
        repair_warc(cut_path)
        good = max(e for e in ends if e <= cut)
        assert cut_path.stat().st_size == good
        assert len(list(records(cut_path))) == sum(1 for e in ends if e <= cut)


def test_a_torn_first_record_is_cut_to_nothing(tmp_path: Path) -> None:
    full = tmp_path / "full.warc.gz"
    write_pages(full, [])
    path = tmp_path / "torn.warc.gz"
    path.write_bytes(full.read_bytes()[:50])
    assert repair_warc(path) == 50
    assert path.stat().st_size == 0


def test_repair_refuses_a_file_that_is_not_gzip(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"WARC/1.1\r\nnot compressed\r\n")
    with pytest.raises(ValueError, match="not a gzipped WARC"):
        repair_warc(path)
    assert path.read_bytes() == b"WARC/1.1\r\nnot compressed\r\n"
    with pytest.raises(ValueError):
        WarcWriter.open(path)


def test_repair_walks_members_from_other_writers(tmp_path: Path) -> None:
    """warcio's own members have no length subfield: they are inflated instead."""
    from warcio.warcwriter import WARCWriter

    path = tmp_path / "mixed.warc.gz"
    with open(path, "wb") as f:
        foreign = WARCWriter(f, gzip=True)
        for i in range(3):
            rec = foreign.create_warc_record(
                f"http://other.test/{i}", "resource", payload=io.BytesIO(b"x" * 100)
            )
            foreign.write_record(rec)
    foreign_size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x1f\x8b\x08\x00torn")
    assert repair_warc(path) == 8
    assert path.stat().st_size == foreign_size
    with WarcWriter.open(path) as w:
        w.write_exchange(url="http://h.test/1", result=page(1))
    with open(path, "ab") as f:
        f.write(b"\x1f\x8b")
    assert repair_warc(path) == 2
    kinds = [r.rec_type for r, _ in records(path)]
    assert kinds == ["resource"] * 3 + ["warcinfo", "response", "request"]


def test_missing_extra_message() -> None:
    from trio_crawl.outputs.warc import WARC_EXTRA_MESSAGE

    assert WARC_EXTRA_MESSAGE == (
        "--warc needs the optional dependency: pip install 'trio-crawl[warc]'"
    )
    assert "\n" not in WARC_EXTRA_MESSAGE


def test_bench_writer_smoke(tmp_path: Path) -> None:
    """The benchmark's own variants still run and produce valid files."""
    bench_dir = Path(__file__).resolve().parent.parent / "benchmarks"
    env = dict(os.environ, PYTHONPATH=str(bench_dir))
    out = subprocess.run(
        [
            sys.executable,
            str(bench_dir / "bench_warc.py"),
            "--exchanges",
            "30",
            "--rounds",
            "1",
            "--no-sim",
            "--only",
            "trio-crawl",
            "thread",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "INVALID" not in out.stdout
    assert out.stdout.count(" ok") >= 3


def test_each_job_has_its_module_behind_one_face() -> None:
    """``outputs/warc/``: the records, the writer, the gzip members (lock,
    repair) and the reader apart; the face keeps every name importable; the thread writer
    that only a benchmark used lives with the benchmark."""
    from trio_crawl.outputs import warc

    assert warc.WarcWriter.__module__ == "trio_crawl.outputs.warc.writer"
    assert warc.WarcRecords.__module__ == "trio_crawl.outputs.warc.records"
    assert warc.stored_response_headers.__module__ == "trio_crawl.outputs.warc.records"
    assert warc.repair_warc.__module__ == "trio_crawl.outputs.warc.members"
    assert warc.lock_warc.__module__ == "trio_crawl.outputs.warc.members"
    assert warc.read_warc_responses.__module__ == "trio_crawl.outputs.warc.reader"
    assert all(hasattr(warc, name) for name in warc.__all__)
    assert not hasattr(warc, "BackgroundWarcWriter")
