"""Tests of realsite.py's helpers (not of any crawler): the wget log reader, URL keys,
the exact-once verdict, the expected-set walk and the peak-RSS correction
(measure.py's ``sample_peak``).

Run with ``python benchmarks/bench.py test`` (see test_bench.py); no server, no network.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import run_measured
from realsite import _walk, key, read_wget, verify

ORIGIN = "http://127.0.0.1:8000"

WGET_LOG = f"""\
2026-11-23 11:25:56 URL:{ORIGIN}/ [13011/13011] -> "d/127.0.0.1:8000/index.html.tmp" [1]
2026-11-23 11:25:56 URL:{ORIGIN}/robots.txt [23/23] -> "d/127.0.0.1:8000/robots.txt.tmp" [1]
2026-11-23 11:25:56 URL:{ORIGIN}/a%7Eb.html [94311/94311] -> "d/a~b.html.tmp" [1]
{ORIGIN}/whatsnew/changelog.html:
2026-11-23 11:26:03 ERROR 404: Not Found.
FINISHED --2026-11-23 11:26:03--
"""


def test_read_wget(tmp_path: Path) -> None:
    log = tmp_path / "wget.log"
    log.write_text(WGET_LOG)
    assert read_wget(log) == [
        (f"{ORIGIN}/", 200),
        (f"{ORIGIN}/a%7Eb.html", 200),
        (f"{ORIGIN}/whatsnew/changelog.html", 404),
    ]


def test_key_is_canonical_path_and_query() -> None:
    assert key(f"{ORIGIN}/a%7Eb.html#x", ORIGIN) == "/a~b.html"
    assert key(f"{ORIGIN}/p?q=1", ORIGIN) == "/p?q=1"
    assert key("http://other:1/", ORIGIN).startswith("<other origin>")


def test_verify() -> None:
    expected = {"/": 200, "/a.html": 200, "/gone.html": 404}
    answers = [(f"{ORIGIN}/", 200), (f"{ORIGIN}/a.html", 200), (f"{ORIGIN}/gone.html", 404)]
    assert verify(answers, expected, ORIGIN).exact
    verdict = verify([*answers[:2], (f"{ORIGIN}/a.html#f", 500)], expected, ORIGIN)
    assert verdict.missing == ["/gone.html"]
    assert verdict.repeated == ["/a.html"]
    assert verdict.wrong_status == ["/a.html 500 (expected 200)"]


def test_walk(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#x">p</a><a href="missing.html">m</a><a href="http://x/">x</a>'
    )
    (tmp_path / "sub" / "page.html").write_text(
        '<base href="/"><a href="index.html">i</a><a href="f.py">f</a>'
    )
    (tmp_path / "f.py").write_text("<a href='not-parsed.html'>")
    assert _walk(tmp_path) == {
        "/": 200,
        "/sub/page.html": 200,
        "/missing.html": 404,
        "/index.html": 200,
        "/f.py": 200,
    }


def test_sample_peak_reports_the_childs_own_peak(tmp_path: Path) -> None:
    ballast = bytearray(150 * 1024 * 1024)  # the harness is now bigger than its child
    ballast[::4096] = b"x" * len(ballast[::4096])
    small = run_measured(
        [sys.executable, "-c", "import time; time.sleep(0.3)"],
        timeout=30,
        log_path=tmp_path / "small.log",
        sample_peak=True,
    )
    big = run_measured(
        [sys.executable, "-c", "import time; b = b'x' * (200 << 20); time.sleep(0.3)"],
        timeout=30,
        log_path=tmp_path / "big.log",
        sample_peak=True,
    )
    del ballast
    assert small.exit_code == 0 and big.exit_code == 0
    assert small.peak_rss_mb < 60, small  # a bare interpreter, not the 150 MB harness
    assert 200 < big.peak_rss_mb < 300, big
