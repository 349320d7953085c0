"""The in-process test server, observed with raw sockets.

Rules: servers on 127.0.0.1 port 0 only; every socket has a timeout and
every trio test a ``fail_after``; faults are checked at the byte level, so a
fetcher test that relies on a fault relies on something pinned here.
"""

from __future__ import annotations

import gzip
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page, redirect

BODY = bytes(range(256)) * 40  # 10240 bytes, not text, not compressible to nothing


@contextmanager
def connect(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        yield sock


def get(path: str, *extra: str, method: str = "GET") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Reader:
    """Reads HTTP/1.1 responses off a blocking socket, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def _take_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            if not self._fill():
                raise EOFError(self.buffer)
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not self._fill():
                raise EOFError(self.buffer)
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def head(self) -> tuple[int, dict[str, str]]:
        status_line, *lines = self._take_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            key = name.lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        return int(status_line.split(" ")[1]), headers

    def response(self, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        status, headers = self.head()
        if method == "HEAD":
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int(self._take_until(b"\r\n"), 16):
                body += self._take(size)
                assert self._take(2) == b"\r\n"
            assert self._take(2) == b"\r\n"
            return status, headers, body
        return status, headers, self._take(int(headers["content-length"]))

    def rest(self) -> bytes:
        """Everything until the server closes."""
        while self._fill():
            pass
        out, self.buffer = self.buffer, b""
        return out


def exchange(port: int, request: bytes, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    with connect(port) as sock:
        sock.sendall(request)
        return Reader(sock).response(method)


# -- routes ---------------------------------------------------------------------


def test_fixed_sequence_callable_fallback_and_404() -> None:
    seen: list[SiteRequest] = []

    def dynamic(request: SiteRequest) -> Response:
        seen.append(request)
        return Response(body=f"{request.method} {request.target}".encode())

    site = Site(
        {
            "/fixed": page("/a", title="T"),
            "/flaky": [Response(status=503), Response(status=502), Response(body=b"ok")],
            "/other-flaky": [Response(status=503), Response(body=b"fine")],
            "/dyn?x=1": dynamic,
            "/moved": redirect("/fixed"),
        }
    )
    with serve_site(site) as server:
        status, headers, body = exchange(server.port, get("/fixed"))
        assert (status, headers["content-type"]) == (200, "text/html; charset=utf-8")
        assert b'<a href="/a">/a</a>' in body and b"<title>T</title>" in body
        flaky = [exchange(server.port, get("/flaky"))[0] for _ in range(5)]
        assert flaky == [503, 502, 200, 200, 200]  # the last answer repeats
        assert exchange(server.port, get("/other-flaky"))[0] == 503  # counted per target
        assert exchange(server.port, get("/dyn?x=1", "X-Thing: Yes"))[2] == b"GET /dyn?x=1"
        assert seen[0].headers["x-thing"] == "Yes"
        status, headers, body = exchange(server.port, get("/moved"))
        assert (status, headers["location"], body) == (301, "/fixed", b"")
        assert "content-type" not in headers
        status, headers, _ = exchange(server.port, get("/dyn"))  # query is part of the key
        assert (status, headers["content-type"]) == (404, "text/html; charset=utf-8")

    fallback_site = Site({}, fallback=lambda r: Response(status=410, body=r.target.encode()))
    with serve_site(fallback_site) as server:
        assert exchange(server.port, get("/gone?y"))[::2] == (410, b"/gone?y")


def test_log_counts_and_connection_ids() -> None:
    with serve_site(Site({"/": page()})) as server:
        before = time.monotonic()
        with connect(server.port) as sock:
            sock.sendall(get("/", "User-Agent: UA/1") + get("/", method="HEAD") + get("/x"))
            reader = Reader(sock)
            assert reader.response()[0] == 200
            status, headers, _ = reader.response("HEAD")
            assert status == 200 and int(headers["content-length"]) > 0
            assert reader.response()[0] == 404
        exchange(server.port, get("/x", "Connection: close"))
        assert server.targets() == ["/", "/", "/x", "/x"]
        assert server.count("/") == 2 and server.count("/x") == 2 and server.count("/y") == 0
        assert [e.connection_id for e in server.log] == [1, 1, 1, 2]
        assert [e.method for e in server.log] == ["GET", "HEAD", "GET", "GET"]
        assert server.log[0].headers == {"host": "test", "user-agent": "UA/1"}
        assert before <= server.log[0].time <= server.log[-1].time <= time.monotonic()
        assert server.connections == 2
        assert server.base_url == f"http://127.0.0.1:{server.port}"


def test_request_bodies_are_consumed_and_connection_close_is_honoured() -> None:
    with serve_site(Site({"/": page()})) as server, connect(server.port) as sock:
        sock.sendall(get("/", "Content-Length: 5", method="POST") + b"hello" + get("/"))
        reader = Reader(sock)
        assert reader.response()[0] == 200
        assert reader.response()[0] == 200
        sock.sendall(get("/", "Connection: close"))
        status, headers, _ = reader.response()
        assert (status, headers["connection"]) == (200, "close")
        assert reader.rest() == b""  # and then the server hangs up
    assert [e.method for e in server.log] == ["POST", "GET", "GET"]


def test_a_raising_route_answers_500_and_fails_the_block() -> None:
    def broken(request: SiteRequest) -> Response:
        raise KeyError("oops")

    with (
        pytest.raises(RuntimeError, match=r"^a route function raised") as info,
        serve_site(Site({"/": broken})) as server,
    ):
        assert exchange(server.port, get("/"))[0] == 500
    assert isinstance(info.value.__cause__, KeyError)


# -- faults ---------------------------------------------------------------------


def test_gzip_and_chunked() -> None:
    site = Site(
        {
            "/gz": Response(body=BODY, gzip=True),
            "/chunked": Response(body=BODY, chunked=True),
            "/both": Response(body=BODY, gzip=True, chunked=True),
        }
    )
    with serve_site(site) as server:
        _, headers, body = exchange(server.port, get("/gz"))
        assert headers["content-encoding"] == "gzip" and gzip.decompress(body) == BODY
        assert int(headers["content-length"]) == len(body) < len(BODY)
        _, headers, body = exchange(server.port, get("/chunked"))
        assert headers["transfer-encoding"] == "chunked" and "content-length" not in headers
        assert body == BODY
        _, headers, body = exchange(server.port, get("/both"))
        assert gzip.decompress(body) == BODY


def test_delay_and_drip() -> None:
    site = Site(
        {
            "/late": Response(body=b"x", delay=0.2),
            "/drip": Response(body=bytes(4096), drip=0.05),  # 4 pieces, 3 waits
        }
    )
    with serve_site(site) as server:
        start = time.monotonic()
        assert exchange(server.port, get("/late"))[2] == b"x"
        assert time.monotonic() - start >= 0.2
        with connect(server.port) as sock:
            sock.sendall(get("/drip"))
            reader = Reader(sock)
            reader.head()
            head_at = time.monotonic()
            assert reader._take(4096) == bytes(4096)
            assert time.monotonic() - head_at >= 0.14


def test_reset_after_sends_exactly_that_many_body_bytes_then_rst() -> None:
    with (
        serve_site(Site({"/": Response(body=BODY, reset_after=3000)})) as server,
        connect(server.port) as sock,
    ):
        sock.sendall(get("/"))
        reader = Reader(sock)
        _, headers = reader.head()
        assert int(headers["content-length"]) == len(BODY)
        received = reader.buffer
        with pytest.raises(ConnectionResetError):
            while data := sock.recv(65536):
                received += data
        assert received == BODY[:3000]


@pytest.mark.parametrize("chunked", [False, True])
def test_truncate_stops_half_way_and_closes(chunked: bool) -> None:
    with (
        serve_site(Site({"/": Response(body=BODY, truncate=True, chunked=chunked)})) as server,
        connect(server.port) as sock,
    ):
        sock.sendall(get("/"))
        reader = Reader(sock)
        _, headers = reader.head()
        rest = reader.rest()
    if chunked:
        assert headers["transfer-encoding"] == "chunked"
        assert not rest.endswith(b"0\r\n\r\n")
        payload, framed = b"", rest
        while framed:
            size_line, _, framed = framed.partition(b"\r\n")
            size = int(size_line, 16)
            payload, framed = payload + framed[:size], framed[size + 2 :]
        assert payload == BODY[: len(BODY) // 2]
    else:
        assert int(headers["content-length"]) == len(BODY)
        assert rest == BODY[: len(BODY) // 2]


def test_close_fault_sends_connection_close_and_hangs_up() -> None:
    with (
        serve_site(Site({"/": Response(body=b"bye", close=True)})) as server,
        connect(server.port) as sock,
    ):
        sock.sendall(get("/") + get("/"))
        reader = Reader(sock)
        _, headers, body = reader.response()
        assert (headers["connection"], body) == ("close", b"bye")
        with pytest.raises(EOFError):
            reader.response()
    assert server.count("/") == 1


def test_malformed_request_gets_400() -> None:
    with serve_site(Site({})) as server, connect(server.port) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        reader = Reader(sock)
        assert reader.response()[0] == 400
        assert reader.rest() == b""


# -- scale and shutdown ----------------------------------------------------------


async def test_hundreds_of_concurrent_connections() -> None:
    site = Site({f"/{i}": Response(body=b"%d" % i, delay=0.2) for i in range(300)})
    bodies: dict[int, bytes] = {}

    async def one(port: int, i: int) -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(get(f"/{i}", "Connection: close"))
            data = b""
            while chunk := await stream.receive_some():
                data += chunk
        bodies[i] = data.partition(b"\r\n\r\n")[2]

    with serve_site(site) as server, trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for i in range(300):
                nursery.start_soon(one, server.port, i)
    assert bodies == {i: b"%d" % i for i in range(300)}
    assert server.connections == 300
    # all 300 were waiting at once: arrivals cluster well inside one delay
    times = sorted(e.time for e in server.log)
    assert times[-1] - times[0] < 5


def test_shutdown_is_prompt_with_busy_and_idle_connections() -> None:
    site = Site({"/slow": Response(body=b"x", delay=30), "/drip": Response(body=BODY, drip=10)})
    with connect_later() as sockets:
        start = time.monotonic()
        with serve_site(site) as server:
            for request in (get("/slow"), get("/drip"), b""):  # b"": an idle connection
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                sockets.append(sock)
                sock.sendall(request)
            deadline = time.monotonic() + 5
            # Both requests are being answered (slowly), and the idle connection
            # has been accepted: one still in the listen backlog when the
            # listener closes gets a reset from the kernel, not an EOF.
            while (len(server.log) < 2 or server.connections < 3) and time.monotonic() < deadline:
                time.sleep(0.01)
        assert time.monotonic() - start < 3
        # every server side is gone: each socket reads to EOF instead of timing out
        slow, drip, idle = (Reader(sock).rest() for sock in sockets)
        assert slow == b"" and idle == b""
        assert drip.startswith(b"HTTP/1.1 200 OK\r\n")


@contextmanager
def connect_later() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()
