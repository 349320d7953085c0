"""The WARC writer process (``outputs/warc_process.py``, ``outputs/archive.py``):
exchanges go through a real pipe to a real child, are acked, and read back
with warcio; the file lock; a writer killed mid-crawl stops the crawl without
a record of a page the WARC lacks. Every wait has a deadline."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.core.models import FetchResult
from trio_crawl.outputs.warc import WarcFileBusy, WarcWriter, read_warc_responses, repair_warc
from trio_crawl.outputs.warc_process import WarcProcess
from trio_crawl.testing import Response, Site, page, serve_site

pytest.importorskip("warcio")


def result(i: int, size: int) -> FetchResult:
    body = bytes((i * 7 + k) % 251 for k in range(size))
    headers = {"content-type": "text/html", "x-n": str(i)}
    return FetchResult(
        f"http://127.0.0.1/p/{i}", 200 + i % 3, headers, body, 0.01, False, "HTTP/2"
    )


def wait_until(process: WarcProcess, acked: int, deadline: float) -> None:
    """Drive the process as the trio link does: flush when writable, read acks."""
    while process.acked < acked:
        assert time.monotonic() < deadline, f"acked {process.acked} of {acked}"
        writers = [process.send_fd] if process.pending else []
        readable, writable, _ = select.select([process.ack_fd], writers, [], 0.5)
        if writable:
            process.flush()
        if readable:
            assert process.read_acks(), process.error


def test_every_submitted_exchange_is_acked_and_stored(tmp_path: Path) -> None:
    path = str(tmp_path / "a.warc.gz")
    process = WarcProcess.start(path, info={"crawl": "test"}, append=False)
    # Sizes from empty to 3 MiB: the big ones overflow the pipe into ``pending``.
    sizes = [0, 1, 15_000, 3 << 20, 70_000, 2 << 20, 100] * 3
    numbers = [process.submit(r.url, r, date=1.7e9 + i) for i, r in
               enumerate(result(i, n) for i, n in enumerate(sizes))]  # fmt: skip
    assert numbers == list(range(1, len(sizes) + 1))
    assert process.pending > 0  # 3 MiB did not fit: drained by flush()
    wait_until(process, len(sizes), time.monotonic() + 30)
    process.close()
    assert process.error is None
    stored = read_warc_responses(path)
    assert len(stored) == len(sizes)
    for i, size in enumerate(sizes):
        expected = result(i, size)
        got = stored[expected.url]
        assert got.status == expected.status
        assert got.body == expected.body
        assert got.headers["x-n"] == str(i)


def test_the_child_inherits_the_lock_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "a.warc.gz")
    process = WarcProcess.start(path, append=False)
    try:
        t0 = time.monotonic()
        with pytest.raises(WarcFileBusy, match="in use by another crawl"):
            WarcWriter.open(path, lock_timeout=0.3)
        assert time.monotonic() - t0 >= 0.3  # it waited before giving up
        process.submit("http://127.0.0.1/x", result(1, 10), date=1.7e9)
        wait_until(process, 1, time.monotonic() + 30)
    finally:
        process.close()
    with WarcWriter.open(path) as writer:  # the child is gone: free again
        assert writer.repaired_bytes == 0
    assert list(read_warc_responses(path)) == ["http://127.0.0.1/x"]


def test_a_failing_child_reports_one_line(tmp_path: Path) -> None:
    path = str(tmp_path / "a.warc.gz")
    process = WarcProcess.start(path, append=False)
    os.kill(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while process.read_acks():
        assert time.monotonic() < deadline
        select.select([process.ack_fd], [], [], 0.5)
    process.close()
    assert process.error is not None
    assert "WARC writer stopped" in str(process.error.strerror)


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc/*/stat: any Linux kernel)."""
    found: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def writer_after(out: Path, lines: int, proc: subprocess.Popen[Any]) -> int:
    """Wait (30 s at most) until the crawl has written ``lines`` records;
    then the pid of its WARC writer (not its parse co-process)."""
    deadline = time.monotonic() + 30
    while not (out.exists() and out.read_text().count("\n") >= lines):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.005)
    (writer,) = [
        pid
        for pid in children(proc.pid)
        if b"warc_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    return writer


def slow_site(pages: int) -> Site:
    return Site({f"/p/{i}": page(*(f"/p/{j}" for j in range(i + 1, min(i + 4, pages))))
                 for i in range(pages)})  # fmt: skip


def test_killing_the_writer_stops_the_crawl_and_lists_only_archived_pages(
    tmp_path: Path,
) -> None:
    out, warc = tmp_path / "out.jsonl", tmp_path / "a.warc.gz"
    with serve_site(slow_site(400)) as server:
        args = [server.url("/p/0"), "-q", "-o", str(out), "--warc", str(warc),
                "-w", "4", "--rate", "100"]  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "trio_crawl", *args],
                                stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        try:
            writer = writer_after(out, 20, proc)
            # Stopped first, so pages pile up waiting for their acks: none of
            # them may be listed once the writer is gone.
            os.kill(writer, signal.SIGSTOP)
            time.sleep(0.3)
            os.kill(writer, signal.SIGKILL)
            _, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 3
    reason = "the WARC writer stopped (killed by SIGKILL)"
    assert (
        stderr.strip().splitlines()[-1] == f"trio-crawl: error: cannot write to {warc}: {reason}"
    )
    repair_warc(warc)  # the kill may have torn the last record
    stored = read_warc_responses(str(warc))
    listed = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert 20 <= len(listed) < 400
    assert set(listed) <= set(stored)  # no record of a page the WARC lacks


def test_a_killed_crawl_leaves_its_writer_to_finish_what_it_was_sent(tmp_path: Path) -> None:
    out, warc = tmp_path / "out.jsonl", tmp_path / "a.warc.gz"
    with serve_site(slow_site(400)) as server:
        args = [server.url("/p/0"), "-q", "-o", str(out), "--warc", str(warc), "-w", "8"]
        proc = subprocess.Popen([sys.executable, "-m", "trio_crawl", *args],
                                stdin=subprocess.DEVNULL)  # fmt: skip
        try:
            writer = writer_after(out, 50, proc)
            deadline = time.monotonic() + 30
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            # The writer ends on its own once the pipe is empty, and lets go of
            # the file: a new writer gets the lock.
            WarcWriter.open(warc, lock_timeout=20).close()
            while Path(f"/proc/{writer}").exists() and not _is_zombie(writer):
                assert time.monotonic() < deadline, "the writer did not end"
                time.sleep(0.01)
        finally:
            proc.kill()
    listed = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert set(listed) <= set(read_warc_responses(str(warc)))


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_busy_warc_is_a_one_line_error_and_the_output_is_untouched(tmp_path: Path) -> None:
    out, warc = tmp_path / "out.jsonl", tmp_path / "a.warc.gz"
    out.write_text('{"kept": true}\n')
    site = Site({"/": Response(body=page().body)})
    with WarcWriter.open(warc), serve_site(site) as server:
        done = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.url("/"), "-q", "-o", str(out),
             "--warc", str(warc)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 3
    assert done.stderr.strip() == (
        f"trio-crawl: error: cannot write to {warc}: in use by another crawl"
    )
    assert out.read_text() == '{"kept": true}\n'


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_for_the_warc_is_a_one_line_error(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"kept": true}\n')
    with serve_site(Site({"/": Response(body=page().body)})) as server:
        done = subprocess.run(
            [sys.executable, "-m", "trio_crawl", server.url("/"), "-q", "-o", str(out),
             "--warc", "/dev/full"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 3
    assert (
        done.stderr.strip()
        == "trio-crawl: error: cannot write to /dev/full: No space left on device"
    )
    assert out.read_text() == '{"kept": true}\n'
