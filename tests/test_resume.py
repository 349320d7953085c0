"""--state: interrupt crawls at random moments (SIGINT and SIGKILL), resume, and
check that the union of the output is exactly one uninterrupted crawl.

Real subprocesses against a server on 127.0.0.1; every subprocess has a
timeout. 40 interruption points run four at a time (each is two CLI
starts: at about 0.5 s of CPU a start, the test's main cost).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from trio_crawl.frontiers.sqlite import CrawlState
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

from cli_helpers import records_in

PAGES = 120
TIMEOUT = 60


def link_site() -> Site:
    rng = random.Random(7)
    routes: dict[str, Response] = {}
    for i in range(PAGES):
        links = {f"/p/{(i + 1) % PAGES}", *(f"/p/{rng.randrange(PAGES)}" for _ in range(6))}
        links |= {f"/p/{rng.randrange(PAGES)}#frag"}
        routes[f"/p/{i}"] = Response(body=page(*sorted(links)).body, delay=0.01)
    routes["/robots.txt"] = Response(body=b"User-agent: *\nDisallow:\n", content_type="text/plain")
    return Site(routes)


def crawl_command(base: str, state: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "trio_crawl", base + "/p/0", "--state", str(state),
        "-o", str(out), "-q", "-w", "4", "--fetcher", "httpx", "--max-queue", "16",
        "--depth-updates", str(updates_of(out)), *extra,
    ]  # fmt: skip


def updates_of(out: Path) -> Path:
    return out.with_suffix(".updates.jsonl")


def assert_updates_correct_records(out: Path) -> None:
    """Every line of the --depth-updates file is whole and corrects a record
    of the output (appended to on each resume, a torn line cut first)."""
    recorded = {r["url"] for r in records(out)}
    for line in updates_of(out).read_text().splitlines():
        update = json.loads(line)
        assert update["depth_update"] is True and update["url"] in recorded, update


def records(out: Path) -> list[dict[str, object]]:
    return records_in(out.read_text())


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with serve_site(link_site()) as running:
        yield running


def test_state_crawl_matches_a_plain_crawl(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain = tmp_path / "plain.jsonl"
    subprocess.run(
        [sys.executable, "-m", "trio_crawl", server.base_url + "/p/0", "-o", str(plain), "-q"],
        check=True, timeout=TIMEOUT,
    )  # fmt: skip
    stateful = tmp_path / "state.jsonl"
    subprocess.run(
        crawl_command(server.base_url, tmp_path / "c.db", stateful), check=True, timeout=TIMEOUT
    )
    assert sorted(r["url"] for r in records(plain)) == sorted(r["url"] for r in records(stateful))
    assert len(records(stateful)) == PAGES
    # Run again: everything is done, nothing is fetched, nothing is written.
    before = len(server.log)
    subprocess.run(
        crawl_command(server.base_url, tmp_path / "c.db", stateful), check=True, timeout=TIMEOUT
    )
    assert len(records(stateful)) == PAGES
    assert [r.target for r in server.log[before:] if r.target != "/robots.txt"] == []
    status = subprocess.run(
        [sys.executable, "-m", "trio_crawl", "--state", str(tmp_path / "c.db"), "--status"],
        capture_output=True, text=True, timeout=TIMEOUT, check=True,
    )  # fmt: skip
    assert f"done {PAGES:,}  queued 0" in status.stdout


def interrupt_and_resume(base: str, workdir: Path, seed: int) -> tuple[list[str], int, str]:
    """Crawl, kill at a random moment, resume until done; return the recorded
    URLs in order, whether the interruption landed mid-crawl, and the signal."""
    rng = random.Random(seed)
    sig = signal.SIGKILL if seed % 2 else signal.SIGINT
    state, out = workdir / f"{seed}.db", workdir / f"{seed}.jsonl"
    proc = subprocess.Popen(crawl_command(base, state, out), stderr=subprocess.DEVNULL)
    # Interrupt once a random number of records is out: mid-crawl whatever the
    # machine's speed (the file is polled; the crawl takes a second or so).
    target = rng.randrange(1, PAGES - 10)
    deadline = time.monotonic() + TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= target:
            break
        time.sleep(0.002)
    proc.send_signal(sig)
    proc.wait(timeout=TIMEOUT)
    written = len(out.read_text().splitlines()) if out.exists() else 0
    landed = int(0 < written < PAGES)  # killed mid-crawl, with part of the output written
    # One resume must finish the crawl: nothing interrupts it.
    result = subprocess.run(
        crawl_command(base, state, out), timeout=TIMEOUT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    with CrawlState.open(state, create=False) as stored:
        progress = stored.progress()
    assert progress["done"] == PAGES and progress["total"] == PAGES, progress
    assert_updates_correct_records(out)
    return [str(r["url"]) for r in records(out)], landed, sig.name


@pytest.mark.timeout(600)  # about 20 s on an idle 2-core machine; more when it is busy
def test_interrupted_crawls_resume_exactly(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    expected = sorted(f"{server.base_url}/p/{i}" for i in range(PAGES))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda s: interrupt_and_resume(server.base_url, tmp_path, s), range(40))
        )
    landed = Counter()
    for urls, hit, sig in results:
        assert sorted(set(urls)) == expected  # nothing lost
        assert len(urls) == len(set(urls)), [u for u, n in Counter(urls).items() if n > 1]
        landed[sig] += hit
    # The interruptions must land mid-crawl for the test to mean anything
    # (17 of each signal's 20: the five in six asked of 60 before).
    assert landed["SIGINT"] >= 17 and landed["SIGKILL"] >= 17, landed


def test_torn_last_line_is_repaired_and_recorded_urls_are_not_refetched(
    server,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    state, out = tmp_path / "t.db", tmp_path / "t.jsonl"
    subprocess.run(
        crawl_command(server.base_url, state, out, "--max-pages", "30"),
        check=True, timeout=TIMEOUT,
    )  # fmt: skip
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines) + "\n" + lines[-1][:25])  # a kill mid-write
    with updates_of(out).open("a") as updates:
        updates.write('{"url": "http://127.0.0.1:1/p/')  # of either file
    before = len(server.log)
    subprocess.run(
        crawl_command(server.base_url, state, out, "--force"), check=True, timeout=TIMEOUT
    )
    urls = [str(r["url"]) for r in records(out)]
    assert len(urls) == len(set(urls)) == PAGES
    assert_updates_correct_records(out)
    first_run = {urlsplit(u).path for u in urls[:30]}
    assert len(first_run) == 30
    assert not first_run & {t.target for t in server.log[before:]}
