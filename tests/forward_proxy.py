"""A tiny forwarding HTTP proxy for the identity tests (stdlib, 127.0.0.1, port 0).

It takes absolute-form requests (``GET http://host:port/path HTTP/1.1``), logs
each request line and its headers, and forwards the request to one upstream
server, whatever host the URL names: a test can crawl ``http://site.invalid/``
and only ever connect to 127.0.0.1. Bodies are passed on as they come
(content codings untouched), with a ``Content-Length``. ``CONNECT host:port``
(https through the proxy) opens a tunnel to ``127.0.0.1:tunnel_port``,
whatever host it names, and relays bytes both ways until either side closes.
With a ``login``, a request without that ``Proxy-Authorization: Basic``
login is answered 407 (and counted in ``refused``), not forwarded. POST is
forwarded too, with its body.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["ForwardProxy", "serve_proxy"]

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "transfer-encoding",
    "te",
}


@dataclass
class ForwardProxy:
    url: str
    upstream_port: int
    tunnel_port: int | None = None
    #: (request line, lower-cased headers) of every request, in order
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    #: ``(user, password)`` the proxy requires; None: none
    login: tuple[str, str] | None = None
    #: requests answered 407 (no login, or a wrong one)
    refused: int = 0
    #: (method, path) of every request forwarded, in order
    forwarded: list[tuple[str, str]] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return [line for line, _ in self.seen]


def _handler(proxy: ForwardProxy) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def logged_in(self) -> bool:
            if proxy.login is None:
                return True
            want = base64.b64encode(":".join(proxy.login).encode()).decode()
            if self.headers.get("Proxy-Authorization", "") == f"Basic {want}":
                return True
            proxy.refused += 1
            self.rfile.read(int(self.headers.get("Content-Length") or 0))  # not forwarded
            self.send_response(407, "Proxy Authentication Required")
            self.send_header("Proxy-Authenticate", 'Basic realm="test proxy"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False

        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            proxy.seen.append((self.requestline, headers))
            target = urlsplit(self.path)
            if not target.scheme:  # origin-form: not a proxy request
                self.send_error(400, "absolute-form request expected")
                return
            if not self.logged_in():
                return
            path = target.path or "/"
            if target.query:
                path += "?" + target.query
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            proxy.forwarded.append((self.command, path))
            upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=10)
            try:
                sent = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                upstream.request(self.command, path, body=body or None, headers=sent)
                answer = upstream.getresponse()
                body = answer.read()
                self.send_response(answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            finally:
                upstream.close()

        do_POST = do_GET

        def do_CONNECT(self) -> None:
            proxy.seen.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
            if proxy.tunnel_port is None:
                self.send_error(405, "no tunnels here")
                return
            with socket.create_connection(("127.0.0.1", proxy.tunnel_port), timeout=10) as far:
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                near = self.connection
                for _ in range(100_000):  # bounded relay
                    ready, _, _ = select.select([near, far], [], [], 10)
                    if not ready:
                        break
                    data = b""
                    for sock in ready:
                        data = sock.recv(65536)
                        if not data:
                            break
                        (far if sock is near else near).sendall(data)
                    if not data:
                        break
            self.close_connection = True

    return Forward


@contextlib.contextmanager
def serve_proxy(
    upstream_port: int, tunnel_port: int | None = None, login: tuple[str, str] | None = None
) -> Iterator[ForwardProxy]:
    """A running proxy forwarding to ``127.0.0.1:upstream_port`` (tunnels:
    to ``127.0.0.1:tunnel_port``), requiring ``login`` if given."""
    proxy = ForwardProxy(url="", upstream_port=upstream_port, tunnel_port=tunnel_port, login=login)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
