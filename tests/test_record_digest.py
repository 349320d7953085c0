"""Every record with a body carries ``digest``: the WARC's payload digest of
that body (a real crawl, the archive read back with warcio)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trio_crawl.core.digest import sha1_digest
from trio_crawl.testing import Response, Site, page, serve_site

warcio = pytest.importorskip("warcio")


def site() -> Site:
    return Site(
        {
            "/": page("/a", "/gone", "/moved", "/doc.pdf"),
            "/a": Response(body=b"<p>plain</p>" * 50, gzip=True),
            "/moved": Response(status=301, headers=(("Location", "/a"),)),
            "/doc.pdf": Response(body=b"%PDF" + b"0" * 500, content_type="application/pdf"),
        }
    )


def test_records_carry_the_warc_payload_digest(tmp_path: Path) -> None:
    out, warc = tmp_path / "out.jsonl", tmp_path / "crawl.warc.gz"
    with serve_site(site()) as server:
        done = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.url("/"), "-q", "-o", str(out),
             "--warc", str(warc)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    records = {r["url"]: r for r in map(json.loads, out.read_text().splitlines())}
    stored: dict[str, str] = {}
    with open(warc, "rb") as f:
        for rec in warcio.ArchiveIterator(f):
            if rec.rec_type == "response":
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                stored[uri] = rec.rec_headers.get_header("WARC-Payload-Digest")
    base = server.url("/")
    assert records[base + "a"]["digest"] == stored[base + "a"]
    assert records[base + "a"]["digest"] == sha1_digest(b"<p>plain</p>" * 50)  # decoded body
    assert records[base]["digest"] == stored[base]
    assert records[base + "gone"]["digest"] == stored[base + "gone"]  # a 404's body was read
    assert "digest" not in records[base + "doc.pdf"]  # not HTML: no body read
    assert records[base + "doc.pdf"]["size"] is None
