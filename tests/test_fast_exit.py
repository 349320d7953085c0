"""The command's end (``trio_crawl.__main__``): every output written and every
``atexit`` handler run, then the process ends without Python's teardown of
its modules (~30 ms of CPU), unless a non-daemon thread is still running."""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
from pathlib import Path

from processes import run_python

from trio_crawl.__main__ import may_exit_now
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Site, page

TIMEOUT = 60
PACKAGE_ROOT = str(Path(__file__).parents[1])

#: The console script's entry, with an ``atexit`` handler and an object whose
#: ``__del__`` only the teardown of ``__main__``'s globals would run.
ENTRY = textwrap.dedent(
    """
    import atexit, sys

    class Witness:
        def __del__(self):
            sys.stderr.write("torn down\\n")

    witness = Witness()
    atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
    from trio_crawl.__main__ import run
    run()
    """
)


#: The children's environment: this checkout's package, nothing inherited.
ENV = {"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin"}


def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python(ENTRY, *args, env=ENV)


def test_the_witness_is_torn_down_by_an_ordinary_exit() -> None:
    # What the next test relies on: without the early exit, it is.
    code = ENTRY.replace("from trio_crawl.__main__ import run\nrun()", "sys.exit(0)")
    result = run_python(code)
    assert result.stderr == "atexit ran\ntorn down\n"


def test_a_crawl_ends_with_its_outputs_written_and_without_the_teardown(tmp_path: Path) -> None:
    site = Site({"/": page("/a", "/b"), "/a": page("/b"), "/b": page("/")})
    out = tmp_path / "out.jsonl"
    with serve_site(site) as server:
        to_file = run_entry(server.url("/"), "--ignore-robots", "-q", "-o", str(out))
        to_stdout = run_entry(server.url("/"), "--ignore-robots", "-q", "-o", "-")
    for result in (to_file, to_stdout):
        assert result.returncode == 0
        assert result.stderr == "atexit ran\n"  # no "torn down"
    urls = {json.loads(line)["url"] for line in out.read_text().splitlines()}
    assert urls == {server.url("/"), server.url("/a"), server.url("/b")}
    assert {json.loads(line)["url"] for line in to_stdout.stdout.splitlines()} == urls


#: A handler that logs each page to a file it opens once and never closes:
#: its buffer reaches the file only when Python tears the module down.
LEAVES_A_FILE_OPEN = """
log = open("seen.txt", "w")

async def note(page):
    log.write(page.url + "\\n")
    for link in page.links():
        yield page.follow(link)
"""


def test_a_run_with_a_handler_gets_the_ordinary_exit(tmp_path: Path) -> None:
    (tmp_path / "leaves_open.py").write_text(LEAVES_A_FILE_OPEN)
    site = Site({"/": page("/a"), "/a": page("/")})
    with serve_site(site) as server:
        result = run_python(
            ENTRY, server.url("/"), "--ignore-robots", "-q", "-o", "out.jsonl",
            "--handler", "leaves_open:note", "--items", "items.jsonl", env=ENV, cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == "atexit ran\ntorn down\n"
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    assert sorted(seen) == [server.url("/"), server.url("/a")]


def test_a_usage_error_keeps_its_exit_status_and_message() -> None:
    result = run_entry("--no-such-flag")
    assert result.returncode == 2
    assert result.stderr.endswith("unrecognized arguments: --no-such-flag\natexit ran\n")


def test_a_running_non_daemon_thread_gets_the_ordinary_exit() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, args=(TIMEOUT,))
    daemon = threading.Thread(target=stop.wait, args=(TIMEOUT,), daemon=True)
    daemon.start()
    try:
        assert may_exit_now()  # a daemon thread does not count
        worker.start()
        assert not may_exit_now()
    finally:
        stop.set()
        worker.join()
        daemon.join()
