"""The command line through a real subprocess, against servers on 127.0.0.1.

Rules: every subprocess has a timeout; every site is served by
trio_crawl.sites.server in this process on an ephemeral port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

from cli_helpers import records_in, run_cli

TIMEOUT = 60


def small_site(n: int = 20, delay: float = 0.0) -> Site:
    routes: dict[str, Response] = {
        "/": page(*[f"/p/{i}" for i in range(n)], "/p/0#dup", "mailto:x@y"),
        "/robots.txt": Response(
            body=b"User-agent: *\nDisallow: /p/13\n", content_type="text/plain"
        ),
    }
    for i in range(n):
        body = page(f"/p/{(i + 1) % n}", "/")
        routes[f"/p/{i}"] = Response(body=body.body, delay=delay)
    return Site(routes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ftp://example.org/"], r"unsupported scheme 'ftp'"),
        (["http://"], r"invalid start URL"),
        (["http://127.0.0.1:1/", "-w", "-3"], r"--workers must be at least 1 \(got -3\)"),
        (["http://127.0.0.1:1/", "--max-depth", "-1"], r"--max-depth must be >= 0"),
        (["http://127.0.0.1:1/", "-w", "lots"], r"-w/--workers: not a whole number: 'lots'"),
        (["http://127.0.0.1:1/", "--timeout", "5x"], r"--timeout: not a duration: '5x'"),
        (["http://127.0.0.1:1/", "--max-bytes", "10Q"], r"--max-bytes: not a size: '10Q'"),
        (["http://127.0.0.1:1/", "-o", "/nonexistent-dir/x.jsonl"], r"cannot write output file"),
        (["http://127.0.0.1:1/", "--bogus"], r"unrecognized arguments: --bogus"),
        ([], r"the following arguments are required: URL"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trio-crawl: error: ")
    assert __import__("re").search(message, lines[0]), lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("fetcher", ["httpx", "curl"])
def test_crawl_to_stdout_writes_only_records(fetcher: str) -> None:
    with serve_site(small_site()) as server:
        result = run_cli(server.base_url + "/", "-o", "-", "--fetcher", fetcher, "-w", "4")
        targets = server.targets()
    assert result.returncode == 0, result.stderr
    records = records_in(result.stdout)
    base = server.base_url
    urls = sorted(r["url"] for r in records)
    assert urls == sorted([base + "/"] + [f"{base}/p/{i}" for i in range(20)])
    assert set(records[0]) == {
        "url", "status", "depth", "error", "redirect", "referrer",
        "content_type", "elapsed_ms", "links", "attempts", "t", "size", "protocol", "digest",
    }  # fmt: skip
    denied = [r for r in records if r["url"].endswith("/p/13")]
    assert denied[0]["error"]["kind"] == "robots" and denied[0]["status"] is None
    assert "/p/13" not in targets
    assert sorted(t for t in targets if t != "/robots.txt") == sorted(
        ["/"] + [f"/p/{i}" for i in range(20) if i != 13]
    )
    assert "trio-crawl summary" in result.stderr  # summary on stderr, not stdout


def test_max_depth_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with serve_site(small_site()) as server:
        result = run_cli(server.base_url + "/p/0", "--max-depth", "2", "-o", str(out), "-q")
    assert result.returncode == 0 and result.stderr == ""
    records = records_in(out.read_text())
    depths = {r["url"].removeprefix(server.base_url): r["depth"] for r in records}
    # /p/0 -> /p/1, / -> everything else at depth 2
    assert depths["/p/0"] == 0 and depths["/p/1"] == 1 and depths["/"] == 1
    assert depths["/p/2"] == 2 and len(depths) == 21  # all 20 pages and /, /p/13 denied


def test_python_dash_m_and_console_script_agree() -> None:
    exe = Path(sys.executable).with_name("trio-crawl")
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    result = subprocess.run(
        [str(exe), "--version"], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 0 and result.stdout.startswith("trio-crawl ")


def _crawl_and_signal(tmp_path: Path, signum: int) -> tuple[int, list[str], str, int]:
    out = tmp_path / "out.jsonl"
    with serve_site(small_site(n=200, delay=0.2)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_crawl", server.base_url + "/", "-w", "4",
             "-o", str(out), "--fetcher", "httpx", "--grace", "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if out.exists() and out.read_text().count("\n") >= 5:
                break
            time.sleep(0.05)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=TIMEOUT)
        requested = len([t for t in server.targets() if t != "/robots.txt"])
    return proc.returncode, out.read_text().splitlines(), stderr, requested


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_gracefully(tmp_path: Path, signum: int, code: int) -> None:
    returncode, lines, stderr, requested = _crawl_and_signal(tmp_path, signum)
    assert returncode == code, stderr
    records = records_in("\n".join(lines))  # every line is complete JSON
    assert 5 <= len(records) < 201
    # In-flight pages were allowed to finish: every request made has a record.
    assert len(records) == requested
    assert "stopped" in stderr and "URLs left unfetched" in stderr
    assert "Traceback" not in stderr


def test_rate_limit_seen_from_the_server(tmp_path: Path) -> None:
    """``--rate 5`` spaces request *starts* at least 0.2 s apart (docs/manual/politeness.md).

    The starts are checked where they are decided, without a clock race: the
    k-th record (by its time ``t``, counted from the crawl's start) cannot be
    made before the k-th start, at least ``(k - 1) * 0.2`` s in. The server's
    arrival times lag the starts by a delay that a busy machine stretches at
    will (tens of milliseconds against the rate's 10 ms of slack), so they are
    held only to what no delay can fake: every URL asked for once, and the
    requests spread over more than a second, where 8 workers without a rate
    would send them all within a few milliseconds."""
    out = tmp_path / "out.jsonl"
    with serve_site(small_site(n=12)) as server:
        result = run_cli(
            server.base_url + "/", "--rate", "5", "-w", "8", "-q", "-o", str(out),
            "--fetcher", "httpx", "--ignore-robots",
        )  # fmt: skip
        log = list(server.log)
    assert result.returncode == 0, result.stderr
    targets = [entry.target for entry in log]
    assert sorted(targets) == sorted(["/", *(f"/p/{i}" for i in range(12))])
    times = sorted(record["t"] for record in records_in(out.read_text()))
    assert len(times) == 13
    for k, t in enumerate(times):
        assert t >= k * 0.2, times
    assert log[-1].time - log[0].time > 1.2, [entry.time for entry in log]


def test_demo_runs(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    result = run_cli("demo", "--pages", "40", "-o", str(out), "--fetcher", "httpx")
    assert result.returncode == 0, result.stderr
    records = records_in(out.read_text())
    assert len(records) == len({r["url"] for r in records}) > 40
    assert "trio-crawl summary" in result.stderr
    # its /flaky page answers 503 once: the summary says it was retried
    assert [r["attempts"] for r in records if r["url"].endswith("/flaky")] == [2]
    assert "1 page (1 extra attempt)" in result.stderr


HANDLER_MODULE = """
from trio_crawl import Page


async def titles(page: Page):
    yield {"url": page.url, "title": page.tree.findtext(".//title"), "n": len(page.links())}
    for link in page.links():
        yield page.follow(link)
"""


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_handler_and_items_file(tmp_path: Path, suffix: str) -> None:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    items = tmp_path / f"items.{suffix}"
    routes = {f"/{i}": page(f"/{(i + 1) % 5}", title=f"page {i}") for i in range(5)}
    with serve_site(Site(routes)) as server:
        result = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.base_url + "/0", "-q", "-o", os.devnull,
             "--handler", "my_handlers:titles", "--items", str(items), "--ignore-robots"],
            capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = items.read_text()
    if suffix == "csv":
        lines = text.splitlines()
        assert lines[0] == "url,title,n" and len(lines) == 6
        assert f"{server.base_url}/3,page 3,1" in lines
    else:
        rows = records_in(text)
        assert sorted(r["title"] for r in rows) == [f"page {i}" for i in range(5)]


def test_bad_handler_spec_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(
        "http://127.0.0.1:1/", "--handler", "no_such_module_xyz:run", "--items", os.devnull
    )
    assert result.returncode == 2
    assert result.stderr.startswith("trio-crawl: error: cannot import handler module")


def test_every_option_has_help_text() -> None:
    from trio_crawl.cli.parser import build_parser

    parser = build_parser()
    missing = [
        action.option_strings or action.dest for action in parser._actions if not action.help
    ]
    assert not missing
    fetcher = next(a for a in parser._actions if "--fetcher" in a.option_strings)
    assert fetcher.help is not None and "asks cannot be installed" in fetcher.help


def test_counts_agree_with_their_nouns() -> None:
    from trio_crawl.cli.common import counted

    assert [counted(n, "URL") for n in (0, 1, 2, 1000)] == [
        "0 URLs",
        "1 URL",
        "2 URLs",
        "1,000 URLs",
    ]
