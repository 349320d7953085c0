"""A server of hostile answers, written byte by byte on raw sockets (issue #11).

``serve_site`` can only send well-formed HTTP (with a few faults); the
answers here are what real crawls meet and no framework would send: bodies
that never end, heads that never end, lying ``Content-Length``, broken
chunking, ``Location`` with control characters, ...

Rules:

1. 127.0.0.1, port 0, stdlib threads only (like ``serve_site``): one accept
   thread, one thread per connection, so it runs beside a trio test.
2. A route is ``answer(sock, stop) -> keep_alive``: it writes whatever it
   likes and says whether the connection may carry another request. Long or
   endless answers wait on ``stop`` (an Event), so they end when the server
   does; a client that goes away ends them too (``OSError``).
3. Every request target is logged in ``HostileServer.targets``.
4. Shutdown is bounded: ``stop`` is set, every connection is shut down and
   every thread joined for at most a few seconds.

``hanging_server_process`` is different: a separate process whose listener
accepts connections and never answers, so that a test can count its own
file descriptors without the server's.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["Answer", "HostileServer", "hanging_server_process", "serve_hostile"]

Answer = Callable[[socket.socket, threading.Event], bool]

_JOIN_SECONDS = 5.0
_MAX_REQUEST_HEAD = 64 * 1024


class HostileServer:
    def __init__(self, routes: dict[str, Answer], listener: socket.socket) -> None:
        self.routes = routes
        self._listener = listener
        self.port: int = listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.targets: list[str] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._live: dict[int, socket.socket] = {}
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, daemon=True)

    def url(self, target: str) -> str:
        return self.base_url + target

    def _accept_loop(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed: shutting down
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            with self._lock:
                self._live[sock.fileno()] = sock
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        buffer = b""
        try:
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data or len(buffer) > _MAX_REQUEST_HEAD:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
                with self._lock:
                    self.targets.append(target)
                answer = self.routes.get(target, not_found)
                if not answer(sock, self.stop):
                    return
        except OSError:
            pass  # the client went away
        finally:
            with self._lock:
                self._live.pop(fd, None)
            with contextlib.suppress(OSError):
                sock.close()

    def _shutdown(self) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept() on Linux
        self._listener.close()
        with self._lock:
            live = list(self._live.values())
            threads = [*self._threads, self._accept]
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + _JOIN_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


@contextlib.contextmanager
def serve_hostile(routes: dict[str, Answer]) -> Iterator[HostileServer]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    server = HostileServer(routes, listener)
    server._accept.start()
    try:
        yield server
    finally:
        server._shutdown()


def not_found(sock: socket.socket, stop: threading.Event) -> bool:
    sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    return True


# -- a process that accepts and never answers ---------------------------------------

_HANGING = r"""
import selectors, socket, sys
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4096)
listener.setblocking(False)
print(listener.getsockname()[1], flush=True)
held = selectors.DefaultSelector()
held.register(listener, selectors.EVENT_READ)
held.register(sys.stdin, selectors.EVENT_READ)
while True:
    for key, _ in held.select():
        if key.fileobj is sys.stdin:
            sys.exit(0)  # the test is done (stdin closed)
        if key.fileobj is listener:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                continue
            held.register(conn, selectors.EVENT_READ)  # read, never answer
        else:
            data = b""
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                pass
            if not data:  # the client gave up: forget it
                held.unregister(key.fileobj)
                key.fileobj.close()
"""


@contextlib.contextmanager
def hanging_server_process() -> Iterator[str]:
    """A server in another process that accepts every connection, reads the
    request and never answers; yields its base URL. Ends with the block."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HANGING],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
