"""--warc end to end: a real crawl against a local server, the archive read
back with warcio, and a --state crawl interrupted and resumed into the same
archive. Every subprocess has a timeout."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trio_crawl.testing import Response, Site, page, serve_site

pytest.importorskip("warcio")

from trio_crawl.outputs.warc import read_warc_responses

PAGES = 40


def site() -> Site:
    routes: dict[str, Response] = {
        f"/p/{i}": page(f"/p/{(i + 1) % PAGES}", f"/p/{(i * 3) % PAGES}") for i in range(PAGES)
    }
    routes["/p/0"] = page("/p/1", "/moved", "/missing", "/doc.pdf")
    routes["/moved"] = Response(status=301, headers=(("Location", "/p/2"),))
    routes["/doc.pdf"] = Response(body=b"%PDF" + b"0" * 5000, content_type="application/pdf")
    routes["/gz"] = Response(body=page().body, gzip=True)
    return Site(routes)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_crawl", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_every_fetched_page_is_in_the_warc_with_its_headers_and_bytes(tmp_path: Path) -> None:
    out, warc = tmp_path / "out.jsonl", tmp_path / "crawl.warc.gz"
    with serve_site(site()) as server:
        done = run(server.url("/p/0"), "-q", "-o", str(out), "--warc", str(warc))
        assert done.returncode == 0, done.stderr
        bodies = {server.url(path): route for path, route in site().routes.items()}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    records = [r for r in lines if not r.get("depth_update")]  # corrections are no fetches
    stored = read_warc_responses(str(warc))
    fetched = {r["url"] for r in records if r["status"] is not None}
    assert fetched == set(stored)  # every response, and nothing else
    for record in records:
        if record["status"] is None:
            continue
        response = stored[record["url"]]
        assert response.status == record["status"]
        route = bodies.get(record["url"])
        if record["status"] == 200 and isinstance(route, Response) and not response.truncated:
            assert response.body == route.body  # exact (decoded) bytes
    pdf = stored[server.url("/doc.pdf")]
    assert pdf.truncated and pdf.body == b""  # not downloaded: marked truncated
    assert stored[server.url("/moved")].status == 301
    assert stored[server.url("/missing")].status == 404


def test_a_resumed_state_crawl_appends_to_the_same_archive(tmp_path: Path) -> None:
    out, warc, db = tmp_path / "out.jsonl", tmp_path / "a.warc.gz", tmp_path / "c.db"
    with serve_site(site()) as server:
        args = [server.url("/p/0"), "-q", "-o", str(out), "--warc", str(warc),
                "--state", str(db), "-w", "2", "--rate", "40"]  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "trio_crawl", *args],
                                stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if out.exists() and out.read_text().count("\n") >= 10:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        done = run(*args)
        assert done.returncode == 0, done.stderr
    urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    stored = read_warc_responses(str(warc))
    assert set(urls) <= set(stored) | {u for u in urls if u.endswith("/missing")}
    assert len(set(urls)) == PAGES + 3  # /p/*, /moved, /missing, /doc.pdf
