"""Issue #36 cleanups: options that contradict each other are refused
(one line, exit 2, naming both), and start URLs on more hosts than
``--max-hosts`` are said once. Every site is on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import small_site
from test_cli_exits import dead_port, one_error_line

from trio_crawl import ConfigError, CrawlConfig, Pool
from trio_crawl.sites.server import serve_site

from cli_helpers import records_in, run_cli

URL = "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--netrc", "--user", "a", "--password", "b"],
            "--user and --netrc both give the credentials: keep one of them",
        ),
        (
            ["-w", "4", "--max-workers", "8"],
            "--workers pins the number of workers, --max-workers bounds a self-sized pool: "
            "give one of them",
        ),
        (
            ["--sitemaps", "--ignore-robots"],
            "--sitemaps reads the sitemaps robots.txt lists, and --ignore-robots fetches no "
            "robots.txt: give one of them",
        ),
    ],
)
def test_contradicting_options_are_refused(args: list[str], message: str) -> None:
    with serve_site(small_site(3)) as server:
        result = run_cli(server.base_url + "/", *args, "-o", "-")
        assert server.targets() == []
    assert result.returncode == 2
    assert one_error_line(result) == f"trio-crawl: error: {message}"
    assert result.stdout == ""


def test_netrc_file_and_user_are_refused(tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login u password p\n")
    result = run_cli(URL, "--netrc-file", str(netrc), "--user", "a", "--password", "b")
    assert result.returncode == 2
    assert one_error_line(result) == (
        "trio-crawl: error: --user and --netrc-file both give the credentials: keep one of them"
    )


def test_the_library_refuses_the_same_contradictions() -> None:
    with pytest.raises(ConfigError, match=r"^workers= pins the number of workers, max_workers="):
        Pool(workers=4, max_workers=8)
    with pytest.raises(ConfigError, match=r"^workers= 9 is more than max_workers= 8$"):
        Pool(workers=9, max_workers=8)
    with pytest.raises(ConfigError, match=r"^sitemaps=True reads the sitemaps robots.txt lists"):
        CrawlConfig.from_options(URL, sitemaps=True, ignore_robots=True)
    assert Pool(workers=4).workers == 4 and Pool(max_workers=8).max_workers == 8


def test_start_urls_on_more_hosts_than_max_hosts_are_said_once(tmp_path: Path) -> None:
    """Start URLs are always crawled (docs/manual/scope.md): all three are,
    and a warning at the start says so, naming both numbers."""
    with serve_site(small_site(3)) as server:
        seeds = tmp_path / "seeds.txt"
        starts = [server.base_url + "/", f"http://127.0.0.1:{dead_port()}/"]
        seeds.write_text("\n".join(starts) + "\n")
        out = tmp_path / "out.jsonl"
        extra = f"http://127.0.0.1:{dead_port()}/"
        result = run_cli(
            extra, "--seeds", str(seeds), "--max-hosts", "2", "-o", str(out), "-q",
            "--retries", "0",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "--max-hosts" in line]
    assert warnings == [
        "trio-crawl: warning: --max-hosts 2, but the start URLs are on 3 hosts: all of them "
        "are crawled (start URLs always are), and no link to any other host is followed"
    ]
    urls = {record["url"] for record in records_in(out.read_text())}
    assert {*starts, extra} <= urls
    fits = run_cli(URL, "--max-hosts", "1", "-o", str(out), "-q", "--retries", "0")
    assert "--max-hosts" not in fits.stderr
