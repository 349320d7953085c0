"""Tests of the recrawl benchmark's harness (recrawl_site.py, recrawl_server.py,
recrawl.py's verdicts), not of any crawler.

Run with ``python benchmarks/bench.py test``. The server tests need nginx, the run
test wget2 too (each skipped with the reason without them); they bind 127.77.0.x
addresses on a free port.
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loopback_hosts import host_addresses
from recrawl import Context, judge_trio_crawl, payload_digest
from recrawl_server import open_recrawl_nginx, parse_line
from recrawl_site import GROUPS, RecrawlParams, _depths, apply_changes, plan, write_first
from servers import find_nginx, free_port

HERE = Path(__file__).resolve().parent
needs_nginx = pytest.mark.skipif(find_nginx() is None, reason="needs nginx")


def test_the_plan_has_the_issue_s_mix_of_changes_and_validators() -> None:
    site = plan(RecrawlParams(pages=2000))
    assert len(site.changed) == 200 and len(site.removed) == 40 and len(site.new) == 40
    assert not site.changed & site.removed and 0 not in site.removed
    groups = Counter(p.group for p in site.first.values())
    assert 0.35 < groups["e"] / 2000 < 0.45 and 0.35 < groups["m"] / 2000 < 0.45
    assert 0.15 < groups["n"] / 2000 < 0.25 and set(groups) == set(GROUPS)
    # Every first-version page is reachable; new pages only from changed pages.
    assert site.first_reachable() == set(site.first)
    for number in site.new:
        linkers = {p.number for p in site.second.values() if number in p.links}
        assert linkers and linkers <= site.changed
    # Half the new pages are behind a deep changed page whose shortest path is unchanged.
    depth, parent = _depths(site.first)
    deepest = max(depth.values())
    for number in site.deep_new:
        (linker,) = {p.number for p in site.second.values() if number in p.links}
        assert depth[linker] == deepest
        up = parent[linker]
        while up != -1:
            assert up not in site.changed and up not in site.removed
            up = parent[up]
    outcomes = site.outcomes()
    kinds = Counter(outcomes.values())
    assert kinds["new"] == 40 and kinds["gone"] + kinds["unlinked"] >= 40
    assert all(outcomes[n] in ("gone", "unlinked") for n in site.removed)
    assert plan(RecrawlParams(pages=2000)).changed == site.changed  # deterministic


def test_changes_on_disk_keep_the_mtimes_of_unchanged_files(tmp_path: Path) -> None:
    site = plan(RecrawlParams(pages=100))
    addresses = host_addresses(4)
    write_first(site, tmp_path, addresses, 8080)

    def stat(n: int) -> tuple[float, bytes] | None:
        page = site.first.get(n) or site.second[n]
        path = tmp_path / str(page.host) / page.group / f"{n}.html"
        return (path.stat().st_mtime, path.read_bytes()) if path.exists() else None

    before = {n: stat(n) for n in site.first}
    apply_changes(site, tmp_path, addresses, 8080)
    for n in site.first:
        after = stat(n)
        if n in site.removed:
            assert after is None
        elif n in site.changed:
            assert after is not None and before[n] is not None
            assert after[0] > before[n][0] and after[1] != before[n][1]  # type: ignore[index]
        else:
            assert after == before[n]
    assert all(stat(n) is not None for n in site.new)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    host, _, rest = url.removeprefix("http://").partition("/")
    address, port = host.split(":")
    conn = http.client.HTTPConnection(address, int(port), timeout=5)
    try:
        conn.request("GET", "/" + rest, headers=headers or {})
        response = conn.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


@needs_nginx
def test_the_server_sends_the_validator_mix_and_one_host_ignores_them(tmp_path: Path) -> None:
    site = plan(RecrawlParams(pages=100))
    addresses = host_addresses(4)
    port = free_port(addresses[0])
    write_first(site, tmp_path, addresses, port)
    with open_recrawl_nginx(tmp_path, 4, port) as server:
        mark = server.mark()
        for host in range(4):
            for group in GROUPS:
                page = next(p for p in site.first.values() if (p.host, p.group) == (host, group))
                url = f"http://{addresses[host]}:{port}{page.path}"
                status, headers = _get(url)
                assert status == 200
                assert ("etag" in headers) == (group == "e"), (url, headers)
                assert ("last-modified" in headers) == (group == "m"), (url, headers)
                conditional = {}
                if "etag" in headers:
                    conditional["If-None-Match"] = headers["etag"]
                if "last-modified" in headers:
                    conditional["If-Modified-Since"] = headers["last-modified"]
                expected = 304 if conditional and host != 3 else 200
                assert _get(url, conditional)[0] == expected, (url, conditional)
                # A validator the server did not send is not answered with a 304.
                since = {"If-Modified-Since": "Sat, 28 Nov 2026 00:00:00 GMT"}
                assert _get(url, since)[0] == 200
        # Not the start-up probes' robots.txt: nginx may log the proxied host's
        # probe a moment after the probe read its answer, so after ``mark``.
        lines = [x for x in server.lines_since(mark) if not x.url.endswith("/robots.txt")]
        assert len(lines) == 36 and {line.status for line in lines} == {200, 304}
        assert all(line.bytes_sent > line.body_bytes for line in lines)
        assert sum(line.status == 304 and line.body_bytes == 0 for line in lines) == 6


def test_log_lines_name_the_listening_host_not_the_host_header() -> None:
    line = parse_line("127.77.0.2:8080\tGET\t/e/1.html?x=1\t304\t180\t0")
    assert line.url == "http://127.77.0.2:8080/e/1.html?x=1" and line.status == 304


def test_the_trio_crawl_verdict_counts_changes_duplicates_and_misses(tmp_path: Path) -> None:
    site = plan(RecrawlParams(pages=300))
    server: Any = SimpleNamespace(addresses=host_addresses(4), port=8080)
    ctx = Context(site, server, tmp_path, 1, [], "", 1.0)
    outcomes = site.outcomes()
    records: list[dict[str, Any]] = [{"url": ctx.url(n), "change": k} for n, k in outcomes.items()]
    for number, record in zip(outcomes, records, strict=True):
        if record["change"] not in ("gone", "unlinked"):
            body = site.body(number, site.version(number), server.addresses, 8080)
            record["digest"] = payload_digest(body)
    out = tmp_path / "trio-crawl" / "second.jsonl"
    out.parent.mkdir()

    def judge(rows: list[dict[str, Any]]) -> Any:
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return judge_trio_crawl(ctx, outcomes)

    exact = judge(records)
    kinds = Counter(outcomes.values())
    assert (exact.changed, exact.new, exact.removed) == (kinds["changed"], kinds["new"], 6)
    assert (exact.duplicates, exact.missing, exact.wrong) == (0, 0, 0)
    changed = next(r for r in records if r["change"] == "changed")
    worse = [r for r in records if r is not changed] + [records[0]]
    worse.append({**changed, "change": "unchanged"})
    found = judge(worse)
    assert (found.changed, found.duplicates, found.wrong) == (kinds["changed"] - 1, 1, 1)
    assert judge(records[1:]).missing == 1
    # A record that says "changed" but carries the old text's digest is wrong.
    number = next(n for n, k in outcomes.items() if k == "changed")
    old = payload_digest(site.body(number, 1, server.addresses, 8080))
    stale = [{**r, "digest": old} if r["url"] == ctx.url(number) else r for r in records]
    found = judge(stale)
    assert (found.changed, found.wrong) == (kinds["changed"] - 1, 1)
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"


@needs_nginx
@pytest.mark.skipif(shutil.which("wget2") is None, reason="needs wget2")
def test_a_small_run_judges_wget2_exact_and_goes_on_past_a_failed_tool(tmp_path: Path) -> None:
    """wget2 -N finds every change here (it re-asks every page); trio-crawl's row is
    judged, or FAILED when its --recrawl is missing: the run still prints the others."""
    done = subprocess.run(
        [sys.executable, str(HERE / "recrawl.py"), "--pages", "100", "--source-start",
         "--tools", "trio-crawl,wget2", "--keep-output", str(tmp_path)],
        capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    rows = {tuple(line.split()[:2]): line for line in done.stdout.splitlines() if "  " in line}
    assert rows[("wget2", "second")].endswith(" exact"), done.stdout + done.stderr
    assert "10/10" in rows[("wget2", "second")] and "2/2" in rows[("wget2", "second")]
    trio = rows[("trio-crawl", "second")]
    assert trio.endswith(" exact") or "FAILED" in trio, done.stdout
    assert done.returncode == (1 if "FAILED" in trio else 0)
    assert "ideal recrawl:" in done.stdout
