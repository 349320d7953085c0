"""What the Redis fault run found (issue #37 item 6), each against a real
redis-server and the real ``trio-crawl`` command line: ``--processes``
without ``-o``, a password in the workers' command lines, crawl ids that
share a key prefix, a worker killed by a signal, the warning of a worker
joining a crawl Redis lost, and the budgets (refused once, in the wrong
words) now taken.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.testing import Response, Site, SiteRequest, page, serve_site

import redis_fixture
from cli_helpers import run_cli as cli
from cli_helpers import start_cli
from redis_fixture import RedisServer

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id
own_redis = redis_fixture.own_redis

TIMEOUT = 90


start = start_cli  # a worker in the background, as a user starts one


def waiting_for(event: threading.Event) -> Callable[[SiteRequest], Response]:
    """A route that answers once ``event`` is set (60 s at most)."""

    def answer(request: SiteRequest) -> Response:
        event.wait(60)
        return page()

    return answer


@pytest.fixture
def held_site() -> Iterator[tuple[str, threading.Event]]:
    """A root linking to two pages that answer once the event is set: the
    crawl cannot end before it."""
    event = threading.Event()
    site = Site({"/": page("/a", "/b"), "/a": waiting_for(event), "/b": waiting_for(event)})
    with serve_site(site) as server:
        try:
            yield server.url("/"), event
        finally:
            event.set()


def children(pid: int, n: int) -> list[int]:
    """The ``n`` child processes of ``pid`` (waiting up to 30 s for them)."""
    deadline = time.monotonic() + 30
    found: list[int] = []
    while time.monotonic() < deadline:
        found = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(c) for c in listed.read().split()]
        if len(found) >= n:
            return sorted(found)
        time.sleep(0.02)
    raise AssertionError(f"{pid} has children {found}, not {n}")


def own_arguments(parent: int, child: int) -> list[bytes]:
    """``child``'s command line once it has one of its own (exec'd): until
    then (and for ever, if it was forked) it is empty or its parent's."""
    inherited = Path(f"/proc/{parent}/cmdline").read_bytes()
    deadline = time.monotonic() + 10
    argv = b""
    while time.monotonic() < deadline:
        argv = Path(f"/proc/{child}/cmdline").read_bytes()
        if argv and argv != inherited:
            break
        time.sleep(0.02)
    return argv.split(b"\0")


def test_processes_without_an_output_is_one_line_and_exit_2(
    redis_server: RedisServer, crawl_id: str
) -> None:
    result = cli(
        "http://127.0.0.1:1/", "--redis", redis_server.url, "--crawl-id", crawl_id,
        "--processes", "2",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "trio-crawl: error: --processes needs an output file (-o FILE): each worker writes "
        "its own\n"
    )


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_processes_workers_do_not_carry_the_password_in_their_arguments(
    own_redis: Any, tmp_path: Path, held_site: tuple[str, threading.Event]
) -> None:
    """``ps -ef`` shows a forked child with its parent's command line: with
    a password in the URL the workers are fresh processes, whose arguments
    hold the URL without it; the password is in their environment."""
    redis = own_redis(password="s3cret-pw")
    url, event = held_site
    out = tmp_path / "out.jsonl"
    parent = start(
        url, "--redis", redis.url, "--crawl-id", "pw", "--processes", "2", "-o", str(out)
    )
    try:
        workers = children(parent.pid, 2)
        for pid in workers:
            argv = own_arguments(parent.pid, pid)
            assert not any(b"s3cret-pw" in arg for arg in argv), argv
            assert b"redis://default@127.0.0.1:%d/0" % redis.port in argv, argv
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert b"TRIO_CRAWL_REDIS_PASSWORD=s3cret-pw" in environ
    finally:
        event.set()
        _, stderr = parent.communicate(timeout=TIMEOUT)
    assert parent.returncode == 0, stderr
    assert "s3cret-pw" not in stderr


def test_a_worker_killed_by_a_signal_is_said_in_words_and_exit_75(
    redis_server: RedisServer,
    crawl_id: str,
    tmp_path: Path,
    held_site: tuple[str, threading.Event],
) -> None:
    url, event = held_site
    out = tmp_path / "out.jsonl"
    args = [url, "--redis", redis_server.url, "--crawl-id", crawl_id, "-o", str(out)]
    parent = start(*args, "--processes", "2", "--lease", "1")
    try:
        victim = children(parent.pid, 2)[1]
        os.kill(victim, signal.SIGKILL)
    finally:
        event.set()
        _, stderr = parent.communicate(timeout=TIMEOUT)
    assert parent.returncode == 75, stderr
    assert "Traceback" not in stderr
    assert re.search(r"\(exit 0, killed by SIGKILL\)|\(killed by SIGKILL, exit 0\)", stderr)
    (line,) = [line for line in stderr.splitlines() if "error:" in line]
    assert re.fullmatch(
        r"trio-crawl: error: worker [12] was killed by SIGKILL: its pages go back to the crawl "
        r"when its lease runs out; run the same command again to resume",
        line,
    ), line
    assert " -9" not in stderr
    again = cli(*args, "--processes", "2")  # the crawl is done or resumes: 0
    assert again.returncode == 0, again.stderr


def test_deleting_a_crawl_deletes_no_other_crawl_whose_id_it_begins(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """Crawl ``p``'s keys are a prefix of crawl ``p}:x``'s unless ``}`` is
    escaped; glob characters in an id must not match other ids either."""
    import trio

    from trio_crawl import redis_frontier, run_crawl
    from trio_crawl.frontiers.redis import crawl_status

    site = Site({"/": page()})
    ids = [crawl_id + tail for tail in ("", "}:x", "*", "b", "?", "[b]", "%7D")]

    async def crawl_each(url: str) -> None:
        for name in ids:
            frontier = redis_frontier(redis_server.url, name)
            await run_crawl([url], frontier=frontier, ignore_robots=True)

    with serve_site(site) as server:
        trio.run(crawl_each, server.url("/"))

    def done(name: str) -> bool:
        status = trio.run(crawl_status, redis_server.url, name)
        return status is not None and status["done"] == 1 and status["finished"] == 1

    assert all(done(name) for name in ids)
    kept = [crawl_id + "b", crawl_id + "}:x", crawl_id + "%7D"]
    for name in ids:
        if name in kept:
            continue
        deleted = cli("--redis", redis_server.url, "--crawl-id", name, "--delete-crawl")
        assert deleted.returncode == 0, deleted.stderr
        assert f"deleted crawl {name!r}" in deleted.stderr
        assert trio.run(crawl_status, redis_server.url, name) is None
        assert [other for other in kept if not done(other)] == [], name
    shown = cli("--redis", redis_server.url, "--crawl-id", crawl_id + "}:x", "--status")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"crawl {crawl_id}}}:x: done\n"), shown.stdout


def test_every_worker_whose_output_holds_a_lost_crawls_records_warns(
    own_redis: Any, tmp_path: Path
) -> None:
    """After FLUSHALL (or a restart without AOF), the worker that starts
    the crawl anew warns about its output's records, and so does one that
    joins the new crawl with records of the lost one in its output."""
    redis = own_redis()
    site = Site({"/": page("/a", "/b"), "/a": page(), "/b": page()})
    joiner, starter = tmp_path / "joiner.jsonl", tmp_path / "starter.jsonl"
    with serve_site(site) as server:
        url = server.url("/")
        common = ["--redis", redis.url, "--crawl-id", "lost"]
        first = cli(url, *common, "-o", str(joiner))
        assert first.returncode == 0, first.stderr
        assert "warning" not in first.stderr
        assert len(joiner.read_text().splitlines()) == 3
        assert redis.command("FLUSHALL") == "+OK"
        anew = cli(url, *common, "-o", str(starter))  # a new output: nothing to warn of
        assert anew.returncode == 0, anew.stderr
        assert "warning" not in anew.stderr
        joined = cli(*common, "-o", str(joiner))  # joins the new crawl: warns
        assert joined.returncode == 0, joined.stderr
        assert "joined crawl 'lost'" in joined.stderr
        warnings = [line for line in joined.stderr.splitlines() if "warning" in line]
        assert warnings == [
            f"trio-crawl: warning: the 3 records already in {joiner} are not of crawl 'lost' "
            "as Redis knows it (Redis lost that crawl and another worker started it anew, "
            "or the output is another crawl's): their pages are fetched again"
        ], joined.stderr
        for output in (joiner, starter):  # a worker the crawl knows: no warning
            rerun = cli(*common, "-o", str(output))
            assert rerun.returncode == 0, rerun.stderr
            assert "warning" not in rerun.stderr


@pytest.mark.parametrize("option", ["--max-hosts", "--max-pages-per-host"])
def test_the_budgets_once_refused_are_taken_with_redis(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path, option: str
) -> None:
    """The refusal this test checked the words of (``max_hosts=`` for the
    flag) is gone: Redis counts the budgets (issue #37 item 5,
    ``frontiers/redis/budgets.py``; crawls with them: test_redis_budgets.py)."""
    out = tmp_path / "out.jsonl"
    with serve_site(Site({"/": page("/a", "/b", "/c", "/d")})) as server:
        result = cli(
            server.url("/"), "--redis", redis_server.url, "--crawl-id", crawl_id,
            option, "3", "-o", str(out),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert out.read_text().count("\n") == (3 if option == "--max-pages-per-host" else 5)
    assert "cannot be combined" not in result.stderr
    assert "max_hosts=" not in result.stderr and "max_pages_per_host=" not in result.stderr
