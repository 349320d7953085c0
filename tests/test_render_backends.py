"""``--render`` with the other frontiers, through the command line, against
the real Chromium (skipped, with the reason, where there is none):
``--state`` killed with SIGKILL mid-crawl and resumed, and ``--redis`` with
two workers. Every link past the start page is written by a script, so a
page that was not rendered finds nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.core.browser import find_browser
from trio_crawl.errors import ConfigError
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site

import redis_fixture
from redis_fixture import RedisServer

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

TIMEOUT = 120
PAGES = 16


def scripted(*hrefs: str) -> Response:
    """A page whose links exist only once its script has run."""
    code = "".join(
        f"{{const a = document.createElement('a'); a.href = '{h}'; document.body.append(a);}}"
        for h in hrefs
    )
    return Response(
        body=f"<!doctype html><html><body><script>{code}</script></body></html>".encode()
    )


#: The start page's script links to PAGES pages, each of whose links to a leaf.
SITE = Site(
    {
        "/": scripted(*(f"/p/{i}" for i in range(PAGES))),
        **{f"/p/{i}": scripted(f"/leaf/{i}") for i in range(PAGES)},
        **{f"/leaf/{i}": scripted() for i in range(PAGES)},
    }
)
EXPECTED = {"/", *(f"/p/{i}" for i in range(PAGES)), *(f"/leaf/{i}" for i in range(PAGES))}


def command(url: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "trio_crawl", url, "--render", "--browser", BROWSER,
        "--render-wait", "1s", "--workers", "4", *args,
    ]  # fmt: skip


def records(path: Path) -> list[dict[str, Any]]:
    """The records of an output file (a torn last line, left by a kill, skipped)."""
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


@pytest.mark.timeout(300)
def test_render_with_state_survives_sigkill_and_resumes(tmp_path: Path) -> None:
    state, out = tmp_path / "c.db", tmp_path / "c.jsonl"
    with serve_site(SITE) as server:
        url = server.url("/")
        proc = subprocess.Popen(
            command(url, "--state", str(state), "-o", str(out)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            if len(records(out)) >= 6:  # some rendered pages recorded, most not
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        before = {r["url"] for r in records(out)}
        assert 0 < len(before) < len(EXPECTED)  # killed mid-crawl
        resumed = subprocess.run(
            command(url, "--state", str(state), "-o", str(out)),
            capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
    got = records(out)
    assert {r["url"].removeprefix(server.base_url) for r in got} == EXPECTED
    assert all(r["status"] == 200 and r.get("rendered") is True for r in got)
    # A page recorded before the kill is not fetched again by the resume.
    for u in before:
        assert sum(1 for r in got if r["url"] == u) == 1 or any(
            r.get("refetched") for r in got if r["url"] == u
        ), u


@pytest.mark.timeout(300)
def test_render_with_redis_workers_finds_every_script_link(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    pytest.importorskip("coredis", reason="coredis is not installed (trio-crawl[redis])")
    with serve_site(SITE) as server:
        url = server.url("/")
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = ["--redis", redis_server.url, "--crawl-id", crawl_id]
        processes = [
            subprocess.Popen(
                command(url, *common, "-o", str(out)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            for out in outputs
        ]
        for proc in processes:
            _, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, err
    got = [r for out in outputs for r in records(out)]
    assert {r["url"].removeprefix(server.base_url) for r in got} == EXPECTED
    assert all(r.get("rendered") is True for r in got)
