"""Small traps a new user fell into (issue #25, item 4), each through the real
command line against a server on 127.0.0.1: a finished ``--state`` crawl run
again, ``--max-pages 0``, ``-H Authorization`` beside ``--user``, ``attempts``
of a refused connection, and ``--status`` after a stop."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import small_site
from test_cli_exits import dead_port, one_error_line

from trio_crawl import ConfigError, CrawlConfig
from trio_crawl.sites.server import serve_site

from cli_helpers import TIMEOUT, records_in, run_cli


def test_a_finished_state_crawl_says_so_and_leaves_the_output(tmp_path: Path) -> None:
    out, db = tmp_path / "out.jsonl", tmp_path / "crawl.db"
    with serve_site(small_site(5)) as server:
        first = run_cli(server.base_url + "/", "--state", str(db), "-o", str(out), "-q")
        before = out.read_bytes()
        asked = len(server.targets())
        again = run_cli(server.base_url + "/", "--state", str(db), "-o", str(out))
        bare = run_cli("--state", str(db), "-o", str(out))  # start URLs from the state
        assert len(server.targets()) == asked  # nothing fetched, not even robots.txt
    assert first.returncode == 0, first.stderr
    assert len(records_in(before.decode())) == 6
    for result in (again, bare):
        assert result.returncode == 0, result.stderr
        assert result.stderr == (
            f"trio-crawl: the crawl in {db} is complete (6 URLs done, their records in {out}): "
            f"nothing left to fetch. Report on it: trio-crawl report {out} -o report.html; "
            "to crawl it again, asking only for what changed, add --recrawl (or remove or rename "
            "the state file to start afresh)\n"
        )
    assert out.read_bytes() == before


def test_max_pages_0_is_refused() -> None:
    result = run_cli("http://127.0.0.1:9/", "--max-pages", "0")
    assert result.returncode == 2
    assert one_error_line(result) == (
        "trio-crawl: error: --max-pages must be at least 1 (got 0); leave it out for no limit"
    )


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--user", "u", "--password", "p"], "--user"),
        (["--netrc-file", os.devnull], "--netrc-file"),
    ],
)
def test_an_authorization_header_beside_basic_auth_is_refused(extra: list[str], flag: str) -> None:
    result = run_cli("http://127.0.0.1:9/", "-H", "authorization: Bearer secret", *extra)
    assert result.returncode == 2
    line = one_error_line(result)
    assert line == (
        f"trio-crawl: error: -H 'Authorization: ...' and {flag} both give the credentials: "
        "keep one of them"
    )
    assert "secret" not in result.stderr


def test_the_library_refuses_both_too() -> None:
    with pytest.raises(ConfigError, match=r"^headers= has an Authorization header and auth="):
        CrawlConfig.from_options(
            start_urls=["http://h/"], headers=[("Authorization", "Bearer x")], auth=("u", "p")
        )


@pytest.mark.parametrize(("options", "attempts"), [([], 1), (["--ignore-robots"], 2)])
def test_attempts_count_the_connections_tried(options: list[str], attempts: int) -> None:
    """A refused robots.txt request is the one attempt its host's page had;
    without robots.txt the page's own attempts (a retry) are counted."""
    result = run_cli(
        f"http://127.0.0.1:{dead_port()}/", "-o", "-", "-q", "--retries", "1", *options
    )
    assert result.returncode == 4, result.stderr
    (record,) = records_in(result.stdout)
    assert record["error"]["kind"] == "connect"
    assert record["attempts"] == attempts


def test_status_after_a_stop_counts_the_records_written(tmp_path: Path) -> None:
    out, db = tmp_path / "out.jsonl", tmp_path / "crawl.db"
    with serve_site(small_site(n=200, delay=0.2)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_crawl", server.base_url + "/", "-w", "8",
             "-o", str(out), "--state", str(db), "--grace", "30", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:  # wait for records (a bounded poll of a file)
            if out.exists() and out.read_text().count("\n") >= 10:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, stderr
    written = len(records_in(out.read_text()))
    status = run_cli("--state", str(db), "--status")
    assert status.returncode == 0, status.stderr
    match = re.search(r"done (\d+)\s+queued (\d+)\s+in flight at stop (\d+)", status.stdout)
    assert match is not None, status.stdout
    assert int(match[1]) == written
    assert int(match[3]) == 0  # the in-flight pages finished within the grace
