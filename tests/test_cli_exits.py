"""Exit codes and messages of the command line (issue #13, items 3, 4, 5, 7, 10).

Every code in the "Exit codes" table (docs/manual/command-line.md) has a test here: the failure
is said in one line on stderr, with no traceback, and exits with its code.
Every subprocess has a timeout; every site is on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import TIMEOUT, run_cli, small_site

from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

from cli_helpers import records_in, run_on_a_terminal
from hostile_server import serve_hostile


def run_in(cwd: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_crawl", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        **kwargs,  # type: ignore[call-overload]
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("trio-crawl: error")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def dead_port() -> int:
    """A port nobody listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jsonl(path: Path) -> list[dict[str, object]]:
    return records_in(path.read_text())


# -- 3: an output that cannot be written --------------------------------------


def test_disk_full_stops_the_crawl_with_exit_3() -> None:
    with serve_site(small_site()) as server:
        result = run_cli(server.base_url + "/", "-o", "/dev/full", "-w", "2")
    assert result.returncode == 3, result.stderr
    line = one_error_line(result)
    assert line == "trio-crawl: error: cannot write to /dev/full: No space left on device"
    assert "internal error" not in result.stderr


def test_items_on_a_full_disk_exit_3(tmp_path: Path) -> None:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    with serve_site(Site(LOOP)) as server:
        result = run_in(
            tmp_path, server.base_url + "/0", "-q", "-o", os.devnull, "--ignore-robots",
            "--handler", "my_handlers:titles", "--items", "/dev/full",
        )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert one_error_line(result) == (
        "trio-crawl: error: cannot write to /dev/full: No space left on device"
    )


def _limit_file_size(limit: int) -> None:
    # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG
    # after a short write: a disk filling up in the middle of a line.
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_disk_filling_mid_crawl_leaves_only_complete_lines(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    limit = 1000  # a few records, then a write that is cut in the middle
    with serve_site(small_site(n=40)) as server:
        result = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.base_url + "/", "-o", str(out),
             "-w", "2", "--fetcher", "httpx"],
            capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
            preexec_fn=lambda: _limit_file_size(limit),
        )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert one_error_line(result) == f"trio-crawl: error: cannot write to {out}: File too large"
    data = out.read_bytes()
    assert 0 < len(data) < limit and data.endswith(b"\n"), data[-80:]
    assert all(json.loads(line)["url"] for line in data.decode().splitlines())


def test_an_output_path_that_cannot_exist_fails_before_crawling(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "x"
    not_a_dir.write_text("a file\n")
    with serve_site(small_site()) as server:
        result = run_cli(server.base_url + "/", "-o", str(not_a_dir / "file.jsonl"))
        requested = server.targets()
    assert result.returncode == 2, result.stderr
    assert "cannot write output file" in one_error_line(result)
    assert requested == []


# -- 5: a failed start leaves existing files alone -----------------------------

HANDLER_MODULE = """
from trio_crawl import Page


async def titles(page: Page):
    yield {"url": page.url, "title": page.tree.findtext(".//title")}
    for link in page.links():
        yield page.follow(link)


async def boom(page: Page):
    yield {"url": page.url}
    raise ValueError("no price on this page")
"""

LOOP = {f"/{i}": page(f"/{(i + 1) % 5}", title=f"page {i}") for i in range(5)}


def _bad_start(tmp_path: Path, why: str) -> list[str]:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    good = ["--handler", "my_handlers:titles", "--items", "items.jsonl"]
    return {
        "bad --items path": ["--handler", "my_handlers:titles", "--items", "no/such/dir.jsonl"],
        "handler not importable": ["--handler", "no_such_mod:x", "--items", "items.jsonl"],
        "missing seeds file": ["--seeds", "no-such-seeds.txt"],
        "bad option value": [*good, "--max-bytes", "0"],
        "--items without --handler": ["--items", "items.jsonl"],
        "--handler without --items": ["--handler", "my_handlers:titles"],
    }[why]


@pytest.mark.parametrize(
    "why",
    [
        "bad --items path",
        "handler not importable",
        "missing seeds file",
        "bad option value",
        "--items without --handler",
        "--handler without --items",
    ],
)
def test_a_failed_start_keeps_existing_outputs(tmp_path: Path, why: str) -> None:
    out = tmp_path / "out.jsonl"
    items = tmp_path / "items.jsonl"
    old = "".join(f'{{"url": "http://old.test/{i}"}}\n' for i in range(166))
    out.write_text(old)
    items.write_text(old)
    with serve_site(Site(LOOP)) as server:
        result = run_in(
            tmp_path, server.base_url + "/0", "-o", str(out), "--ignore-robots",
            *_bad_start(tmp_path, why),
        )  # fmt: skip
        requested = server.targets()
    assert result.returncode == 2, result.stderr
    one_error_line(result)
    assert out.read_text() == old and items.read_text() == old
    assert requested == []


def test_a_failed_start_creates_no_output_file(tmp_path: Path) -> None:
    result = run_in(tmp_path, "http://127.0.0.1:1/", "-o", "new.jsonl", "--seeds", "nope.txt")
    assert result.returncode == 2, result.stderr
    assert not (tmp_path / "new.jsonl").exists()


# -- 2: usage errors found before the crawl ------------------------------------


def test_a_missing_asks_is_a_usage_error() -> None:
    try:
        import asks  # type: ignore[import-not-found]  # noqa: F401
    except Exception:
        pass
    else:
        pytest.skip("asks is installed here")
    result = run_cli("http://127.0.0.1:1/", "--fetcher", "asks", "-o", os.devnull)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert line.startswith("trio-crawl: error: --fetcher asks: ") and "nox" in line
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--handler", "my_handlers:titles"], "--handler needs --items FILE"),
        (["--items", "items.jsonl"], "--items needs --handler"),
        (["--fail-fast"], "--fail-fast needs --handler"),
        (
            ["--handler", "my_handlers:titles", "--items", "-", "-o", "-"],
            "--items - and -o - would both write to stdout",
        ),
    ],
)
def test_handler_and_items_go_together(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    result = run_in(tmp_path, "http://127.0.0.1:1/", *args)
    assert result.returncode == 2, result.stderr
    assert message in one_error_line(result)


# -- 1: a handler error under --fail-fast ----------------------------------------


def test_a_handler_error_under_fail_fast_exits_1(tmp_path: Path) -> None:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    with serve_site(Site(LOOP)) as server:
        result = run_in(
            tmp_path, server.base_url + "/0", "-q", "-o", os.devnull, "--ignore-robots",
            "--handler", "my_handlers:boom", "--items", "items.jsonl", "--fail-fast",
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert one_error_line(result) == (
        f"trio-crawl: error: handler error at {server.base_url}/0: "
        "ValueError: no price on this page"
    )
    assert len(jsonl(tmp_path / "items.jsonl")) == 1  # what it yielded first is kept


def test_handler_errors_without_fail_fast_are_records(tmp_path: Path) -> None:
    (tmp_path / "my_handlers.py").write_text(HANDLER_MODULE)
    out = tmp_path / "out.jsonl"
    with serve_site(Site(LOOP)) as server:
        result = run_in(
            tmp_path, server.base_url + "/0", "-q", "-o", str(out), "--ignore-robots",
            "--handler", "my_handlers:boom", "--items", "items.jsonl",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [record] = jsonl(out)
    assert record["error"] == {"kind": "handler", "message": "ValueError: no price on this page"}


# -- 4: no start URL could be reached ---------------------------------------------


@pytest.mark.parametrize("robots", [False, True])
def test_no_start_url_reachable_exits_4(robots: bool) -> None:
    port = dead_port()
    args = [f"http://127.0.0.1:{port}/", "-o", os.devnull, "--timeout", "5"]
    if not robots:
        args.append("--ignore-robots")
    result = run_cli(*args, timeout=30)
    assert result.returncode == 4, result.stderr
    line = one_error_line(result)
    assert line.startswith(
        f"trio-crawl: error: could not connect to any start URL (127.0.0.1:{port}: "
    ), line


@pytest.mark.parametrize("fetcher", ["curl", "httpx"])
@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 abc\r\nContent-Length: 0\r\n\r\n", b"<html>\r\n\r\n<p>HTTP/0.9</p>"],
    ids=["garbage-status", "http09"],
)
def test_a_start_url_answered_with_garbage_was_connected_to(
    tmp_path: Path, fetcher: str, answer: bytes
) -> None:
    """The server answered, badly: a ``protocol`` record and exit 0, not 4
    "could not connect" (issue #18, item 5)."""

    def garbage(sock: socket.socket, stop: object) -> bool:
        sock.sendall(answer)
        return False

    out = tmp_path / "out.jsonl"
    with serve_hostile({"/": garbage}) as server:
        result = run_cli(
            server.url("/"), "-q", "-o", str(out), "--ignore-robots", "--retries", "0",
            "--fetcher", fetcher,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [record] = jsonl(out)
    assert isinstance(record["error"], dict) and record["error"]["kind"] == "protocol", record


def test_one_reachable_start_url_is_enough() -> None:
    with serve_site(small_site(n=3)) as server:
        result = run_cli(
            server.base_url + "/", f"http://127.0.0.1:{dead_port()}/", "-q", "-o", os.devnull,
            "--ignore-robots",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr


# -- 75: two crawls on one state file -------------------------------------------


def test_a_second_crawl_on_a_busy_state_file_exits_75(tmp_path: Path) -> None:
    state = tmp_path / "crawl.db"
    with serve_site(small_site(n=200, delay=0.2)) as server:
        first = subprocess.Popen(
            [sys.executable, "-m", "trio_crawl", server.base_url + "/", "-w", "2", "-q",
             "--state", str(state), "-o", str(tmp_path / "a.jsonl"), "--fetcher", "httpx"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while not (tmp_path / "a.jsonl").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            second = run_cli(
                server.base_url + "/", "-q", "--state", str(state), "-o",
                str(tmp_path / "b.jsonl"),
            )  # fmt: skip
        finally:
            first.terminate()
            _, first_err = first.communicate(timeout=TIMEOUT)
    assert second.returncode == 75, second.stderr
    one_error_line(second)
    assert first.returncode == 143, first_err


# -- warnings instead of silent loss ----------------------------------------------


def test_bad_seed_lines_are_counted_on_stderr(tmp_path: Path) -> None:
    with serve_site(small_site(n=3)) as server:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(
            f"# comment\n{server.base_url}/p/0\nftp://x.test/\n\n"
            f"{server.base_url}/p/1\nnot a url\n"
        )
        result = run_cli(
            "--seeds", str(seeds), "-q", "-o", os.devnull, "--max-depth", "0",
            "--ignore-robots",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"trio-crawl: warning: skipped 2 lines of {seeds} that are not http(s) URLs "
        "(first: line 3: 'ftp://x.test/')"
    ]


def test_a_seeds_file_without_urls_is_a_usage_error(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("ftp://x.test/\n")
    result = run_cli("--seeds", str(seeds), "-q", "-o", os.devnull)
    assert result.returncode == 2, result.stderr
    assert "no http(s) URLs in" in one_error_line(result)


# -- the summary -------------------------------------------------------------------


def test_the_summary_counts_status_codes() -> None:
    routes: dict[str, Response] = {"/": page("/a", "/missing"), "/a": page("/")}
    with serve_site(Site(routes)) as server:
        result = run_cli(server.base_url + "/", "-o", os.devnull, "--ignore-robots")
    assert result.returncode == 0, result.stderr
    summary = result.stderr
    assert "status codes" in summary and "200 × 2" in summary and "404 × 1" in summary
    assert "downloaded" in summary


# -- no -o on a terminal ----------------------------------------------------------


def test_records_go_to_a_file_when_stdout_is_a_terminal(tmp_path: Path) -> None:
    with serve_site(small_site(n=3)) as server:
        code, screen = run_on_a_terminal(
            server.base_url + "/", "--ignore-robots", cwd=str(tmp_path), columns=100
        )
    assert code == 0, screen
    [written] = list(tmp_path.glob("crawl-*.jsonl"))
    assert len(jsonl(written)) == 4
    assert f"records go to {written.name}" in screen
    assert '"url"' not in screen and "trio-crawl summary" in screen


def test_dash_o_dash_on_a_terminal_prints_records_and_no_progress(tmp_path: Path) -> None:
    with serve_site(small_site(n=3, delay=0.4)) as server:
        code, screen = run_on_a_terminal(
            server.base_url + "/",
            "--ignore-robots",
            "-o",
            "-",
            "-w",
            "1",
            cwd=str(tmp_path),
            columns=100,
        )
    assert code == 0, screen
    assert screen.count('{"url"') == 4
    assert "pages/s  " not in screen.split("trio-crawl summary")[0]  # no progress line
    assert list(tmp_path.iterdir()) == []


def test_what_a_crawl_exception_means() -> None:
    from trio_crawl.cli import crawl as main
    from trio_crawl.errors import OutputError, StateLockedError, StateWriteError

    watch = main.HandlerWatch()
    busy = StateLockedError("crawl.db is in use by another crawl")
    assert main.classify(ExceptionGroup("", [busy]), watch, "crawl.db") == main.Ending(
        75, "crawl.db is in use by another crawl"
    )
    full = StateWriteError("crawl.db", "database or disk is full")
    assert main.classify(full, watch, "crawl.db") == main.Ending(
        3, "cannot write to crawl.db: database or disk is full"
    )
    assert main.classify(full, watch, None) == main.Ending(
        3, "cannot write to the temporary state file: database or disk is full"
    )
    nospace = OutputError("out.jsonl", OSError(28, "No space left on device"))
    assert main.classify(nospace, watch, None).code == 3
    mine = KeyError("x")
    assert main.classify(mine, watch, None).code == 70
    watch.failure = ("http://a.test/", mine)
    assert main.classify(ExceptionGroup("", [ExceptionGroup("", [mine])]), watch, None) == (
        main.Ending(1, "handler error at http://a.test/: KeyError: 'x'")
    )
