"""One crawl per state file: the lock on ``PATH.lock`` (issues #11 and #13).

Real files under ``tmp_path``, real second processes (one killed with SIGKILL
while it holds the lock). Every subprocess has a timeout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trio_crawl.core.config import CrawlConfig
from trio_crawl.errors import StateInUseError, StateLockedError, StateUsageError
from trio_crawl.frontiers.sqlite import CrawlState
from trio_crawl.frontiers.sqlite.resume import (
    PreparedState,
    prepare_state,
    status_text,
    stored_start_urls,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="locks need fcntl")

TIMEOUT = 30
START = "http://lock.test/"


def locked_message(path: Path, pid: int) -> str:
    """The exact message, as a full-match pattern."""
    return (
        rf"^{re.escape(str(path))} is in use by another trio-crawl \(pid {pid}\);"
        r" wait for it to end, or use another --state file$"
    )


def prepare(path: Path) -> PreparedState:
    config = CrawlConfig.from_options(start_urls=[START])
    return prepare_state(config, state_path=str(path), seeds=None, output=None, force=False)


# A second process that opens the state for crawling, says so, and holds it
# until its standard input closes (or it is killed).
HOLDER = r"""
import sys
from trio_crawl.core.config import CrawlConfig
from trio_crawl.frontiers.sqlite.resume import prepare_state
prepared = prepare_state(
    CrawlConfig.from_options(start_urls=[sys.argv[2]]),
    state_path=sys.argv[1], seeds=None, output=None, force=False,
)
prepared.state.add_seeds([sys.argv[2] + "more"])
print("locked", flush=True)
sys.stdin.read()
prepared.close()
print("closed", flush=True)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A second process holding ``tmp_path / "crawl.db"``."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "crawl.db"), START],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline() == "locked\n"
        yield child
    finally:
        child.kill()
        child.wait(timeout=TIMEOUT)
        child.stdin.close()
        child.stdout.close()


def test_a_second_open_in_this_process_is_refused_until_the_first_closes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crawl.db"
    lock_file = tmp_path / "crawl.db.lock"
    first = CrawlState.open(path)
    first.add_seeds([START])
    assert lock_file.read_text() == f"{os.getpid()}\n"
    with pytest.raises(StateInUseError, match=locked_message(path, os.getpid())) as info:
        CrawlState.open(path)
    assert info.value.pid == os.getpid() and info.value.path == path
    with pytest.raises(StateLockedError, match=locked_message(path, os.getpid())) as locked:
        prepare(path)
    assert isinstance(locked.value, StateUsageError)  # the CLI's exit 2, at the least
    assert first.queued_on_disk() == 1  # the refused opens changed nothing
    first.close()
    assert not lock_file.exists()  # closing removes it
    with CrawlState.open(path) as again:
        assert again.queued_on_disk() == 1
    prepared = prepare(path)
    try:
        with pytest.raises(StateLockedError, match=locked_message(path, os.getpid())):
            prepare(path)
    finally:
        prepared.close()
    prepare(path).close()


def test_a_refused_crawl_leaves_the_running_crawls_output_alone(tmp_path: Path) -> None:
    path, out = tmp_path / "crawl.db", tmp_path / "pages.jsonl"
    config = CrawlConfig.from_options(start_urls=[START])
    first = prepare_state(config, state_path=str(path), seeds=None, output=str(out), force=False)
    try:
        out.write_text('{"url": "http://lock.test/"}\n{"url": "http://lock.t')  # mid-write
        before = out.read_bytes()
        with pytest.raises(StateLockedError):
            prepare_state(config, state_path=str(path), seeds=None, output=str(out), force=False)
        assert out.read_bytes() == before  # no "torn last line" cut off
    finally:
        first.close()


def test_a_symlink_to_the_file_is_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "elsewhere" / "link.db"
    link.symlink_to(path)
    with (
        CrawlState.open(path),
        pytest.raises(StateInUseError, match=locked_message(link, os.getpid())),
    ):
        CrawlState.open(link)
    with CrawlState.open(link):
        assert (tmp_path / "crawl.db.lock").exists()
        with pytest.raises(StateInUseError, match=locked_message(path, os.getpid())):
            CrawlState.open(path)


def test_readers_take_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    prepared = prepare(path)
    try:
        assert "done 0  queued 1" in status_text(str(path))
        assert stored_start_urls(str(path)) == [START]
        with CrawlState.open(path, create=False, lock=False) as reader:
            assert reader.progress()["total"] == 1
        # The readers did not release, or remove, the crawl's lock.
        assert (tmp_path / "crawl.db.lock").exists()
        with pytest.raises(StateInUseError):
            CrawlState.open(path)
    finally:
        prepared.close()


def test_another_process_holding_the_file_is_named_by_its_pid(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    path = tmp_path / "crawl.db"
    with pytest.raises(StateLockedError, match=locked_message(path, holder.pid)):
        prepare(path)
    with pytest.raises(StateInUseError, match=locked_message(path, holder.pid)):
        CrawlState.open(path, create=False)
    # --status works while the other crawl runs, and sees what it committed.
    assert status_text(str(path)).splitlines() == [
        f"state file: {path}",
        f"start URLs: {START}",
        "done 0  queued 2  in flight at stop 0  dropped 0  total 2",
    ]
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.close()
    assert holder.stdout.readline() == "closed\n"
    assert holder.wait(timeout=TIMEOUT) == 0
    prepared = prepare(path)
    try:
        assert prepared.resumed
    finally:
        prepared.close()


def test_a_crawl_killed_with_sigkill_leaves_no_stale_lock(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    path = tmp_path / "crawl.db"
    lock_file = tmp_path / "crawl.db.lock"
    assert lock_file.read_text() == f"{holder.pid}\n"
    holder.send_signal(signal.SIGKILL)
    assert holder.wait(timeout=TIMEOUT) == -signal.SIGKILL
    assert lock_file.read_text() == f"{holder.pid}\n"  # the file stays; its lock does not
    prepared = prepare(path)
    try:
        assert prepared.resumed
        assert lock_file.read_text() == f"{os.getpid()}\n"
        with pytest.raises(StateLockedError, match=locked_message(path, os.getpid())):
            prepare(path)
    finally:
        prepared.close()
    assert not lock_file.exists()


def test_a_file_that_is_not_ours_leaves_no_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with pytest.raises(ValueError, match=r"not a trio-crawl state file"):
        CrawlState.open(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    with pytest.raises(StateUsageError, match=r"not a trio-crawl state file"):
        prepare(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_no_two_holders_at_once_while_opening_and_closing_in_a_race(tmp_path: Path) -> None:
    """Closing removes the lock file while others may have it open: an opener
    that locked a removed file must try again, never hold the lock beside the
    owner of a new file."""
    path = tmp_path / "crawl.db"
    CrawlState.open(path).close()
    holders: list[int] = []
    got = [0] * 4
    errors: list[BaseException] = []
    deadline = time.monotonic() + 3

    def contend(me: int) -> None:
        try:
            while time.monotonic() < deadline and got[me] < 25:
                try:
                    state = CrawlState.open(path)
                except StateInUseError:
                    continue
                holders.append(me)
                assert len(holders) == 1, holders
                time.sleep(0.001)
                holders.remove(me)
                state.close()
                got[me] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(got) >= 4
    assert not (tmp_path / "crawl.db.lock").exists()
