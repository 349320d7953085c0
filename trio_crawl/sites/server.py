"""Serve a ``Site`` over real HTTP/1.1 on 127.0.0.1, from background threads.

Used by the tests, the benchmarks and ``trio-crawl demo``. Rules:

1. Stdlib only (socket, selectors, threading): no trio, so the server runs
   beside a trio crawler in the same process without sharing its event loop,
   and in a subprocess just as well.
2. One accept thread plus one thread per TCP connection. Threads are cheap
   next to what a test crawl needs (hundreds of connections, thousands of
   requests), and a blocking connection loop is easy to read.
3. Every request is logged (``SiteServer.log``) before it is answered, so a
   test can assert what the crawler asked for, on which connection, and when.
4. Faults are applied exactly as ``Response`` documents them. Body byte counts
   (``reset_after``, "half-way" for ``truncate``) are on the wire after the
   header block: after gzip and including chunk framing.
5. Shutdown is bounded: ``serve_site`` wakes every thread (closing the
   listener, shutting connection sockets, setting the stop event that delays
   and drips wait on) and joins them for at most a few seconds.
6. A route function that raises is a bug in the test: the client gets a 500
   and ``serve_site`` re-raises the first such error when it exits.
7. With ``tls`` (a server-side ``ssl.SSLContext``) every connection is TLS,
   handshaken in its own thread, and ``base_url`` is ``https://``: the same
   site and faults over https (a test's throwaway CA signs the certificate).
   A failed handshake just closes that connection.

Theory of a connection: read until a blank line, parse the head, consume a
``Content-Length`` body, log, pick the answer, write it (faults included),
then loop while the connection is keep-alive. Bytes already read past one
request stay in the buffer, so pipelined requests are answered in order.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import http
import selectors
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .site import Response, Site, SiteRequest

__all__ = ["LoggedRequest", "SiteServer", "serve_site"]

_MAX_HEAD = 64 * 1024  # larger request heads get 431 and a close
_RECV = 64 * 1024
_DRIP_PIECE = 1024  # ``drip`` waits between pieces of this size
_CHUNK = 16 * 1024  # chunk size of chunked bodies when not dripping
_JOIN_SECONDS = 5.0  # shutdown waits at most this long for threads
_RESET_PAUSE = 0.01  # let sent bytes reach the peer before the RST discards them


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request as the server received it.

    ``time`` is ``time.monotonic()`` when the request head was parsed;
    ``headers`` has lower-case names (repeats joined with ``", "``);
    ``connection_id`` numbers TCP connections from 1 in accept order.
    """

    time: float
    method: str
    target: str
    headers: dict[str, str]
    connection_id: int


class _BadRequest(Exception):
    """The client sent something we cannot parse; answer ``status`` and close."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class SiteServer:
    """A running server for one ``Site``. Create it with ``serve_site``."""

    def __init__(
        self, site: Site, listener: socket.socket, tls: ssl.SSLContext | None = None
    ) -> None:
        self.site = site
        self._listener = listener
        self._tls = tls
        host, port = listener.getsockname()[:2]
        self.port: int = port
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"{'https' if tls else 'http'}://{shown}:{port}"
        self.log: list[LoggedRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sequence_hits: Counter[str] = Counter()
        self._connections = 0
        self._live: dict[int, tuple[socket.socket, threading.Thread]] = {}
        self._route_errors: list[BaseException] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"site-server:{port}", daemon=True
        )

    def __repr__(self) -> str:
        return (
            f"<SiteServer {self.base_url} connections={self._connections} "
            f"requests={len(self.log)} live={len(self._live)}>"
        )

    # -- what tests read ------------------------------------------------------

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._connections

    def count(self, target: str) -> int:
        """How many requests (any method) asked for ``target``."""
        with self._lock:
            return sum(1 for entry in self.log if entry.target == target)

    def targets(self) -> list[str]:
        """Request targets in arrival order, repeats included."""
        with self._lock:
            return [entry.target for entry in self.log]

    def url(self, target: str) -> str:
        """``base_url + target``; ``target`` starts with ``/``."""
        return self.base_url + target

    # -- lifecycle ------------------------------------------------------------

    def _start(self) -> None:
        self._accept_thread.start()

    def _shutdown(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._accept_thread.join(_JOIN_SECONDS)
        deadline = time.monotonic() + _JOIN_SECONDS
        with self._lock:
            live = list(self._live.values())
        for sock, _ in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in live:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stop.is_set():
                selector.select()
                while not self._stop.is_set():  # take every pending connection
                    try:
                        sock, _ = self._listener.accept()
                    except BlockingIOError:
                        break
                    except OSError:  # aborted by the client, or out of fds: back off
                        self._stop.wait(0.01)
                        break
                    self._spawn(sock)

    def _spawn(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._connections += 1
            conn_id = self._connections
            thread = threading.Thread(
                target=self._serve_connection,
                args=(sock, conn_id),
                name=f"site-conn:{self.port}:{conn_id}",
                daemon=True,
            )
            self._live[conn_id] = (sock, thread)
        thread.start()

    # -- one connection -------------------------------------------------------

    def _serve_connection(self, sock: socket.socket, conn_id: int) -> None:
        reset = False
        try:
            if self._tls is not None:  # rule 7
                sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                with self._lock:  # so that shutdown can wake this thread, handshake included
                    self._live[conn_id] = (sock, self._live[conn_id][1])
                sock.do_handshake()
            buffer = bytearray()
            while not self._stop.is_set():
                try:
                    parsed = _read_request(sock, buffer)
                except _BadRequest as bad:
                    _send_simple(sock, bad.status)
                    break
                if parsed is None:
                    break
                method, target, version, headers = parsed
                self._log(method, target, headers, conn_id)
                response = self._answer(SiteRequest(method, target, headers))
                keep_alive = _wants_keep_alive(version, headers) and not response.close
                reset, closed = self._write(sock, method, response, keep_alive)
                if reset or closed or not keep_alive:
                    break
        except OSError:
            pass  # the client went away; nothing to report
        finally:
            if reset:
                _reset(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
                sock.close()
            with self._lock:
                self._live.pop(conn_id, None)

    def _log(self, method: str, target: str, headers: dict[str, str], conn_id: int) -> None:
        entry = LoggedRequest(time.monotonic(), method, target, headers, conn_id)
        with self._lock:
            self.log.append(entry)

    def _answer(self, request: SiteRequest) -> Response:
        route = self.site.routes.get(request.target)
        try:
            if route is None:
                if self.site.fallback is not None:
                    return self.site.fallback(request)
                return Response(status=404, body=b"<!doctype html><title>Not found</title>")
            if isinstance(route, Response):
                return route
            if callable(route):
                return route(request)
            return self._next_in_sequence(request.target, route)
        except Exception as exc:
            with self._lock:
                self._route_errors.append(exc)
            return Response(status=500, body=b"route raised", content_type="text/plain")

    def _next_in_sequence(self, target: str, answers: Sequence[Response]) -> Response:
        with self._lock:
            index = self._sequence_hits[target]
            self._sequence_hits[target] += 1
        return answers[min(index, len(answers) - 1)]

    def _write(
        self, sock: socket.socket, method: str, response: Response, keep_alive: bool
    ) -> tuple[bool, bool]:
        """Send one answer with its faults. Returns ``(reset, closed)``: whether
        the connection must end with a reset or has already been cut short."""
        if response.delay and self._stop.wait(response.delay):
            return False, True
        body = _gzip(response.body) if response.gzip else response.body
        head = _head(response, len(body), keep_alive)
        if method == "HEAD":
            wire = b""
        elif response.chunked:
            kept = body[: len(body) // 2] if response.truncate else body
            wire = _chunked(kept, _DRIP_PIECE if response.drip else _CHUNK, not response.truncate)
        else:
            wire = body[: len(body) // 2] if response.truncate else body
        cut = response.reset_after is not None  # reset even if the whole body fits
        if response.reset_after is not None:
            wire = wire[: response.reset_after]
        if not response.drip:
            if len(wire) <= _RECV:
                sock.sendall(head + wire)
            else:
                sock.sendall(head)
                sock.sendall(wire)
        else:
            sock.sendall(head)
            for start in range(0, len(wire), _DRIP_PIECE):
                if start and self._stop.wait(response.drip):
                    return False, True
                sock.sendall(wire[start : start + _DRIP_PIECE])
        if cut:
            self._stop.wait(_RESET_PAUSE)
            return True, True
        return False, response.truncate and method != "HEAD"


@contextlib.contextmanager
def serve_site(
    site: Site, host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None
) -> Iterator[SiteServer]:
    """Serve ``site`` until the block ends; yields the running ``SiteServer``
    (over TLS with the server-side context ``tls``, rule 7).

    Binds before yielding, so ``server.base_url`` is ready to use. On exit,
    stops accepting, cuts every connection and joins all threads (bounded,
    about 5 s at worst). If a route function raised while serving, the first
    such error is re-raised here (unless the block is already raising).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    server = SiteServer(site, listener, tls)
    server._start()
    try:
        yield server
    finally:
        server._shutdown()
    if server._route_errors:
        raise RuntimeError("a route function raised while serving") from server._route_errors[0]


# -- pure helpers -------------------------------------------------------------


def _read_request(
    sock: socket.socket, buffer: bytearray
) -> tuple[str, str, str, dict[str, str]] | None:
    """Read one request head (and discard its body) from ``sock``.

    Returns ``None`` on a clean end of stream between requests.
    """
    while True:
        while buffer[:2] == b"\r\n":  # RFC 9112: ignore blank lines before a request
            del buffer[:2]
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(buffer) > _MAX_HEAD:
            raise _BadRequest(431)
        data = sock.recv(_RECV)
        if not data:
            if buffer:
                raise _BadRequest(400)
            return None
        buffer += data
    head = bytes(buffer[:end]).decode("latin-1")
    del buffer[: end + 4]
    request_line, *lines = head.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequest(400)
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _BadRequest(400)
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _BadRequest(411)  # we do not parse chunked request bodies
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest(400) from None
    _discard(sock, buffer, length)
    return method, target, version, headers


def _discard(sock: socket.socket, buffer: bytearray, length: int) -> None:
    while len(buffer) < length:
        length -= len(buffer)
        buffer.clear()
        data = sock.recv(min(_RECV, length))
        if not data:
            raise OSError("client closed inside a request body")
        buffer += data
    del buffer[:length]


def _wants_keep_alive(version: str, headers: dict[str, str]) -> bool:
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    if version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


def _head(response: Response, body_length: int, keep_alive: bool) -> bytes:
    try:
        reason = http.HTTPStatus(response.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    if response.content_type is not None:
        lines.append(f"Content-Type: {response.content_type}")
    if response.gzip:
        lines.append("Content-Encoding: gzip")
    if response.chunked:
        lines.append("Transfer-Encoding: chunked")
    else:
        lines.append(f"Content-Length: {body_length}")
    if not keep_alive:
        lines.append("Connection: close")
    lines.extend(f"{name}: {value}" for name, value in response.headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunked(body: bytes, size: int, terminate: bool) -> bytes:
    frames = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
        for i in range(0, len(body), size)
    ]
    if terminate:
        frames.append(b"0\r\n\r\n")
    return b"".join(frames)


@functools.lru_cache(maxsize=64)
def _gzip(body: bytes) -> bytes:
    """gzip ``body`` once per distinct body (big bodies are served many times)."""
    return gzip.compress(body, compresslevel=6, mtime=0)


def _send_simple(sock: socket.socket, status: int) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )


def _reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the kernel sends RST instead of FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
