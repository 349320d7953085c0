"""Tests of the benchmark harness itself (not of either crawler).

Run with ``python benchmarks/bench.py test`` (all three harness test files); the
project's suite runs them too, in a child pytest (``tests/test_benchmarks.py``), so that
the folder's module names stay out of its path. Sites are tiny; the server test binds
127.0.0.1 only, on a free port, and every subprocess is time-limited.
"""

from __future__ import annotations

import http.client
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mirror import Result, compare, known_spellings
from exactness import Fetches, read_scrapy, read_trio_crawl, verify
from generate_site import (
    SiteParams,
    ensure_site,
    plan_site,
    read_expected,
    resolve,
)
from measure import process_tree, run_measured
from servers import open_server

BASE = "http://127.0.0.1:8000/"


def test_plan_is_deterministic_and_counts_match() -> None:
    params = SiteParams(pages=300, seed=7)
    a, b = plan_site(params), plan_site(params)
    assert a.hrefs == b.hrefs
    assert a.expected == b.expected
    assert plan_site(SiteParams(pages=300, seed=8)).hrefs != a.hrefs
    variants = sorted(u for u in a.expected if "?" in u)
    assert len(variants) == 3 * 3  # 1 % of 300 pages, three variants each
    assert len(a.expected) == 300 + len(variants)
    assert all(len(h) == 30 for h in a.hrefs)


def test_links_include_every_kind_of_duplicate_and_externals() -> None:
    plan = plan_site(SiteParams(pages=2000))
    hrefs = [h for page in plan.hrefs for h in page]
    assert sum(h == "#top" for h in hrefs) == 2000
    assert any("#s1" in h for h in hrefs)
    assert any(h.startswith("http://external.invalid/") for h in hrefs)
    assert any(h.startswith("../p/") for h in hrefs)
    # Each query variant is linked at least twice (an exact duplicate).
    targets = Counter(
        t for t in (resolve("/p/1.html", h) for h in hrefs if "?" in h) if t is not None
    )
    assert set(targets) == {u for u in plan.expected if "?" in u}
    assert min(targets.values()) >= 2


def test_resolve_drops_fragments_and_other_hosts() -> None:
    assert resolve("/p/3.html?x=1", "4.html#s1") == "/p/4.html"
    assert resolve("/p/3.html", "../") == "/"
    assert resolve("/", "p/9.html?a=1&b=2") == "/p/9.html?a=1&b=2"
    assert resolve("/p/3.html", "#top") == "/p/3.html"
    assert resolve("/p/3.html", "http://external.invalid/p/1.html") is None


def test_ensure_site_writes_once_then_uses_cache(tmp_path: Path) -> None:
    params = SiteParams(pages=50, page_bytes=2000)
    site, generated = ensure_site(params, tmp_path)
    assert generated
    assert ensure_site(params, tmp_path) == (site, False)
    expected = read_expected(site)
    assert set(expected) == plan_site(params).expected
    page = (site / "p" / "7.html").read_bytes()
    assert 2000 <= len(page) < 3500
    assert page.count(b"<a href=") == 30
    assert (site / "robots.txt").read_text() == "User-agent: *\nDisallow:\n"


def test_verify_flags_missing_repeated_unexpected_and_errors() -> None:
    expected = ["/", "/p/1.html", "/p/1.html?x=1"]
    good = Fetches([BASE, BASE + "p/1.html#s1", BASE + "p/1.html?x=1"], [])
    assert verify(good, expected, BASE).exact
    bad = Fetches(
        [BASE, BASE + "p/1.html", BASE + "p/1.html#top", "http://127.0.0.1:9/p/1.html?x=1"],
        ["x: timeout"],
    )
    v = verify(bad, expected, BASE)
    assert v.missing == ["/p/1.html?x=1"]
    assert v.duplicates == ["/p/1.html"]
    assert v.unexpected == ["<other host> http://127.0.0.1:9/p/1.html?x=1"]
    assert v.errors == 1
    assert not v.exact


def test_output_readers(tmp_path: Path) -> None:
    trio = tmp_path / "t.jsonl"
    trio.write_text(
        '{"url": "http://h/", "status": 200, "error": null}\n'
        '{"url": "http://h/a", "status": null, "error": {"kind": "timeout"}}\n'
        '{"url": "http://h/b", "status": 404, "error": {"kind": "http_4xx"}}\n'
    )
    assert read_trio_crawl(trio) == Fetches(
        ["http://h/", "http://h/b"], ["http://h/a: timeout", "http://h/b: http_4xx"]
    )
    scrapy = tmp_path / "s.jsonl"
    scrapy.write_text(
        '{"url": "http://h/", "status": 200}\n'
        '{"url": "http://h/a", "status": null, "error": "TimeoutError()"}\n'
    )
    assert read_scrapy(scrapy) == Fetches(["http://h/"], ["http://h/a: TimeoutError()"])
    assert read_scrapy(tmp_path / "absent.jsonl") == Fetches([], [])


def test_run_measured_reports_exit_rss_and_kills_on_timeout(tmp_path: Path) -> None:
    ok = run_measured(
        [sys.executable, "-c", "b = bytearray(60 * 2**20); print('hi')"],
        timeout=30,
        log_path=tmp_path / "ok.log",
    )
    assert ok.exit_code == 0 and not ok.timed_out
    assert ok.peak_rss_mb >= 60
    assert (tmp_path / "ok.log").read_text() == "hi\n"
    start = time.monotonic()
    slow = run_measured(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        timeout=0.5,
        log_path=tmp_path / "slow.log",
    )
    assert slow.timed_out and slow.exit_code is None
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("kind", ["python", "nginx"])
def test_server_serves_site_with_query_variants(tmp_path: Path, kind: str) -> None:
    if kind == "nginx":
        from servers import find_nginx

        if find_nginx() is None:
            pytest.skip("nginx not installed")
    site, _ = ensure_site(SiteParams(pages=20, page_bytes=1000), tmp_path)
    with open_server(site, kind) as server:
        assert server.kind == kind
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        bodies = []
        for target in ("/", "/p/3.html", "/p/3.html?x=1", "/robots.txt"):
            conn.request("GET", target)  # one keep-alive connection for all four
            response = conn.getresponse()
            assert response.status == 200, target
            bodies.append(response.read())
        conn.request("GET", "/p/999.html")
        missing = conn.getresponse()
        missing.read()
        assert missing.status == 404
        conn.close()
        assert bodies[1] == bodies[2]  # a query variant serves its base page
        assert b"Page 0" in bodies[0]


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead and not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize("kind", ["python", "nginx"])
def test_a_harness_ended_by_sigterm_stops_its_crawler_and_its_server(
    tmp_path: Path, kind: str
) -> None:
    """``bench.py run`` (a crawl held at ``--rate 2``: 30 s for its 60
    pages), SIGTERMed while its crawler runs: it exits 143 and leaves none
    of its children running. They
    run in sessions of their own, so the signal reaches the harness alone,
    and SIGTERM used to end it without stopping them."""
    from servers import find_nginx

    if kind == "nginx" and find_nginx() is None:
        pytest.skip("nginx not installed")
    here = Path(__file__).resolve().parent
    command = [
        sys.executable, str(here / "bench.py"), "run", "--pages", "60", "--tools", "trio-crawl",
        "--server", kind, "--cache-dir", str(tmp_path / "sites"), "--source-start",
        "--trio-crawl-cmd", f"{sys.executable} -m trio_crawl", "--trio-crawl-args=--rate 2",
    ]  # fmt: skip
    server_word = "nginx" if kind == "nginx" else "pyserver.py"
    log = tmp_path / "harness.log"
    with log.open("wb") as out:
        harness = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while True:  # until the crawler and the server both run
            children = process_tree(harness.pid) - {harness.pid}
            lines = [_command_line(pid) for pid in children]
            if any("trio_crawl" in c for c in lines) and any(server_word in c for c in lines):
                break
            assert harness.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        harness.send_signal(signal.SIGTERM)
        harness.wait(timeout=30)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    assert harness.returncode == 143, log.read_text()
    # A SIGKILLed process takes a moment to go (longer on a loaded machine):
    # what the harness killed must be gone within seconds, long before the
    # crawl would have ended by itself.
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert {pid: _command_line(pid) for pid in children if _alive(pid)} == {}


def test_mirror_comparison_counts_pages_that_differ_only_by_link_spelling(tmp_path: Path) -> None:
    """bench_mirror's count of pages the two converters agree on: byte for
    byte, then with a self link plus fragment and a ``?`` in a saved file's
    name written one way; a page whose links go elsewhere still differs."""
    pages = {
        "same.html": (b'<a href="x.html">', b'<a href="x.html">'),
        "p/own.html": (b'<a href="own.html#top">', b'<a href="#top">'),
        "query.html": (b'<a href="q.html?x=1">', b'<a href="q.html%3Fx=1">'),
        "p/q.html?a=1&b=2": (b'<a href="q.html%3Fa=1&amp;b=2#s">', b'<a href="#s">'),
        "kept.html": (b'<a href="kept.html#s">', b'<a href="kept.html#s">'),
        "other.html": (b'<a href="a.html#s">', b'<a href="#s">'),
        "site.html": (b'<a href="http://h/a?b">', b'<a href="http://h/a%3Fb">'),
    }
    trees = []
    for side in (0, 1):
        files = {}
        for name, contents in pages.items():
            path = tmp_path / str(side) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(contents[side])
            files[name] = path
        trees.append(Result(["wget", "trio-crawl"][side], 0.0, 0.0, 0, files))
    summary, *_ = compare(*trees)
    assert "byte-identical 2, identical once two link spellings are written one way 5" in summary
    assert "still different 2" in summary
    assert known_spellings("a/b.html", b'src="b.html#x"') == b'src="#x"'
