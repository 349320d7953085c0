"""Where depth corrections go (issue #25 item 3, issue #24 item 1): the main
output holds one line per URL on every backend, and the ``depth_update``
lines go to ``--depth-updates FILE`` (or nowhere, counted in the summary).
The site (``late_shortcut.py``) makes the corrections happen without timing:
a shallow page answers only once the chain below it has been crawled.
The manual's recipes (docs/manual/output.md) that fold them into the
records run as written here.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.report.aggregate import aggregate_file
from trio_crawl.testing import serve_site

from cli_helpers import TIMEOUT, fold_depth_updates, records_in, run_cli
from late_shortcut import late_shortcut_site, shortest_depths

#: the manual's page on records and depth (it was the README's until issue #35)
OUTPUT_PAGE = Path(__file__).resolve().parent.parent / "docs" / "manual" / "output.md"
BACKENDS = {"memory": [], "state": ["--state", "{tmp}/crawl.db"]}


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def summary_text(stderr: str) -> str:
    """The end-of-crawl summary as words: a table cell may wrap over lines."""
    return " ".join(stderr.replace("│", " ").split())


def assert_final_depths(final: dict[str, dict[str, Any]], base: str) -> None:
    assert {url: (r["depth"], r["referrer"]) for url, r in final.items()} == shortest_depths(base)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_one_line_per_url_and_corrections_in_their_own_file(tmp_path: Path, backend: str) -> None:
    out, updates = tmp_path / "out.jsonl", tmp_path / "updates.jsonl"
    extra = [arg.format(tmp=tmp_path) for arg in BACKENDS[backend]]
    with serve_site(late_shortcut_site()) as server:
        result = run_cli(
            server.url("/"), "--ignore-robots", "-o", str(out), "--depth-updates", str(updates),
            *extra,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = records_in(out.read_text())  # asserts: no depth_update line among them
    urls = [r["url"] for r in records]
    assert len(urls) == len(set(urls)) == len(shortest_depths(server.base_url))
    # /c3 was recorded at its chain depth, 4, before /slow gave the shorter path.
    recorded = {r["url"]: r["depth"] for r in records}
    assert recorded[server.url("/c3")] == 4
    corrections = jsonl(updates)
    assert corrections and all(u["depth_update"] is True for u in corrections)
    assert set(corrections[0]) == {
        "url",
        "depth",
        "referrer",
        "depth_update",
        "previous_depth",
        "t",
    }
    assert_final_depths(fold_depth_updates(records, corrections), server.base_url)
    # The summary counts them and says where they are; the report hint names the file.
    summary = summary_text(result.stderr)
    assert (
        f"depth updates {len(corrections)} (shorter paths found after the record; in " in summary
    )
    assert f"--depth-updates {updates} -o report.html\n" in result.stderr  # a line of its own
    # The report applies them: its depth chart is the shortest depths'.
    data = aggregate_file(str(out), str(updates))
    expected: dict[int, int] = {}
    for depth, _ in shortest_depths(server.base_url).values():
        expected[depth] = expected.get(depth, 0) + 1
    assert data.depths == dict(sorted(expected.items()))
    assert aggregate_file(str(out)).depths != data.depths  # without the file: recorded depths


def test_without_the_flag_corrections_are_counted_and_the_summary_says_where(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    with serve_site(late_shortcut_site()) as server:
        result = run_cli(server.url("/"), "--ignore-robots", "-o", str(out))
    assert result.returncode == 0, result.stderr
    records = records_in(out.read_text())
    assert (
        len(records) == len({r["url"] for r in records}) == len(shortest_depths(server.base_url))
    )
    summary = summary_text(result.stderr)
    assert summary.count("depth updates") == 1, result.stderr  # one row, not one per correction
    assert re.search(
        r"depth updates [1-9]\d* \(shorter paths found after the record; "
        r"not written; --depth-updates FILE keeps them\)",
        summary,
    ), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_depth_updates_to_stdout_beside_an_output_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with serve_site(late_shortcut_site()) as server:
        result = run_cli(
            server.url("/"), "--ignore-robots", "-q", "-o", str(out), "--depth-updates", "-"
        )
    assert result.returncode == 0, result.stderr
    corrections = [json.loads(line) for line in result.stdout.splitlines()]
    assert corrections and all(u["depth_update"] is True for u in corrections)
    final = fold_depth_updates(records_in(out.read_text()), corrections)
    assert_final_depths(final, server.base_url)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "-", "--depth-updates", "-"], "--depth-updates - and -o - would both write"),
        (
            ["--depth-updates", "-"],
            "--depth-updates - and the records (stdout, without -o FILE) would both write",
        ),
    ],
)
def test_two_streams_on_stdout_are_refused(args: list[str], message: str) -> None:
    result = run_cli("http://127.0.0.1:9/", *args)
    assert result.returncode == 2
    assert result.stderr == f"trio-crawl: error: {message} to stdout: give one of them a file\n"
    assert result.stdout == ""


def test_a_resumed_state_crawl_appends_to_its_depth_updates(tmp_path: Path) -> None:
    """With --state the updates file is appended to, as -o is, and a torn
    last line (a kill mid-write) is cut first. The first run makes its
    corrections, then hangs on /tail and is stopped (SIGINT); the resumed
    run fetches /tail and keeps what the first wrote."""
    out, updates, state = tmp_path / "out.jsonl", tmp_path / "u.jsonl", tmp_path / "c.db"
    tail = threading.Event()
    with serve_site(late_shortcut_site(tail=tail)) as server:
        command = [
            sys.executable, "-m", "trio_crawl", server.url("/"), "--ignore-robots", "-q",
            "-o", str(out), "--state", str(state), "--depth-updates", str(updates),
            "--grace", "0.1",
        ]  # fmt: skip
        first = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + TIMEOUT  # polls the server's count, not a clock
        while server.count("/tail") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.count("/tail") == 1, "the first run reached /tail"
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=TIMEOUT) == 130
        written = updates.read_text()
        assert written.count("\n") >= 1  # /slow's corrections were made before /tail
        with updates.open("a") as torn:
            torn.write('{"url": "http://')
        tail.set()
        again = run_cli(*command[3:])
    assert again.returncode == 0, again.stderr
    assert server.count("/tail") == 2  # resumed: fetched again
    assert updates.read_text().startswith(written)  # appended to, its torn line cut
    assert all(json.loads(line)["depth_update"] for line in updates.read_text().splitlines())
    assert len(records_in(out.read_text())) == len(shortest_depths(server.base_url)) + 1


# -- the manual's recipes, as written -----------------------------------------


def manual_recipe() -> list[str]:
    """The commands of the manual's fenced block that folds --depth-updates
    into the records (the one that writes ``final.jsonl``)."""
    blocks = re.findall(r"```console\n(.*?)```", OUTPUT_PAGE.read_text(), re.S)
    (block,) = [b for b in blocks if "final.jsonl" in b]
    return [line[2:] for line in block.splitlines() if line.startswith("$ ")]


def test_the_manual_recipe_gives_final_depths(tmp_path: Path) -> None:
    """Runs the manual's block line by line in a shell, in an empty folder;
    only the start URL is this test's local server instead of example.org."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed (apt-get install jq; .ci/run installs it)")
    pytest.importorskip("matplotlib", reason="the recipe's report needs trio-crawl[report]")
    commands = manual_recipe()
    assert any(c.startswith("jq ") for c in commands), commands
    assert any(c.startswith("trio-crawl report ") for c in commands), commands
    with serve_site(late_shortcut_site()) as server:
        for command in commands:
            command = command.replace("https://example.org/", server.url("/"))
            argv0 = shlex.split(command)[0]
            if argv0 == "trio-crawl":  # this checkout's, whatever is on PATH
                command = (
                    f"{shlex.quote(sys.executable)} -m trio_crawl{command[len('trio-crawl') :]}"
                )
            result = subprocess.run(
                command, shell=True, cwd=tmp_path, capture_output=True, text=True,
                timeout=TIMEOUT, stdin=subprocess.DEVNULL, executable="/bin/bash",
            )  # fmt: skip
            assert result.returncode == 0, (command, result.stderr)
    records = records_in((tmp_path / "pages.jsonl").read_text())
    final = records_in((tmp_path / "final.jsonl").read_text())
    assert len(final) == len(records) == len(shortest_depths(server.base_url))
    assert_final_depths({r["url"]: r for r in final}, server.base_url)
    # Everything else about each record is as it was written.
    by_url = {r["url"]: r for r in records}
    for record in final:
        written = dict(by_url[record["url"]], depth=record["depth"], referrer=record["referrer"])
        assert record == written
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
