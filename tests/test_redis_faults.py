"""``trio-crawl --redis`` against a misbehaving Redis or a careless command
line: each fault ends in one line and a known exit code, never a traceback,
and no password is printed or put in a worker's argv. Real processes, a real
redis-server of the test's own (tests/redis_fixture.py), a local site."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.testing import Site, page, serve_site

import redis_fixture
from cli_helpers import run_cli as cli
from redis_fixture import start_redis

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

TIMEOUT = 60


own_redis = redis_fixture.own_redis


def small_site(size: int = 20) -> Site:
    routes: dict[str, Any] = {"/": page(*[f"/p/{i}" for i in range(size)])}
    for i in range(size):
        routes[f"/p/{i}"] = page()
    return Site(routes)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line]
    assert len(lines) == 1, stderr
    return lines[0]


def test_out_of_memory_at_the_start_is_one_line_and_exit_75(own_redis: Any) -> None:
    """Redis refuses to load the crawl's functions (OOM): ``--status`` and a
    crawl both say so in one line, exit 75 as an OOM mid-crawl does."""
    redis = own_redis()
    assert redis.command("CONFIG", "SET", "maxmemory", "1") == "+OK"
    with serve_site(small_site()) as server:
        status = cli("--redis", redis.url, "--crawl-id", "oom", "--status")
        crawl = cli(server.url("/"), "--redis", redis.url, "--crawl-id", "oom", "-o", os.devnull)
        assert server.log == []  # nothing fetched
    for result in (status, crawl):
        assert result.returncode == 75, result.stderr
        line = one_line(result.stderr)
        assert f"Redis at {redis.url} refused a call" in line
        assert "(OOM command not allowed" in line


def test_a_password_in_the_url_query_is_masked_and_the_environment_can_hold_it(
    own_redis: Any, tmp_path: Path
) -> None:
    redis = own_redis(password="s3cret-pw")
    base = f"redis://127.0.0.1:{redis.port}/0"
    wrong = cli("http://127.0.0.1:1/", "--redis", f"{base}?password=wr0ng-pw", "--crawl-id", "x")
    assert wrong.returncode == 2
    assert "wr0ng-pw" not in wrong.stderr
    assert f"{base}?password=***" in one_line(wrong.stderr)
    # From the environment: the URL (and every worker's argv) holds no password.
    env = {**os.environ, "TRIO_CRAWL_REDIS_PASSWORD": "s3cret-pw"}
    out = tmp_path / "out.jsonl"
    with serve_site(small_site()) as server:
        result = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.url("/"), "--redis", base,
             "--crawl-id", "env", "--processes", "2", "-o", str(out)],
            capture_output=True, text=True, timeout=TIMEOUT, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert len({r.target for r in server.log if r.target.startswith("/p/")}) == 20
    without = cli("--redis", base, "--crawl-id", "env", "--status")
    assert without.returncode == 2  # the password is needed: it came from the environment
    assert "s3cret-pw" not in without.stderr


def test_processes_hand_the_password_to_workers_in_their_environment() -> None:
    from trio_crawl.cli.redis_cli import worker_commands

    for url in ("redis://:pa55@h:6379/0", "redis://h:6379/0?password=pa55"):
        args = argparse.Namespace(redis=url, processes=2, output="o.jsonl", warc=None)
        argv = [
            "http://x/",
            "--redis",
            url,
            "--crawl-id",
            "c",
            "--processes",
            "2",
            "-o",
            "o.jsonl",
        ]
        commands, env = worker_commands(args, argv)
        assert env == {"TRIO_CRAWL_REDIS_PASSWORD": "pa55"}
        for command in commands:
            assert not any("pa55" in arg for arg in command), command
            assert "redis://h:6379/0" in command
        assert commands[1][-2:] == ["-o", "o.2.jsonl"]
        assert all("--no-parse-process" in command for command in commands)  # cores taken
    args = argparse.Namespace(redis="redis://h/0", processes=1, output="o", warc=None)
    commands, env = worker_commands(args, ["--redis=redis://h/0", "--processes", "1", "-o", "o"])
    assert (commands, env) == ([["--redis=redis://h/0", "-q", "-o", "o.1"]], {})


def test_status_into_a_closed_pipe_exits_quietly(own_redis: Any) -> None:
    """``--status | head -c0``: the reader is gone before the status is
    written; no BrokenPipeError traceback, exit 141 as a Unix tool's."""
    redis = own_redis()
    with serve_site(small_site(2)) as server:
        made = cli(server.url("/"), "--redis", redis.url, "--crawl-id", "p", "-o", os.devnull)
        assert made.returncode == 0, made.stderr
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "trio_crawl", "--redis", redis.url, "--crawl-id", "p",
             "--status"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
        )  # fmt: skip
    finally:
        os.close(write)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("processes", [None, "2"])
def test_a_database_that_is_not_a_number_is_refused(processes: str | None) -> None:
    extra = ["--processes", processes, "-o", os.devnull] if processes else []
    result = cli("http://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/x", "--crawl-id", "c",
                 *extra)  # fmt: skip
    assert result.returncode == 2
    assert one_line(result.stderr) == (
        "trio-crawl: error: --redis: bad Redis URL 'redis://127.0.0.1:1/x': the database "
        "must be a number (redis://host:6379/0), not 'x'"
    )


def test_the_parent_of_dead_workers_does_not_call_the_crawl_running(
    own_redis: Any, tmp_path: Path
) -> None:
    """``--processes``: workers that all fail (here: other settings than the
    crawl's) leave a crawl that is not done; the parent must not say
    "running" after they died."""
    redis = own_redis()
    with serve_site(small_site()) as server:
        url = server.url("/")
        common = ["--redis", redis.url, "--crawl-id", "dead"]
        worker = subprocess.Popen(
            [sys.executable, "-m", "trio_crawl", url, *common, "-w", "1", "--rate", "5",
             "-o", str(tmp_path / "a.jsonl")],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + TIMEOUT
        while len(server.log) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.send_signal(2)  # SIGINT: stopped, not done, no live worker
        assert worker.wait(timeout=TIMEOUT) == 130
        result = cli(url, *common, "-w", "1", "--rate", "5", "--max-depth", "1",
                     "--processes", "2", "-o", str(tmp_path / "b.jsonl"))  # fmt: skip
    assert result.returncode == 2
    assert "crawl dead: running" not in result.stderr
    assert "crawl dead: not done: the workers started here have ended" in result.stderr


def test_after_redis_restarts_without_its_data_the_lines_say_what_a_rerun_does(
    own_redis: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis = own_redis()
    out = tmp_path / "w.jsonl"
    with serve_site(small_site(200)) as server:
        url = server.url("/")
        args = [url, "--redis", redis.url, "--crawl-id", "gone", "-w", "1", "--rate", "50"]
        worker = subprocess.Popen(
            [sys.executable, "-m", "trio_crawl", *args, "-o", str(out)],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + TIMEOUT
        while len(server.log) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        redis.process.kill()  # no persistence: the crawl is gone with it
        redis.process.wait()
        _, stderr = worker.communicate(timeout=TIMEOUT)
        assert worker.returncode == 75, stderr
        line = one_line(stderr.split("\n", 1)[1])  # after "started crawl ..."
        assert "if Redis restarted without its data, a rerun starts the crawl anew" in line
        monkeypatch.setattr(redis_fixture, "free_port", lambda: redis.port)
        again = start_redis(tmp_path)  # the same port, empty
        try:
            rerun = subprocess.run(
                [sys.executable, "-m", "trio_crawl", *args, "-o", str(out), "--max-pages", "1"],
                capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        finally:
            again.process.kill()
            again.process.wait()
    assert "Traceback" not in rerun.stderr
    assert "was not in Redis, so this run started it anew: the " in rerun.stderr
    assert "are from an earlier crawl, and their pages are fetched again" in rerun.stderr
