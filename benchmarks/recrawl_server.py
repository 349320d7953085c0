"""nginx for the recrawl benchmark: several loopback hosts, the validator mix, one
host that ignores conditional requests, and an access log that counts every byte.

Static files, so nginx itself answers ``If-None-Match`` and ``If-Modified-Since``
as a real server does; the mix is per folder (``recrawl_site.py``):

* ``/e/``: ETag only (``add_header Last-Modified ""`` removes the header, and
  ``if_modified_since off`` makes nginx ignore an ``If-Modified-Since``, which it
  would otherwise still answer from the file's mtime: a client must not get a
  304 for a validator the server never sent);
* ``/m/``: Last-Modified only (``etag off``);
* ``/n/``: neither (both of the above).

The last host ignores conditional requests and always answers 200 with the full
body, validators included: it is a proxy (``proxy_set_header If-None-Match ""``,
the same for ``If-Modified-Since``) in front of a server block on another port
that serves its folder with the same mix. nginx never answers 304 for a proxied
response without a cache (``disable_not_modified``), so even a header the
proxy missed would get 200.

Bytes received are counted where every tool is counted the same: one line per
request in ``access.log`` (``$bytes_sent``: headers and body as sent,
``$body_bytes_sent``), written unbuffered, so the lines between two offsets of
the file are one tool's crawl (``LogSlice``).
"""

from __future__ import annotations

import contextlib
import http.client
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loopback_hosts import BroadServer, host_addresses, wait_hosts_ready
from servers import (
    _nginx_version,
    find_nginx,
    free_port,
    nginx_conf,
    nginx_user,
    running_nginx,
)

#: A path no site has: ``lines_since`` asks for it to know the log is complete.
SENTINEL_PATH = "/.log-sentinel-"
SETTLE_SECONDS = 10.0

#: The host is the address and port that took the request, not the Host header:
#: wget2 sends ``Host: 127.77.0.1`` without the port.
LOG_FORMAT = "\\t".join(
    ("$server_addr:$server_port", "$request_method", "$request_uri", "$status", "$bytes_sent",
     "$body_bytes_sent")
)  # fmt: skip

_VALIDATORS = """\
        location = /robots.txt {{
        }}
        location /e/ {{
            if_modified_since off;
            add_header Last-Modified "";
        }}
        location /m/ {{
            etag off;
        }}
        location /n/ {{
            etag off;
            if_modified_since off;
            add_header Last-Modified "";
        }}
"""

#: The http{} lines before the server blocks: the log format, the proxy's backend.
_HTTP = """\
    log_format recrawl "{log_format}";
    upstream ignoring_backend {{
        server 127.0.0.1:{backend_port};
        keepalive 32;
    }}
"""


def nginx_config(
    *, tmp: str, root: Path, addresses: list[str], port: int, backend_port: int, user: str
) -> str:
    """One server block per host (the last a proxy that drops the validators)."""
    log = f"{tmp}/access.log"
    blocks = []
    for index, address in enumerate(addresses[:-1]):
        blocks.append(
            f"    server {{\n        listen {address}:{port};\n        root {root}/{index};\n"
            f"        access_log {log} recrawl;\n" + _VALIDATORS.format() + "    }\n"
        )
    last = len(addresses) - 1
    blocks.append(
        f"    server {{\n        listen {addresses[-1]}:{port};\n"
        f"        access_log {log} recrawl;\n"
        "        location / {\n"
        "            proxy_pass http://ignoring_backend;\n"
        "            proxy_http_version 1.1;\n"
        '            proxy_set_header Connection "";\n'
        "            proxy_set_header Host $http_host;\n"
        '            proxy_set_header If-None-Match "";\n'
        '            proxy_set_header If-Modified-Since "";\n'
        "        }\n    }\n"
    )
    blocks.append(
        f"    server {{\n        listen 127.0.0.1:{backend_port};\n        root {root}/{last};\n"
        + _VALIDATORS.format()
        + "    }\n"
    )
    head = _HTTP.format(log_format=LOG_FORMAT, backend_port=backend_port)
    return nginx_conf(tmp=tmp, http=head + "".join(blocks), user=user, connections=2048)


@dataclass(frozen=True, slots=True)
class LogLine:
    url: str  # http://host:port/path?query
    method: str
    status: int
    bytes_sent: int
    body_bytes: int


@dataclass(slots=True)
class RecrawlServer:
    """The running nginx: its hosts, and its access log read by offsets."""

    broad: BroadServer
    access_log: Path
    _sentinels: int = 0

    @property
    def addresses(self) -> list[str]:
        return self.broad.addresses

    @property
    def port(self) -> int:
        return self.broad.port

    def mark(self) -> int:
        """The access log's size now: where the next crawl's lines start."""
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def lines_since(self, offset: int) -> list[LogLine]:
        """Every request logged since ``offset``, the last one included.

        nginx writes a request's line after the client has its last byte, so a
        read right after a crawl can miss the final line. One worker logs requests
        in the order they finish: a sentinel request sent now is logged after
        every request that already finished, so once its line is there, all of
        theirs are (waited for at most ``SETTLE_SECONDS``).
        """
        self._sentinels += 1
        sentinel = f"{SENTINEL_PATH}{self._sentinels}"
        conn = http.client.HTTPConnection(self.addresses[0], self.port, timeout=SETTLE_SECONDS)
        try:
            conn.request("GET", sentinel)
            conn.getresponse().read()
        finally:
            conn.close()
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            lines = self._read_from(offset)
            ends = [i for i, line in enumerate(lines) if line.url.endswith(sentinel)]
            if ends:
                return [x for x in lines[: ends[0]] if SENTINEL_PATH not in x.url]
            if time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not log {sentinel} within {SETTLE_SECONDS} s")
            time.sleep(0.01)

    def _read_from(self, offset: int) -> list[LogLine]:
        with self.access_log.open("rb") as fh:
            fh.seek(offset)
            data = fh.read().decode(errors="replace")
        return [parse_line(line) for line in data.splitlines() if line.strip()]


def parse_line(line: str) -> LogLine:
    host, method, uri, status, sent, body = line.split("\t")
    return LogLine(f"http://{host}{uri}", method, int(status), int(sent), int(body))


@contextlib.contextmanager
def open_recrawl_nginx(root: Path, hosts: int, port: int | None = None) -> Iterator[RecrawlServer]:
    """nginx serving ``root/0`` .. ``root/HOSTS-1`` on ``hosts`` loopback addresses.

    ``port``: the port to listen on (the site's links name it, so the site can be
    written before the server starts); None: a free one.
    """
    binary = find_nginx()
    if binary is None:
        raise RuntimeError("nginx is not installed (apt-get install -y nginx)")
    addresses = host_addresses(hosts)
    with tempfile.TemporaryDirectory(prefix="trio-crawl-recrawl-nginx-") as tmp:
        root = root.resolve()
        user = nginx_user(root)
        port = port or free_port(addresses[0])
        conf = nginx_config(
            tmp=tmp,
            root=root,
            addresses=addresses,
            port=port,
            backend_port=free_port(),
            user=user,
        )
        with running_nginx(binary, tmp, conf) as (proc, error_log):
            broad = BroadServer(
                addresses=addresses,
                port=port,
                description=(
                    f"nginx {_nginx_version(binary)}, 1 worker, {hosts} hosts "
                    f"{addresses[0]}..{addresses[-1]}:{port} (the last ignores validators)"
                ),
                master_pid=proc.pid,
            )
            wait_hosts_ready(broad, proc, error_log)
            yield RecrawlServer(broad, Path(tmp) / "access.log")
