"""The forked parse child (engine/parse_fork.py): a fork of the crawl that
parses, holds nothing of the crawl's but its socket, and is waited for and
killed through its pidfd. Every wait is bounded by ``trio.fail_after``."""

from __future__ import annotations

import marshal
import os
import signal
import socket
import sys
import threading

import pytest
import trio

from trio_crawl.engine.parse_child import HEAD, READY, frame
from trio_crawl.engine.parse_fork import can_fork, fork_child

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forks on Linux only")

LIMIT = 30


async def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        await trio.lowlevel.wait_readable(sock)
        data += sock.recv(size - len(data))
    return data


async def read_frame(sock: socket.socket) -> object:
    (length,) = HEAD.unpack(await read_exactly(sock, HEAD.size))
    return marshal.loads(await read_exactly(sock, length))


async def test_a_forked_child_parses_pages_and_exits_at_end_of_file() -> None:
    ours, theirs = socket.socketpair()
    child = fork_child(theirs)
    assert theirs.fileno() == -1  # closed in the parent
    with trio.fail_after(LIMIT):
        assert await read_frame(ours) == READY
        ours.sendall(frame((1, "http://h.test/a/", "text/html", b'<a href="b">b</a>')))
        assert await read_frame(ours) == (1, ["http://h.test/a/b"])
        ours.close()
        assert await child.wait() == 0


async def test_a_forked_child_is_killed_through_its_pidfd() -> None:
    ours, theirs = socket.socketpair()
    child = fork_child(theirs)
    with trio.fail_after(LIMIT):
        child.kill()
        assert await child.wait() == -signal.SIGKILL
        child.kill()  # reaped: nothing to signal, no error
    ours.close()


async def test_a_forked_child_holds_none_of_the_crawls_descriptors() -> None:
    # An output the crawl closes must end for its reader, though the child
    # was forked while it was open (the pipe stands for any of them).
    read_end, write_end = os.pipe()
    ours, theirs = socket.socketpair()
    child = fork_child(theirs)
    os.close(write_end)
    try:
        with trio.fail_after(LIMIT):
            await trio.lowlevel.wait_readable(read_end)
            assert os.read(read_end, 1) == b""  # end-of-file: no writer is left
            assert await read_frame(ours) == READY
            ours.close()
            assert await child.wait() == 0
    finally:
        os.close(read_end)


def test_no_fork_beside_another_thread() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, args=(LIMIT,))
    thread.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        thread.join()
